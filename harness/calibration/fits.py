"""The calibration fits: eight ways (FITS) to map a harness number to the device's, each one (weighted, possibly
penalised) linear least-squares problem (harness.calibration.least_squares) in its own space.

- `ols`: device = a + b · harness by ordinary least squares, the straight line of the published
  experiments. It minimises absolute error, so the largest models set it.
- `relative`: the same line by weighted least squares with weights 1/device², i.e. the line minimising the
  squared relative errors Σ((y − ŷ)/y)²: users ask "how many percent off will it be?".
- `loglog`: a power law, log device = a + b · log harness. Log error ≈ relative error, and the curve
  follows a device that scales differently with model size than the harness does.
- `ops`: device = b_dw · (harness time in depthwise convolutions) + b_rest · (the rest of it), by weighted
  least squares with weights 1/device² like `relative`. The split comes from each model's per-op profile
  (PER_OP=1): engines differ most on depthwise convolutions, which move many bytes per multiply (on Pixel 3
  data TFLite runs them at about the harness's ORT speed and everything else 1.8× slower), so one factor for
  the whole latency mispredicts families whose share of depthwise time differs.
- `features`: log device = a + b · log harness + Σ c_k · log fact_k over static model facts (MACs,
  parameters, activation size), ridge-penalised on the facts only, the strength chosen by leave-one-out
  inside the training points. An infinite strength gives back `loglog`; zero strength represents a
  multiplicative law exactly.
- `work`: device = a + b · harness + Σ c_k · work_k over the graph's work per operator kind (spatial, pointwise
  and depthwise convolution MACs, fully connected MACs, pooling, arithmetic, activation and other output
  elements: harness.models.work_kinds), by weighted least squares with weights 1/device² and a ridge penalty on
  b and every c_k (standardised), its strength chosen by leave-one-out inside the training points. Times add
  over a graph's nodes, so a device whose cost per unit of one kind differs from the host's (a 3x3 convolution
  against a 1x1 one, pooling against arithmetic) is a sum with other weights: the fit learns them, and the
  penalty keeps a handful of models from learning noise. Where the harness value carries the device's order,
  the penalty falls on the kinds; where a kind costs the device what it does not cost the host, on the harness.
- `kernels`: log device = a + log kernels, the device's own kernel table's prediction of the model from its graph
  (harness probe; harness.kernels.evidence), the model's family left out of that table's fit, times one scale. The
  table predicts each kernel as the device runs it; the device's model-level measurements then correct its scale.
- `library`: log device = a + b · log harness + Σ c_j · log library_j over the device library's tables (harness.
  device.library): another device's latency of the same model, measured where its table has the model and predicted from
  the harness's profile where it has not (harness.calibration.transfer). Ridge-penalised on the library devices, and on
  the harness too where that gives the smaller leave-one-out error (the harness then weighed as one more device),
  the strength chosen by leave-one-out inside the training points, so the few target measurements decide which
  devices carry the prediction and how much each weighs.

Prediction intervals are computed in each fit's own space (Montgomery, Peck & Vining, "Introduction to
Linear Regression Analysis", §2.4; §5.5 for weights): ŷ₀ ± t(df) · s · √(1/w₀ + z₀ᵀ C z₀), where C is the
unscaled covariance of the coefficients (A⁻¹ ZᵀWZ A⁻¹ with A = ZᵀWZ + penalty, which is (ZᵀWZ)⁻¹ unpenalised),
w₀ the new point's weight (1/ŷ₀² for `relative`) and df = n − trace(hat matrix). Every interval is made in log space
(FittedModel.interval: a linear fit's relative half-width stands as the spread of log ŷ), so in device units they are
asymmetric, scale with the prediction and never reach zero.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from harness.calibration.least_squares import (
    FACT_NAMES,
    HARNESS,
    KERNEL_FACT,
    RANK_TOLERANCE,
    Design,
    FittedModel,
    solve,
)
from harness.core.errors import DataError
from harness.models.work_kinds import WORK_FACTS

OP_SPLIT = "depthwise_share"
"""A measured fact the `ops` fit reads: the share of a model's operator time in depthwise convolutions
(harness.analysis.per_op.PerOp.depthwise_share)."""
FIT_FACTS: tuple[str, ...] = (*FACT_NAMES, OP_SPLIT, *WORK_FACTS)
"""Every per-model fact some fit reads that the runs give (KERNEL_FACT, the device's kernel table's, joins them in
calibrate_runs where the device has a table)."""
RIDGE_ALPHAS: tuple[float, ...] = (0.0, *np.logspace(-3, 3, 13).tolist(), math.inf)
"""Penalty strengths tried on standardised log facts; inf drops the facts (the `loglog` fit). On equal
leave-one-out error the stronger penalty wins: the simpler model."""


def _line_rows(design: Design) -> np.ndarray:
    return np.column_stack([np.ones(len(design)), design.harness])


def _log_line_rows(design: Design) -> np.ndarray:
    return np.column_stack([np.ones(len(design)), np.log(design.harness)])


def _exp_text(log_value: float) -> str:
    """e^x as a number, or as e^x where it would overflow a float (facts in the billions give such constants)."""
    return f"{math.exp(log_value):.4g}" if log_value < 700 else f"e^{log_value:.4g}"


def _signed(value: float) -> str:
    return f"{'+' if value >= 0 else '−'} {abs(value):.4g}"


def fit_ols(design: Design, y: np.ndarray) -> FittedModel | None:
    solution = solve(_line_rows(design), y, np.ones(len(y)), np.zeros((2, 2)))
    if solution is None:
        return None
    a, b = solution.coef
    return FittedModel("ols", solution, False, False, _line_rows, equation=f"device = {b:.4g} · harness {_signed(a)}")


def fit_relative(design: Design, y: np.ndarray) -> FittedModel | None:
    solution = solve(_line_rows(design), y, 1.0 / y**2, np.zeros((2, 2)))
    if solution is None:
        return None
    a, b = solution.coef
    return FittedModel("relative", solution, False, True, _line_rows,
                       equation=f"device = {b:.4g} · harness {_signed(a)}")


def fit_loglog(design: Design, y: np.ndarray) -> FittedModel | None:
    solution = solve(_log_line_rows(design), np.log(y), np.ones(len(y)), np.zeros((2, 2)))
    if solution is None:
        return None
    a, b = solution.coef
    return FittedModel("loglog", solution, True, False, _log_line_rows,
                       equation=f"device = {_exp_text(a)} · harness^{b:.4g}")


def _log_kernels(design: Design) -> np.ndarray:
    return np.log(design.select((KERNEL_FACT,))[:, 0])


def _scale_rows(design: Design) -> np.ndarray:
    return np.ones((len(design), 1))


def fit_kernels(design: Design, y: np.ndarray) -> FittedModel | None:
    """The kernel table's prediction times one scale (log device = a + log kernels): the table already predicts
    the device's own milliseconds, and a free slope fitted on a handful of models extrapolates a model outside
    their range (a slope of 1.15 on three models put a fourth 32% low). The harness value is not read."""
    if KERNEL_FACT not in design.fact_names:
        return None
    solution = solve(_scale_rows(design), np.log(y) - _log_kernels(design), np.ones(len(y)), np.zeros((1, 1)))
    if solution is None:
        return None
    return FittedModel("kernels", solution, True, False, _scale_rows, fact_names=(KERNEL_FACT,),
                       equation=f"device = {_exp_text(solution.coef[0])} · kernels", offset=_log_kernels)


@dataclass(frozen=True)
class _Standardiser:
    """Log facts centred and scaled on the training models (so one penalty weighs every fact alike); a fact
    that does not vary among them is left out. The unpenalised base is [1, log harness], or [1] alone when the log
    harness is penalised like a fact (`harness_penalised`: it is then weighed against the facts, not put first)."""

    columns: tuple[str, ...]
    center: np.ndarray
    scale: np.ndarray
    harness_penalised: bool = False

    @classmethod
    def learn(cls, design: Design, names: tuple[str, ...], harness_penalised: bool = False) -> _Standardiser:
        logs = np.log(design.select(names))
        if harness_penalised:
            logs = np.column_stack([np.log(design.harness), logs])
            names = (HARNESS, *names)
        scale = logs.std(axis=0)
        varying = [int(i) for i in np.flatnonzero(scale > 1e-12 * np.maximum(1.0, np.abs(logs).max(axis=0)))]
        return cls(tuple(names[i] for i in varying), logs[:, varying].mean(axis=0), scale[varying], harness_penalised)

    @property
    def facts(self) -> tuple[str, ...]:
        return tuple(name for name in self.columns if name != HARNESS)

    def base(self, design: Design) -> np.ndarray:
        return np.ones((len(design), 1)) if self.harness_penalised else _log_line_rows(design)

    def rows(self, design: Design) -> np.ndarray:
        logs = np.log(design.select(self.facts))
        if HARNESS in self.columns:
            logs = np.column_stack([np.log(design.harness), logs])
        return np.column_stack([self.base(design), (logs - self.center) / self.scale])


def ridge_loo_errors(design: Design, y: np.ndarray, scaler: _Standardiser) -> np.ndarray:
    """Mean squared leave-one-out residual in log space for every RIDGE_ALPHAS strength (inf where undefined).

    The residual of a left-out model is e_i / (1 − h_ii), exact for a fixed penalty. Only the facts are
    penalised, so (Frisch–Waugh–Lovell) the hat matrix is that of the unpenalised base ([1, log harness]) plus the
    ridge hat of the facts with the base projected out, U diag(s²/(s² + α)) Uᵀ from the SVD U S Vᵀ of the projected
    facts: one decomposition serves every α."""
    t = np.log(y)
    base = scaler.base(design)
    q, _ = np.linalg.qr(base)
    facts = scaler.rows(design)[:, base.shape[1]:]
    projected_t, projected = t - q @ (q.T @ t), facts - q @ (q.T @ facts)
    u, s, _ = np.linalg.svd(projected, full_matrices=False)
    alphas = np.array(RIDGE_ALPHAS)
    kept = s > RANK_TOLERANCE * max(s.max(initial=0.0), 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        shrink = np.where(kept, s**2 / (s**2 + alphas[:, None]), 0.0)  # (alphas, facts); inf → 0
    hat = np.sum(q**2, axis=1)[:, None] + (u**2) @ shrink.T  # (models, alphas)
    residual = projected_t[:, None] - u @ (shrink * (u.T @ projected_t)).T
    with np.errstate(divide="ignore", invalid="ignore"):
        errors = np.mean((residual / (1 - hat)) ** 2, axis=0)
    errors[np.any(hat >= 1 - 1e-9, axis=0)] = math.inf
    if not kept.all():  # zero penalty on collinear facts is singular
        errors[alphas == 0] = math.inf
    return errors


def _log_ridge(name: str, design: Design, y: np.ndarray, facts: tuple[str, ...],
               harness_penalised: bool = False) -> FittedModel | None:
    """Ridge on the log of `facts` beside a log-harness line (unpenalised, or penalised like a fact), at the penalty
    of least leave-one-out error. When that penalty is infinite (the facts add nothing) it is the `loglog` fit,
    named `name`."""
    return _log_ridge_scored(name, design, y, facts, harness_penalised)[0]


def _log_ridge_scored(name: str, design: Design, y: np.ndarray, facts: tuple[str, ...],
                      harness_penalised: bool) -> tuple[FittedModel | None, float]:
    """_log_ridge's model and its least leave-one-out error (mean squared, log space)."""
    scaler = _Standardiser.learn(design, facts, harness_penalised)
    errors = ridge_loo_errors(design, y, scaler) if scaler.facts else np.array([math.inf])
    best = float(errors.min())
    # The strongest penalty within rounding of the best error: equal evidence goes to the simpler model.
    alpha = max((a for a, e in zip(RIDGE_ALPHAS, errors, strict=False) if e <= best * (1 + 1e-9) + 1e-24),
                default=math.inf)
    if math.isinf(alpha):
        loglog = fit_loglog(design, y)
        return None if loglog is None else FittedModel(
            name, loglog.solution, True, False, _log_line_rows, math.inf, (), loglog.equation + " (facts unused)"
        ), best
    unpenalised = scaler.base(design).shape[1]
    penalty = np.diag([0.0] * unpenalised + [alpha] * len(scaler.columns))
    solution = solve(scaler.rows(design), np.log(y), np.ones(len(y)), penalty)
    if solution is None:
        return None, best
    # Back to the facts' own units: log device = a' + Σ (c_k / scale_k) · log fact_k (the harness among them).
    powers = dict(zip(scaler.columns, solution.coef[unpenalised:] / scaler.scale, strict=True))
    a = solution.coef[0] - float(np.sum(solution.coef[unpenalised:] / scaler.scale * scaler.center))
    harness_power = powers.pop(HARNESS, 0.0) if harness_penalised else solution.coef[1]
    terms = " · ".join(f"{fact}^{e:.3g}" for fact, e in powers.items())
    equation = f"device = {_exp_text(a)} · harness^{harness_power:.4g} · {terms} (ridge α = {alpha:.3g})"
    return FittedModel(name, solution, True, False, scaler.rows, alpha, scaler.facts, equation,
                       tuple(float(e) for e in powers.values())), best


