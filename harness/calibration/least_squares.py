"""Weighted, penalised linear least squares: what every calibration fit (harness.calibration.fits) solves, the design
it reads for each model, and a trained fit's predictions and prediction intervals.

Prediction intervals (Montgomery, Peck & Vining, "Introduction to Linear Regression Analysis", §2.4; §5.5 for
weights): ŷ₀ ± t(df) · s · √(1/w₀ + z₀ᵀ C z₀), C the unscaled covariance of the coefficients (A⁻¹ ZᵀWZ A⁻¹ with
A = ZᵀWZ + penalty), w₀ the new point's weight and df = n − trace(hat matrix).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from harness.models.work_kinds import WORK_FACTS

FACT_NAMES: tuple[str, ...] = ("macs", "params", "activation_mib")
"""Static model facts the `features` fit may use (from the ONNX graph, see harness.models.facts): compute,
weights, and the activations one inference writes (a proxy for memory traffic)."""
HARNESS = "harness"
"""The harness value's name among a ridge's penalised columns."""
LIBRARY_PREFIX = "library:"
"""Fact names of the device library's evidence: `library:<table>` is that table's latency of the model (ms)."""
KERNEL_FACT = "kernel_ms"
"""A fact of a device with a kernel table (harness probe): the table's prediction of the model's latency from its graph,
its own family left out of the table's fit (harness.kernels.evidence)."""
RANK_TOLERANCE = 1e-10
"""A design whose smallest singular value is below this share of its largest is singular (collinear facts)."""


@dataclass(frozen=True)
class Design:
    """What a fit may use for each model: its harness value and its static facts (one column per name), and what
    the intervals ask of it: its architecture family (empty when unknown; no fit reads it)."""

    harness: np.ndarray
    facts: np.ndarray = field(default_factory=lambda: np.empty((0, 0)))
    fact_names: tuple[str, ...] = ()
    families: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "harness", np.asarray(self.harness, dtype=float).reshape(-1))
        facts = np.asarray(self.facts, dtype=float)
        object.__setattr__(self, "facts", facts.reshape(len(self.harness), len(self.fact_names)))
        object.__setattr__(self, "families", tuple(self.families))
        if self.families and len(self.families) != len(self.harness):
            raise ValueError(f"{len(self.families)} families for {len(self.harness)} models")

    def __len__(self) -> int:
        return len(self.harness)

    def take(self, index: np.ndarray) -> Design:
        positions = np.arange(len(self.harness))[index].reshape(-1)  # a boolean mask or indices
        families = tuple(self.families[i] for i in positions) if self.families else ()
        return Design(self.harness[index], self.facts[index], self.fact_names, families)

    def select(self, names: tuple[str, ...]) -> np.ndarray:
        """The facts' columns of these names, in that order."""
        return self.facts[:, [self.fact_names.index(name) for name in names]]

    @property
    def static_names(self) -> tuple[str, ...]:
        return tuple(name for name in self.fact_names if name in FACT_NAMES)

    @property
    def work_names(self) -> tuple[str, ...]:
        return tuple(name for name in self.fact_names if name in WORK_FACTS)

    @property
    def library_names(self) -> tuple[str, ...]:
        return tuple(name for name in self.fact_names if name.startswith(LIBRARY_PREFIX))


@dataclass(frozen=True)
class Solution:
    """Coefficients of one penalised weighted least-squares problem and what its intervals need."""

    coef: np.ndarray
    cov_unscaled: np.ndarray
    a_inv: np.ndarray
    s2: float
    df: float
    hat: np.ndarray


