"""Where the calibration models reach, and how much wider a prediction beyond them must be.

A fit learns how the device follows the harness from its calibration models. A model unlike all of them is
predicted by extrapolation, and the fit's own interval does not know how far its law bends there: it widens with
the leverage of the harness value only, and not at all for a model whose operators differ. So a model is
*outside* the calibration models' reach when it lies outside the range they span in any of:

- its harness value (the fit's input);
- its op mix: the share of its operator time in depthwise convolutions (per-op profiles) and its MACs per byte of
  activations written (static facts; arithmetic intensity: engines differ most on memory-bound layers);
- its architecture family: none of the calibration models is of its family (when some of them share one).

Such a model's interval gets an extra relative spread (a standard deviation in log space, added in quadrature to
each side of the interval's own width), so that it still covers the model: EXTRAPOLATION_SPREAD, or FAMILY_SPREAD for
a model of a family none of the calibration models belongs to, whose law the fit has never seen. The spread is a
global choice made on published device tables, each scored with the spread chosen on the others
(benchmarks/calibration_tables.py): not a figure one table chose for itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from harness.calibration.fits import OP_SPLIT, Design

EXTRAPOLATION_SPREAD = 0.05
"""Extra log-space standard deviation of a prediction outside the calibration models' reach (0.05: about ±10% more
at 95%, in quadrature), chosen on the published tables by benchmarks/calibration_tables.py: the spread whose widened
intervals cover the models outside their folds' reach closest to 95%."""
FAMILY_SPREAD = 0.22
"""Extra log-space standard deviation of a prediction for a model of a family no calibration model belongs to
(0.22: about ±45% more at 95%, in quadrature): the least spread whose widened intervals cover 95% of the models of
the published tables when each family in turn is held out of the calibration and of every library table
(benchmarks/library.py, `new family`; with the extrapolation spread alone they covered 65%)."""
NEW_FAMILY = "no calibration model of its family"
"""The reason Reach.outside gives a model of a family none of the calibration models belongs to."""
INTENSITY_FACTS = ("macs", "activation_mib")
MIB = 2**20


def intensity(design: Design) -> np.ndarray | None:
    """MACs per byte of activations written, per model; None when the design lacks either static fact."""
    if not set(INTENSITY_FACTS) <= set(design.fact_names):
        return None
    macs, activation_mib = design.select(INTENSITY_FACTS).T
    return macs / (activation_mib * MIB)


def _span(values: np.ndarray | None) -> tuple[float, float] | None:
    return None if values is None or not len(values) else (float(np.min(values)), float(np.max(values)))


def _share(design: Design) -> np.ndarray | None:
    return design.select((OP_SPLIT,))[:, 0] if OP_SPLIT in design.fact_names else None


@dataclass(frozen=True)
class Reach:
    """The ranges and families the calibration models span."""

    harness: tuple[float, float] | None  # None only for a design of no models
    depthwise_share: tuple[float, float] | None
    intensity: tuple[float, float] | None
    families: frozenset[str]

    @classmethod
    def of(cls, design: Design) -> Reach:
        """The reach of these calibration models. Families count only when two of them share one: when every model
        is of a family of its own, their scatter about the fit already is the error between families."""
        families = frozenset(design.families) if len(set(design.families)) < len(design.families) else frozenset()
        return cls(_span(design.harness), _span(_share(design)), _span(intensity(design)), families)

    def outside(self, design: Design) -> list[list[str]]:
        """Per model of `design`, why it lies outside this reach (empty when inside)."""
        checks = [("harness value", design.harness, self.harness, "{:.4g}"),
                  ("depthwise share", _share(design), self.depthwise_share, "{:.0%}"),
                  ("MACs per activation byte", intensity(design), self.intensity, "{:.3g}")]
        reasons: list[list[str]] = [[] for _ in range(len(design))]
        for label, values, span, form in checks:
            if values is None or span is None:
                continue
            low, high = span
            for i, value in enumerate(values):
                if np.isfinite(value) and not low <= value <= high:
                    reasons[i].append(f"{label} {form.format(value)} outside the calibration models' "
                                      f"{form.format(low)}–{form.format(high)}")
        if self.families and design.families:
            for i, family in enumerate(design.families):
                if family not in self.families:
                    reasons[i].append(f"{NEW_FAMILY} ({family})")
        return reasons

    def spreads(self, design: Design) -> tuple[list[list[str]], np.ndarray]:
        """Per model of `design`: why it lies outside this reach, and the extra spread its interval takes (0 inside,
        FAMILY_SPREAD for a new family, EXTRAPOLATION_SPREAD otherwise)."""
        reasons = self.outside(design)
        return reasons, np.array([spread_of(why) for why in reasons])


def spread_of(reasons: list[str]) -> float:
    """The extra spread of a model outside the reach for these reasons."""
    if any(why.startswith(NEW_FAMILY) for why in reasons):
        return FAMILY_SPREAD
    return EXTRAPOLATION_SPREAD if reasons else 0.0


def widen(yhat: np.ndarray, low: np.ndarray, high: np.ndarray, spread: np.ndarray,
          confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Each model's interval widened by its `spread` in log space (0: not at all), each side in quadrature: a lower
    bound at or below zero (a linear fit's wide interval) stays where it is."""
    z = stats.norm.ppf(0.5 + confidence / 2) * np.broadcast_to(np.asarray(spread, dtype=float), np.shape(yhat))
    low, high = np.array(low, dtype=float), np.array(high, dtype=float)
    chosen = (z > 0) & (yhat > 0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # a tiny lower bound: the log is inf
        down = np.log(yhat / low)
        up = np.log(high / yhat)
    positive = chosen & (low > 0)
    low[positive] = yhat[positive] * np.exp(-np.sqrt(down[positive] ** 2 + z[positive] ** 2))
    high[chosen] = yhat[chosen] * np.exp(np.sqrt(up[chosen] ** 2 + z[chosen] ** 2))
    return low, high