def fit_features(design: Design, y: np.ndarray) -> FittedModel | None:
    """Ridge on the log static facts (MACs, parameters, activations)."""
    return _log_ridge("features", design, y, design.static_names) if design.static_names else None


def fit_library(design: Design, y: np.ndarray) -> FittedModel | None:
    """Ridge on the log latencies of the library's devices: which of them carry the target, and how much beside the
    harness, is the penalty and the weights that leave-one-out on the target's own models choose."""
    if not design.library_names:
        return None
    # The harness first and the library beside it, or weighed as one more device: the one of least leave-one-out
    # error (on equal errors, the harness first).
    fits = [_log_ridge_scored("library", design, y, design.library_names, penalised) for penalised in (False, True)]
    return min(fits, key=lambda fit: fit[1])[0]


WORK_ALPHAS: tuple[float, ...] = (0.0, *np.logspace(-4, 3, 15).tolist())
"""Penalty strengths the `work` fit tries, in units of the weighted sum of squares of the intercept column (so they
mean the same for any number of models and any device unit); 0 recovers an exact sum of kinds exactly."""


@dataclass(frozen=True)
class _LinearStandardiser:
    """The harness value and the work facts, centred and scaled on the training models; a work kind none of them
    does, or all do alike, is left out."""

    columns: tuple[str, ...]
    center: np.ndarray
    scale: np.ndarray

    @staticmethod
    def raw(design: Design, columns: tuple[str, ...]) -> np.ndarray:
        return np.column_stack([design.harness, design.select(columns)])

    @classmethod
    def learn(cls, design: Design) -> _LinearStandardiser:
        names = design.work_names
        values = cls.raw(design, names)
        scale = values.std(axis=0)
        varying = scale > 1e-12 * np.maximum(1.0, np.abs(values).max(axis=0))
        varying[0] = True  # the harness value always stays: a constant one gives a singular fit, as for `relative`
        kept = tuple(name for name, keep in zip(names, varying[1:], strict=True) if keep)
        return cls(kept, values[:, varying].mean(axis=0), np.where(scale[varying] > 0, scale[varying], 1.0))

    def rows(self, design: Design) -> np.ndarray:
        return np.column_stack([np.ones(len(design)), (self.raw(design, self.columns) - self.center) / self.scale])