def solve(z: np.ndarray, t: np.ndarray, w: np.ndarray, penalty: np.ndarray) -> Solution | None:
    """argmin Σ wᵢ(tᵢ − zᵢβ)² + βᵀ penalty β, or None when the problem is singular. With no residual degrees
    of freedom left (as many coefficients as points) s² is NaN: the fit predicts but has no interval."""
    zw = z * w[:, None]
    gram = z.T @ zw
    a = gram + penalty
    singular = np.linalg.svd(a, compute_uv=False)
    if singular[-1] <= RANK_TOLERANCE * singular[0]:
        return None
    a_inv = np.linalg.inv(a)
    coef = a_inv @ (zw.T @ t)
    hat = np.einsum("ij,jk,ik->i", z, a_inv, zw)
    df = len(t) - float(hat.sum())
    residual = t - z @ coef
    s2 = float(np.sum(w * residual**2) / df) if df > 1e-9 else math.nan
    return Solution(coef, a_inv @ gram @ a_inv, a_inv, s2, df, hat)


@dataclass(frozen=True)
class FittedModel:
    """One fit trained on some models: predicts, and gives prediction intervals, for others."""

    name: str
    solution: Solution
    log_space: bool
    weighted: bool
    rows: Callable[[Design], np.ndarray]
    alpha: float | None = None
    fact_names: tuple[str, ...] = ()
    equation: str = ""
    exponents: tuple[float, ...] = ()
    """A log-space fit's power of each fact, in the facts' own units (fact_names' order)."""
    offset: Callable[[Design], np.ndarray] | None = None
    """A term of the fit's space with no coefficient (a fact whose power is fixed at 1), added to rows · coef."""

    def fitted(self, design: Design) -> np.ndarray:
        """The fit's value in its own space (log device for a log-space fit)."""
        t = self.rows(design) @ self.solution.coef
        return t if self.offset is None else t + self.offset(design)

    def predict(self, design: Design) -> np.ndarray:
        t = self.fitted(design)
        return np.exp(t) if self.log_space else t

    def variance_terms(self, design: Design) -> tuple[np.ndarray, np.ndarray]:
        """(1/w₀, z₀ᵀ C z₀) per model: the new observation's own scatter and the fitted value's uncertainty,
        both in units of s² in the fit's space."""
        z = self.rows(design)
        own = self.predict(design) ** 2 if self.weighted else np.ones(len(design))
        return own, np.einsum("ij,jk,ik->i", z, self.solution.cov_unscaled, z)

    def beyond_reach(self, design: Design) -> np.ndarray:
        """Per model: True when its leverage z₀ᵀ A⁻¹ z₀ exceeds 3p/n, p the fit's effective number of
        coefficients (trace of the hat matrix) and n its models: the warning leverage of the Williams plot, the
        usual applicability-domain limit of QSAR models (Gramatica 2007, QSAR Comb. Sci. 26:694). Beyond it the
        prediction rests on extrapolating every coefficient, not on models like it."""
        z = self.rows(design)
        leverage = np.einsum("ij,jk,ik->i", z, self.solution.a_inv, z)
        return leverage > 3 * float(self.solution.hat.sum()) / len(self.solution.hat)

    def interval(self, design: Design, confidence: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(prediction, low, high) in device units for new models, the interval made in log space: every calibrated
        metric (latency, memory, energy) is positive, so no interval reaches zero. A log-space fit's interval is
        exponentiated; a linear fit's half-width h about ŷ becomes ŷ · e^(±h/ŷ), its relative spread taken as the
        standard error of log ŷ (the delta method: sd(log y) ≈ sd(y)/y), the same interval to first order where it
        is narrow. A linear fit's prediction at or below zero has no interval (NaN)."""
        own, fitted = self.variance_terms(design)
        half = stats.t.ppf(0.5 + confidence / 2, self.solution.df) * np.sqrt(self.solution.s2 * (own + fitted))
        t = self.fitted(design)
        predicted = np.exp(t) if self.log_space else t
        if not self.log_space:
            with np.errstate(divide="ignore", invalid="ignore"):
                half = np.where(t > 0, half / t, np.nan)
                t = np.log(np.where(t > 0, t, np.nan))
        with np.errstate(over="ignore"):  # far out on few degrees of freedom the interval is unbounded: inf
            return predicted, np.exp(t - half), np.exp(t + half)
