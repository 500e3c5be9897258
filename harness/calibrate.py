"""Desktop → device calibration: `device ≈ slope · harness + intercept` per metric and group.

A handful of models measured on the real device teaches the line; the line then predicts the device's
numbers for models only the harness has run, with a 95% prediction interval. Methods:

- ordinary least squares, scipy.stats.linregress; Theil–Sen (Sen 1968, scipy.stats.theilslopes) as a
  line that a single outlier cannot drag;
- leave-one-out cross-validation: each model is predicted by a line fitted without it, which is the
  honest error for a model the device has never seen;
- Spearman ρ and Kendall τ (scipy.stats), and the pairs whose order differs between harness and device;
- Cook's distance (Cook 1977) with the common 4/n rule for influential points;
- prediction intervals ŷ ± t(n−2) · s · √(1 + 1/n + (x₀ − x̄)² / Sxx) (Montgomery, Peck & Vining,
  "Introduction to Linear Regression Analysis", §2.4).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from harness.device_data import DeviceData
from harness.errors import ConfigError, DataError
from harness.run_values import METRICS, check_metric, harness_medians
from harness.stats import rank_correlations

MIN_POINTS = 3
"""Fewest matched models a line is fitted to: with two, the line passes through both and says nothing."""
CONFIDENCE = 0.95
WITHIN_BANDS: tuple[float, ...] = (0.10, 0.20)
"""Held-out relative errors are reported as the share of models within ±10% and ±20% of the device."""
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


def loo_predictions(x: Any, y: Any) -> np.ndarray:
    """Prediction for each point from the OLS line fitted to all the other points."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    out = np.empty(len(x))
    for i in range(len(x)):
        keep = np.arange(len(x)) != i
        if np.ptp(x[keep]) == 0:
            raise DataError("leaving one model out leaves identical harness values; profile more distinct models")
        line = stats.linregress(x[keep], y[keep])
        out[i] = line.intercept + line.slope * x[i]
    return out


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


def prediction_interval(fit: LineFit, x0: Any, confidence: float = CONFIDENCE) -> tuple[np.ndarray, ...]:
    """(prediction, low, high) for new observations at x0: the line's uncertainty plus the scatter."""
    x0 = np.asarray(x0, dtype=float)
    t = stats.t.ppf(0.5 + confidence / 2, fit.n - 2)
    half = t * fit.residual_std * np.sqrt(1 + 1 / fit.n + (x0 - fit.x_mean) ** 2 / fit.sxx)
    yhat = fit.predict(x0)
    return yhat, yhat - half, yhat + half