def work_loo_errors(z: np.ndarray, y: np.ndarray, alphas: tuple[float, ...]) -> np.ndarray:
    """Mean squared relative leave-one-out error of the `work` fit at every penalty (inf where a model carries all
    the weight of a coefficient): e_i / (1 − h_ii), exact for fixed weights and penalty."""
    w = 1.0 / y**2
    base = float(np.sum(w))
    errors = []
    for alpha in alphas:
        penalty = np.diag([0.0] + [alpha * base] * (z.shape[1] - 1))
        solution = solve(z, y, w, penalty)
        if solution is None or np.any(solution.hat >= 1 - 1e-9):
            errors.append(math.inf)
            continue
        residual = (y - z @ solution.coef) / (1 - solution.hat)
        errors.append(float(np.mean(w * residual**2)))
    return np.array(errors)


def fit_work(design: Design, y: np.ndarray) -> FittedModel | None:
    """Ridge on the harness value and the work per operator kind, at the penalty of least leave-one-out error; equal
    errors go to the stronger penalty (the simpler model)."""
    if not design.work_names:
        return None
    scaler = _LinearStandardiser.learn(design)
    z = scaler.rows(design)
    errors = work_loo_errors(z, y, WORK_ALPHAS)
    if not np.isfinite(errors).any():
        return None
    best = errors.min()
    alpha = max(a for a, e in zip(WORK_ALPHAS, errors, strict=True) if e <= best * (1 + 1e-9) + 1e-24)
    solution = solve(z, y, 1.0 / y**2, np.diag([0.0] + [alpha * float(np.sum(1.0 / y**2))] * (z.shape[1] - 1)))
    if solution is None:
        return None
    # The scale of its intervals is at least the leave-one-out error the penalty was chosen by: with as many
    # coefficients as a handful of models can carry, the in-sample residuals understate how far a new model lands
    # (the leave-one-out residuals are the jackknife's honest ones; Barber et al. 2021, Ann. Statist. 49:486).
    solution = replace(solution, s2=max(solution.s2, best) if math.isfinite(solution.s2) else best)
    slopes = solution.coef[1:] / scaler.scale
    intercept = solution.coef[0] - float(np.sum(slopes * scaler.center))
    terms = " ".join(f"{_signed(c)} · {name}" for name, c in zip(("harness", *scaler.columns), slopes, strict=True))
    return FittedModel("work", solution, False, True, scaler.rows, alpha, scaler.columns,
                       equation=f"device = {intercept:.4g} {terms} (ridge α = {alpha:.3g})")


