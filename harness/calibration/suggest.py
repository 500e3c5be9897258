"""Which model to measure on the device next: the one whose measurement shrinks the prediction intervals of
the models still unmeasured the most.

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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from harness.calibration.calibrate import Calibration
from harness.calibration.choice import CONFIDENCE
from harness.calibration.fits import Design, FittedModel


@dataclass(frozen=True)
class Pick:
    """One suggested model, in the order of the picks, with the mean interval before and after measuring it."""

    model: str
    harness: float
    own_halfwidth: float
    mean_before: float
    mean_after: float | None
    """None after the last unmeasured model: nothing is left to predict."""


def relative_widths(model: FittedModel) -> bool:
    """Whether the fit's own space measures error relative to the value (`relative`, log fits) or in device
    units (`ols`, whose scatter is the same for every model)."""
    return model.weighted or model.log_space


def halfwidths(model: FittedModel, design: Design, a_inv: np.ndarray, df: float) -> np.ndarray:
    """95% interval half-widths in the fit's own space: a share of the prediction for the relative fits
    (sinh(half) in log space: ≈ half for small widths, the mean of the upward and downward factors; half / ŷ
    for `relative`), device units for `ols`."""
    z = model.rows(design)
    yhat = model.predict(design)
    own = yhat**2 if model.weighted else np.ones(len(design))
    variance = model.solution.s2 * (own + np.einsum("ij,jk,ik->i", z, a_inv, z))
    half = stats.t.ppf(0.5 + CONFIDENCE / 2, df) * np.sqrt(variance)
    if model.log_space:
        return np.sinh(half)
    return half / np.abs(yhat) if model.weighted else half


def _added(model: FittedModel, a_inv: np.ndarray, z: np.ndarray, yhat: float) -> np.ndarray:
    """A⁻¹ after one more calibration row z (Sherman–Morrison), weighted as the fit weighs that point."""
    w = 1.0 / yhat**2 if model.weighted else 1.0
    az = a_inv @ z
    return a_inv - np.outer(az, az) * w / (1 + w * z @ az)


def suggest(calibration: Calibration, unmeasured: pd.DataFrame, count: int) -> list[Pick]:
    """Greedy picks among `unmeasured` (columns harness_model, harness and the calibration's facts): at each
    step the model whose measurement leaves the smallest mean interval over the others still unmeasured."""
    model = calibration.model
    names = unmeasured["harness_model"].tolist()
    design = calibration.design(unmeasured["harness"], unmeasured.set_index("harness_model"))
    rows, yhat = model.rows(design), model.predict(design)
    a_inv, df = model.solution.a_inv, model.solution.df
    remaining, picks = list(range(len(names))), []
    while remaining and len(picks) < count:
        widths = halfwidths(model, design, a_inv, df)
        before = float(widths[remaining].mean())
        best = None
        for c in remaining:
            others = [u for u in remaining if u != c]
            updated = _added(model, a_inv, rows[c], yhat[c])
            after = float(halfwidths(model, design, updated, df + 1)[others].mean()) if others else None
            if best is None or (after is not None and after < best[1]):
                best = (c, after, updated)
        c, after, a_inv = best
        df += 1
        picks.append(Pick(names[c], float(design.harness[c]), float(widths[c]), before, after))
        remaining.remove(c)
    return picks
