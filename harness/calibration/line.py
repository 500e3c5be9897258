"""The OLS line of device on harness values, the reference the published experiments use, with its diagnostics:

- ordinary least squares, scipy.stats.linregress; Theil–Sen (Sen 1968, scipy.stats.theilslopes) as a
  line that a single outlier cannot drag;
- the pairs whose order differs between harness and device;
- Cook's distance (Cook 1977) with the common 4/n rule for influential points.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from harness.calibration.choice import CONFIDENCE
from harness.core.errors import DataError

MIN_POINTS = 3
"""Fewest matched models a fit is trained on: with two, a line passes through both and says nothing."""
EXACT_FIT_R2 = 1.0 - 1e-12
"""Above this R² the residuals are rounding noise, and Cook's distance (residual / noise) is set to 0."""


def cooks_threshold(n: int) -> float:
    """Cook's distance above 4/n marks an influential point (Bollen & Jackman 1990 rule of thumb)."""
    return 4.0 / n


@dataclass(frozen=True)
class LineFit:
    """An OLS line with its standard errors, plus the Theil–Sen line for the same points."""

    n: int
    slope: float
    intercept: float
    r2: float
    p_value: float
    slope_stderr: float
    intercept_stderr: float
    residual_std: float
    x_mean: float
    sxx: float
    x_min: float
    x_max: float
    theil_slope: float
    theil_intercept: float
    theil_slope_low: float
    theil_slope_high: float

    def predict(self, x: Any) -> np.ndarray:
        return self.intercept + self.slope * np.asarray(x, dtype=float)


def fit_line(x: Any, y: Any) -> LineFit:
    """OLS and Theil–Sen fits of y on x; needs MIN_POINTS points and at least two distinct x."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if len(x) < MIN_POINTS:
        raise DataError(f"a calibration line needs at least {MIN_POINTS} matched models, got {len(x)}")
    if np.ptp(x) == 0:
        raise DataError("all harness values are identical; the line is undefined: profile models that differ")
    ols = stats.linregress(x, y)
    theil = stats.theilslopes(y, x, alpha=CONFIDENCE)
    residuals = y - (ols.intercept + ols.slope * x)
    return LineFit(
        n=len(x),
        slope=float(ols.slope),
        intercept=float(ols.intercept),
        r2=float(ols.rvalue**2),
        p_value=float(ols.pvalue),
        slope_stderr=float(ols.stderr),
        intercept_stderr=float(ols.intercept_stderr),
        residual_std=float(np.sqrt(np.sum(residuals**2) / (len(x) - 2))),
        x_mean=float(x.mean()),
        sxx=float(np.sum((x - x.mean()) ** 2)),
        x_min=float(x.min()),
        x_max=float(x.max()),
        theil_slope=float(theil.slope),
        theil_intercept=float(theil.intercept),
        theil_slope_low=float(theil.low_slope),
        theil_slope_high=float(theil.high_slope),
    )


def leverage(fit: LineFit, x: Any) -> np.ndarray:
    """Hat values h_ii of a straight-line fit: how far each x sits from the mean, relative to the spread."""
    return 1.0 / fit.n + (np.asarray(x, dtype=float) - fit.x_mean) ** 2 / fit.sxx


def cooks_distance(fit: LineFit, x: Any, y: Any) -> np.ndarray:
    """Cook's D_i = e_i² / (p s²) · h_ii / (1 − h_ii)², with p = 2 parameters."""
    x = np.asarray(x, dtype=float)
    residuals = np.asarray(y, dtype=float) - fit.predict(x)
    if fit.r2 >= EXACT_FIT_R2 or fit.residual_std == 0:
        return np.zeros(len(x))
    h = leverage(fit, x)
    return residuals**2 / (2 * fit.residual_std**2) * h / (1 - h) ** 2


def discordant_pairs(names: list[str], x: Any, y: Any) -> list[tuple[str, str]]:
    """Pairs (a, b) that the harness orders one way and the device the other (ties flip nothing)."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    return [
        (names[i], names[j])
        for i, j in itertools.combinations(range(len(names)), 2)
        if np.sign(x[i] - x[j]) * np.sign(y[i] - y[j]) < 0
    ]