def _op_split_rows(design: Design) -> np.ndarray:
    share = design.select((OP_SPLIT,))[:, 0]
    return np.column_stack([design.harness * share, design.harness * (1 - share)])


def fit_ops(design: Design, y: np.ndarray) -> FittedModel | None:
    """Two factors, one for the harness time in depthwise convolutions and one for the rest. Models that all
    share one split make the two columns collinear: no fit."""
    if OP_SPLIT not in design.fact_names:
        return None
    solution = solve(_op_split_rows(design), y, 1.0 / y**2, np.zeros((2, 2)))
    if solution is None:
        return None
    depthwise, rest = solution.coef
    return FittedModel("ops", solution, False, True, _op_split_rows, fact_names=(OP_SPLIT,),
                       equation=f"device = {depthwise:.4g} · harness in depthwise convs + {rest:.4g} · the rest")


def exact_loo(model: FittedModel, design: Design, y: np.ndarray) -> np.ndarray | None:
    """Leave-one-out predictions of a least-squares fit without refitting: t_i − e_i / (1 − h_ii) in the fit's
    space (exact for fixed weights and penalty). None when a model carries all the weight of a coefficient."""
    h = model.solution.hat
    if np.any(h >= 1 - 1e-9):
        return None
    t = np.log(y) if model.log_space else y
    residual = t - model.fitted(design)
    predicted = t - residual / (1 - h)
    return np.exp(predicted) if model.log_space else predicted