def discordant_pairs(names: list[str], x: Any, y: Any) -> list[tuple[str, str]]:
    """Pairs (a, b) that the harness orders one way and the device the other (ties flip nothing)."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    return [
        (names[i], names[j])
        for i, j in itertools.combinations(range(len(names)), 2)
        if np.sign(x[i] - x[j]) * np.sign(y[i] - y[j]) < 0
    ]


def error_stats(actual: Any, predicted: Any) -> dict[str, float]:
    """RMSE, MAPE (%) and the share of predictions within each WITHIN_BANDS relative error."""
    actual = np.asarray(actual, dtype=float)
    predicted = np.asarray(predicted, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        relative = np.abs(predicted - actual) / np.abs(actual)
    out = {"rmse": float(np.sqrt(np.mean((predicted - actual) ** 2))), "mape_pct": float(100 * np.mean(relative))}
    for band in WITHIN_BANDS:
        out[f"within_{round(band * 100)}pct"] = float(np.mean(relative <= band))
    return out


def _clean(value: Any) -> Any:
    """JSON-safe: numpy scalars to Python, NaN/inf to None (JSON has no NaN)."""
    if isinstance(value, dict):
        return {key: _clean(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(item) for item in value]
    if isinstance(value, (np.floating, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value


def group_label(group: dict[str, Any]) -> str:
    """`cpus=2, family=mobilenet_v1`: numbers without a trailing `.0`."""
    parts = [f"{key}={value:g}" if isinstance(value, float) else f"{key}={value}" for key, value in group.items()]
    return ", ".join(parts) or "all groups"


@dataclass
class Calibration:
    """One fitted metric × group: the points (with held-out predictions) and every statistic."""

    metric: str
    group: dict[str, Any]
    fit: LineFit
    points: pd.DataFrame
    stats: dict[str, float]
    flipped_pairs: list[tuple[str, str]]

    @property
    def label(self) -> str:
        return group_label(self.group)

    def to_dict(self) -> dict[str, Any]:
        return _clean(
            {
                "metric": self.metric,
                "group": self.group,
                "fit": vars(self.fit),
                "stats": self.stats,
                "flipped_pairs": self.flipped_pairs,
                "points": self.points.to_dict(orient="records"),
            }
        )


def calibrate_points(metric: str, group: dict[str, Any], points: pd.DataFrame) -> Calibration:
    """Fit one group. `points` needs columns model, harness, device; the rest is carried along."""
    points = points.sort_values("harness").reset_index(drop=True)
    x, y = points["harness"].to_numpy(float), points["device"].to_numpy(float)
    fit = fit_line(x, y)
    loo = loo_predictions(x, y)
    cooks = cooks_distance(fit, x, y)
    points = points.assign(
        fitted=fit.predict(x),
        residual=y - fit.predict(x),
        loo_predicted=loo,
        loo_error_pct=100 * (loo - y) / y,
        cooks_d=cooks,
        influential=cooks > cooks_threshold(len(x)),
    )
    fitted, held_out = error_stats(y, fit.predict(x)), error_stats(y, loo)
    summary = {
        "rmse": fitted["rmse"],
        "mape_pct": fitted["mape_pct"],
        **{f"loo_{key}": value for key, value in held_out.items()},
        **rank_correlations(x, y),
        "cooks_threshold": cooks_threshold(len(x)),
    }
    names = points["model"].astype(str).tolist()
    return Calibration(metric, group, fit, points, summary, discordant_pairs(names, x, y))


@dataclass
class CalibrationSet:
    """Every fitted group of one device, what could not be fitted and why, and the unmatched models."""

    device: str
    group_by: str
    calibrations: list[Calibration]
    skipped: list[dict[str, Any]] = field(default_factory=list)
    unmatched_device_models: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return _clean(
            {
                "device": self.device,
                "group_by": self.group_by,
                "calibrations": [c.to_dict() for c in self.calibrations],
                "skipped": self.skipped,
                "unmatched_device_models": self.unmatched_device_models,
                "notes": self.notes,
            }
        )


def device_rows_for_cpus(device: DeviceData, cpus: float) -> pd.DataFrame:
    """Device rows to pair with harness runs at `cpus`: those with threads == cpus; when the device data
    has one thread count (or none), all of them, since that is the only device setting there is."""
    table = device.table
    if "cpus" not in table or table["cpus"].nunique(dropna=True) <= 1:
        return table
    return table[table["cpus"] == cpus]


def paired_points(device: DeviceData, medians: pd.DataFrame, metric: str, group_by: str) -> pd.DataFrame:
    """Device values beside harness medians: one row per matched model and harness CPU count."""
    mapping = device.match(sorted(set(medians["model_name"])))
    rows = []
    for (harness_model, cpus), entry in medians.set_index(["model_name", "cpus"]).iterrows():
        for _, device_row in device_rows_for_cpus(device, cpus).iterrows():
            if mapping.get(device_row["model"]) != harness_model or pd.isna(device_row.get(metric)):
                continue
            row = {
                "model": device_row["model"],
                "harness_model": harness_model,
                "cpus": cpus,
                "harness": entry["value"],
                "harness_n": int(entry["n"]),
                "device": float(device_row[metric]),
                "device_n": int(device_row["n"]),
            }
            if group_by != "cpus":
                tag = device_row.get(group_by)
                row[group_by] = "unknown" if pd.isna(tag) else str(tag)
            rows.append(row)
    return pd.DataFrame(rows)


def calibrate_device(
    device: DeviceData, medians_by_metric: dict[str, pd.DataFrame], group_by: str = "cpus"
) -> CalibrationSet:
    """Fit every metric × group with at least MIN_POINTS matched models; raise when none has."""
    if group_by != "cpus" and group_by not in device.tags:
        choices = ", ".join(["cpus", *device.tags]) or "cpus"
        raise ConfigError(f"--group-by {group_by}: device {device.name} has no such column; choose one of: {choices}")
    result = CalibrationSet(device.name, group_by, [])
    keys = ["cpus"] if group_by == "cpus" else ["cpus", group_by]
    matched: set[str] = set()
    for metric, medians in medians_by_metric.items():
        points = paired_points(device, medians, metric, group_by)
        if points.empty:
            result.skipped.append({"metric": metric, "group": {}, "n": 0, "reason": _no_match_reason(device, medians)})
            continue
        matched.update(points["model"])
        for values, group_points in points.groupby(keys, sort=True):
            group = dict(zip(keys, values, strict=True))
            models = group_points["model"].tolist()
            try:
                result.calibrations.append(calibrate_points(metric, group, group_points))
            except DataError as err:
                reason = f"{len(models)} matched models" if len(models) < MIN_POINTS else str(err)
                result.skipped.append({"metric": metric, "group": group, "n": len(models), "models": models,
                                       "reason": reason})
    result.unmatched_device_models = sorted(set(device.table["model"]) - matched)
    if not result.calibrations:
        detail = "; ".join(
            f"{s['metric']} {group_label(s['group'])}: {s['reason']}" for s in result.skipped
        ) or "no metric in common"
        raise DataError(
            f"device {device.name}: nothing to fit ({detail}); calibration needs at least {MIN_POINTS} models "
            "measured both on the device and by the harness: profile more of the device's models, or map names "
            "with a harness_model column"
        )
    return result


def _no_match_reason(device: DeviceData, medians: pd.DataFrame) -> str:
    threads = sorted(device.table["cpus"].dropna().unique()) if "cpus" in device.table else []
    cpus = sorted(medians["cpus"].unique())
    if len(threads) > 1 and not set(threads) & set(cpus):
        return (f"the device's thread counts ({', '.join(f'{t:g}' for t in threads)}) never equal the harness's "
                f"cpus ({', '.join(f'{c:g}' for c in cpus)}); profile with CPUS set to one of them")
    return "no device model matches a model with ok runs"


def predict_models(cset: CalibrationSet, medians_by_metric: dict[str, pd.DataFrame], models: list[str]) -> list[dict]:
    """Device predictions with prediction intervals for `models`, from every fitted cpus group.

    `out_of_range` marks a harness value outside the calibrated range: the line is extrapolated there.
    """
    out = []
    for calibration in cset.calibrations:
        medians = medians_by_metric[calibration.metric]
        at_cpus = medians[(medians["cpus"] == calibration.group["cpus"]) & medians["model_name"].isin(models)]
        measured = dict(zip(calibration.points["harness_model"], calibration.points["device"], strict=True))
        for _, entry in at_cpus.iterrows():
            yhat, low, high = prediction_interval(calibration.fit, entry["value"])
            fit = calibration.fit
            out.append(
                _clean(
                    {
                        "model": entry["model_name"],
                        "metric": calibration.metric,
                        "group": calibration.group,
                        "harness": entry["value"],
                        "predicted": float(yhat),
                        "pi_low": float(low),
                        "pi_high": float(high),
                        "confidence": CONFIDENCE,
                        "out_of_range": not fit.x_min <= entry["value"] <= fit.x_max,
                        "calibrated_range": [fit.x_min, fit.x_max],
                        "measured_on_device": measured.get(entry["model_name"]),
                    }
                )
            )
    return out


def calibrated_metrics(device: DeviceData, metric: str | None = None) -> list[str]:
    """The metrics both the device data and the harness have (or the one asked for, checked)."""
    common = [name for name in METRICS if name in device.metrics]
    if metric is not None:
        check_metric(metric)
        if metric not in device.metrics:
            raise ConfigError(
                f"--metric {metric}: device {device.name} has no {metric} column (it has: {', '.join(device.metrics)})"
            )
        return [metric]
    if not common:
        raise DataError(
            f"device {device.name} has no column the harness measures ({', '.join(device.metrics)}); "
            f"name one of: {', '.join(METRICS)}"
        )
    return common


def calibrate_runs(
    device: DeviceData, runs: list[dict[str, Any]], metric: str | None = None, group_by: str = "cpus"
) -> tuple[CalibrationSet, dict[str, pd.DataFrame]]:
    """Calibrate `device` against harness runs; also returns the per-model medians used (for prediction)."""
    medians = {name: harness_medians(runs, name) for name in calibrated_metrics(device, metric)}
    return calibrate_device(device, medians, group_by), medians
