"""Which model to measure on the device next: one of a family no calibration model is of, and among those the one
whose measurement shrinks the prediction intervals of the models still unmeasured the most.

A fit's interval for a new model u is t(df) · s · √(1/w_u + z_uᵀ A⁻¹ z_u) in the fit's own space, with
A = ZᵀWZ (+ the ridge penalty) over the calibration models. Measuring a candidate c adds its row z_c (weight
w_c) to A, whatever the device then says: A⁻¹ shrinks by the Sherman–Morrison update
A⁻¹ z_c z_cᵀ A⁻¹ · w_c / (1 + w_c z_cᵀ A⁻¹ z_c), and df grows by one. The residual scale s is kept, since
the new point's residual is unknown. This is I-optimal design (Atkinson, Donev & Tobias, "Optimum
Experimental Designs", §10.6): minimise the average prediction variance over the points of interest, here
the interval half-width in the fit's own space (relative for `relative` and the log fits, device units for
`ols`) averaged over the models that would remain unmeasured. Picks are greedy: the
second pick is chosen as if the first had been measured. A model far from every calibration point has both
the widest interval and the most leverage, so models from a region of sizes without calibration points come
first.

Families weigh in too: a fit learnt on some architecture families says least about another (the device may run
its operators at another speed ratio), so a model whose family has no calibration model gets the extra spread
that `predict` gives it (harness.calibration.reach), until a model of its family is measured. Measuring one model
of an unmeasured family thus narrows the intervals of all the others of that family: the picks prefer a family
with no calibration model, the more so the more models it has left to predict (a family of one helps no other).

Before any device measurement (suggest_first) the same greedy picks run on a prior: the fit trained on device =
harness, with unit residual scale and A starting at PRIOR_WEIGHT of the candidates' mean information, so the
first picks spread over the harness values (and op mixes) of the candidates and over their families.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from scipy import stats

from harness.calibration.calibrate import Calibration
from harness.calibration.choice import CONFIDENCE
from harness.calibration.fits import Design, FittedModel, fit_spec
from harness.calibration.reach import EXTRAPOLATION_SPREAD
from harness.core.errors import DataError
from harness.models.families import model_family

PRIOR_WEIGHT = 1e-3
"""Before any measurement, A starts at this share of the candidates' mean information wᵢzᵢzᵢᵀ: enough to make the
first interval finite, too little to steer the picks."""
PRIOR_DF = 10.0
"""Residual degrees of freedom assumed before any measurement (they scale every width alike)."""


@dataclass(frozen=True)
class Pick:
    """One suggested model, in the order of the picks, with the mean interval before and after measuring it."""

    model: str
    harness: float
    own_halfwidth: float
    mean_before: float
    mean_after: float | None
    """None after the last unmeasured model: nothing is left to predict."""
    family: str = ""
    new_family: bool = False
    """True when no calibration model (nor earlier pick) was of its family."""


def relative_widths(model: FittedModel) -> bool:
    """Whether the fit's own space measures error relative to the value (`relative`, log fits) or in device
    units (`ols`, whose scatter is the same for every model)."""
    return model.weighted or model.log_space


def halfwidths(model: FittedModel, design: Design, a_inv: np.ndarray, df: float,
               unseen: np.ndarray | None = None) -> np.ndarray:
    """95% interval half-widths in the fit's own space: a share of the prediction for the relative fits
    (sinh(half) in log space: ≈ half for small widths, the mean of the upward and downward factors; half / ŷ
    for `relative`), device units for `ols`. Models marked `unseen` (no calibration model of their family) add
    the extrapolation spread in quadrature, as `predict` widens them."""
    z = model.rows(design)
    yhat = model.predict(design)
    own = yhat**2 if model.weighted else np.ones(len(design))
    variance = model.solution.s2 * (own + np.einsum("ij,jk,ik->i", z, a_inv, z))
    half = stats.t.ppf(0.5 + CONFIDENCE / 2, df) * np.sqrt(variance)
    widths = half / np.abs(yhat) if model.weighted else half
    if model.log_space:
        widths = np.sinh(half)
    if unseen is None or not unseen.any():
        return widths
    extra = stats.norm.ppf(0.5 + CONFIDENCE / 2) * EXTRAPOLATION_SPREAD
    return np.where(unseen, np.hypot(widths, extra if relative_widths(model) else extra * np.abs(yhat)), widths)


def _weight(model: FittedModel, yhat: float) -> float:
    return 1.0 / yhat**2 if model.weighted else 1.0


def _added(model: FittedModel, a_inv: np.ndarray, z: np.ndarray, yhat: float) -> np.ndarray:
    """A⁻¹ after one more calibration row z (Sherman–Morrison), weighted as the fit weighs that point."""
    w = _weight(model, yhat)
    az = a_inv @ z
    return a_inv - np.outer(az, az) * w / (1 + w * z @ az)


def _greedy(model: FittedModel, design: Design, names: list[str], seen: set[str], a_inv: np.ndarray, df: float,
            count: int) -> list[Pick]:
    """Greedy picks among the models of `design`: at each step the model whose measurement leaves the smallest
    mean interval over the others still unmeasured, a model of a family not in `seen` counting as unseen."""
    families = np.array(design.families or [""] * len(names), dtype=object)
    counted = len(set(families)) < len(families)  # as Reach counts families: only when some models share one
    rows, yhat = model.rows(design), model.predict(design)
    remaining, seen = list(range(len(names))), set(seen)
    picks: list[Pick] = []

    def unseen(known: set[str]) -> np.ndarray | None:
        return np.array([family not in known for family in families]) if counted else None

    while remaining and len(picks) < count:
        widths = halfwidths(model, design, a_inv, df, unseen(seen))
        before = float(widths[remaining].mean())
        best: tuple[int, float | None, np.ndarray] | None = None  # (model, mean interval after it, a_inv with it)
        for c in remaining:
            others = [u for u in remaining if u != c]
            updated = _added(model, a_inv, rows[c], yhat[c])
            after = (float(halfwidths(model, design, updated, df + 1, unseen(seen | {families[c]}))[others].mean())
                     if others else None)
            if best is None or (after is not None and (best[1] is None or after < best[1])):
                best = (c, after, updated)
        assert best is not None  # remaining is not empty
        c, after, a_inv = best
        df += 1
        picks.append(Pick(names[c], float(design.harness[c]), float(widths[c]), before, after, families[c],
                          families[c] not in seen))
        seen.add(families[c])
        remaining.remove(c)
    return picks


def suggest(calibration: Calibration, unmeasured: pd.DataFrame, count: int) -> list[Pick]:
    """Greedy picks among `unmeasured` (columns harness_model, harness and the calibration's facts), from the
    calibration's chosen fit."""
    model = calibration.model
    names = unmeasured["harness_model"].tolist()
    design = calibration.design(unmeasured["harness"], unmeasured.set_index("harness_model"), names)
    seen = set(calibration.points["family"]) if "family" in calibration.points else set()
    return _greedy(model, design, names, seen, model.solution.a_inv, model.solution.df, count)


def suggest_first(candidates: Design, names: list[str], fit: str, count: int) -> list[Pick]:
    """Greedy picks before any device measurement, for the fit `fit`: its prior is that fit trained on
    device = harness, with unit residual scale."""
    trained = fit_spec(fit).train(candidates, candidates.harness)
    if trained is None:
        raise DataError(f"the {fit} fit cannot be trained on these {len(names)} candidates (identical harness "
                        "values or collinear facts); profile models that differ")
    model = replace(trained, solution=replace(trained.solution, s2=1.0))
    rows, yhat = model.rows(candidates), model.predict(candidates)
    weights = np.array([_weight(model, value) for value in yhat])
    information = np.einsum("i,ij,ik->jk", weights, rows, rows) / len(rows)
    a_inv = np.linalg.pinv(PRIOR_WEIGHT * information)
    design = Design(candidates.harness, candidates.facts, candidates.fact_names,
                    candidates.families or tuple(model_family(name) for name in names))
    return _greedy(model, design, names, set(), a_inv, PRIOR_DF, count)