@dataclass(frozen=True)
class FitSpec:
    """One candidate fit: its name, what it minimises, and what it needs of the data."""

    name: str
    what: str
    train: Callable[[Design, np.ndarray], FittedModel | None]
    positive: bool
    needs_facts: bool = False
    needs_op_split: bool = False
    needs_work: bool = False
    needs_library: bool = False
    needs_kernels: bool = False
    tuned: bool = False
    """True when training chooses a setting from the data (the ridge strength): leave-one-out must then
    retrain in every fold, and cannot take the shortcut of exact_loo."""
    within_reach_only: bool = False
    """True for a fit whose extra coefficients are chosen by leave-one-out among the calibration models: that tests
    interpolation only, so a model beyond their reach (FittedModel.beyond_reach) is predicted by another fit."""


FITS: tuple[FitSpec, ...] = (
    FitSpec("ols", "straight line, least squared error", fit_ols, positive=False),
    FitSpec("ops", "harness time split by the per-op profile: depthwise convolutions and the rest, a factor each "
            "(WLS, weights 1/device²)", fit_ops, positive=True, needs_op_split=True),
    FitSpec("relative", "straight line, least squared relative error (WLS, weights 1/device²)", fit_relative,
            positive=True),
    FitSpec("loglog", "power law, least squared log error", fit_loglog, positive=True),
    FitSpec("kernels", "the device's kernel table's prediction from the graph (its family left out) times one scale, "
            "least squared log error", fit_kernels, positive=True, needs_kernels=True),
    FitSpec("features", "log-linear in harness and static facts, ridge strength by inner leave-one-out",
            fit_features, positive=True, needs_facts=True, tuned=True, within_reach_only=True),
    FitSpec("work", "linear in harness and the graph's work per operator kind (WLS, weights 1/device²), ridge "
            "strength by inner leave-one-out", fit_work, positive=True, needs_work=True, tuned=True),
    FitSpec("library", "log-linear in harness and the library devices' latencies of the model, ridge strength by "
            "inner leave-one-out", fit_library, positive=True, needs_library=True, tuned=True),
)
"""In order of simplicity: on equal held-out figures the earlier fit is chosen. `ols` is the reference line;
`ops` is a sum of proportional parts (no intercept), `relative` a line with a fixed cost, `loglog` bends, all with
two coefficients; `kernels` scales another input than the harness's measurement (one coefficient); `features` adds
a parameter per fact, `work` one per operator kind, `library` one per library device. A fit whose input is missing
(per-op profiles for `ops`, a kernel table for `kernels`) is not a candidate."""
FIT_NAMES: tuple[str, ...] = tuple(spec.name for spec in FITS)


def fit_spec(name: str) -> FitSpec:
    for spec in FITS:
        if spec.name == name:
            return spec
    raise DataError(f"unknown fit {name!r}; choose auto or one of: {', '.join(FIT_NAMES)}")


def unavailable_reason(spec: FitSpec, design: Design, y: np.ndarray) -> str | None:
    """Why `spec` cannot be fitted to these models at all, or None."""
    if spec.positive and (np.any(design.harness <= 0) or np.any(y <= 0)):
        return "needs positive harness and device values"
    if spec.needs_facts and not design.static_names:
        return f"needs static facts ({', '.join(FACT_NAMES)}) of every model: profile ONNX models"
    if spec.needs_op_split and OP_SPLIT not in design.fact_names:
        return "needs a per-op profile of every model: profile with PER_OP=1 (--per-op)"
    if spec.needs_work and not design.work_names:
        return "needs the graph's work per operator kind of every model: profile ONNX models"
    if spec.needs_kernels and KERNEL_FACT not in design.fact_names:
        return ("needs the device's kernel table (harness probe, the table named <device>-fp32) and an ONNX graph of "
                "every model")
    if spec.needs_library and not design.library_names:
        return "needs a library device with these models or enough models in common (harness devices)"
    return None
