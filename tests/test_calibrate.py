"""Calibration statistics: exact recovery of a linear law, and agreement with statsmodels' reference values."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from scipy import stats
from statsmodels.stats.outliers_influence import OLSInfluence

from harness.calibrate import (
    calibrate_points,
    cooks_distance,
    discordant_pairs,
    fit_line,
    loo_predictions,
    prediction_interval,
)
from harness.errors import DataError

SLOPE, INTERCEPT = 2.5, 0.75


def exact_points() -> tuple[np.ndarray, np.ndarray]:
    x = np.array([1.0, 2.0, 3.0, 5.0, 8.0, 13.0, 21.0])
    return x, SLOPE * x + INTERCEPT


def noisy_points(n: int = 15, seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(1, 50, n))
    return x, 3.0 * x + 2.0 + rng.normal(0, 4.0, n) + np.where(np.arange(n) == n - 1, 25.0, 0.0)


def test_exact_linear_data_is_recovered_to_1e_9() -> None:
    x, y = exact_points()
    points = pd.DataFrame({"model": [f"m{i}" for i in range(len(x))], "harness": x, "device": y})
    calibration = calibrate_points("latency_ms", {"cpus": 1.0}, points)
    fit = calibration.fit
    assert fit.slope == pytest.approx(SLOPE, abs=1e-9)
    assert fit.intercept == pytest.approx(INTERCEPT, abs=1e-9)
    assert fit.theil_slope == pytest.approx(SLOPE, abs=1e-9)
    assert fit.theil_intercept == pytest.approx(INTERCEPT, abs=1e-9)
    assert fit.r2 == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(calibration.points["loo_predicted"], y, atol=1e-9)
    assert calibration.stats["rmse"] < 1e-9 and calibration.stats["loo_rmse"] < 1e-9
    assert calibration.stats["loo_within_10pct"] == 1.0
    assert calibration.stats["spearman_rho"] == pytest.approx(1.0)
    # 2 of the 7! pairings order the points perfectly (either way): the exact p, not the t approximation's 0.
    assert calibration.stats["spearman_p"] == calibration.stats["kendall_p"] == pytest.approx(2 / math.factorial(7))
    assert calibration.flipped_pairs == []
    assert not calibration.points["influential"].any()
    yhat, low, high = prediction_interval(fit, 34.0)
    assert yhat == pytest.approx(SLOPE * 34 + INTERCEPT, abs=1e-9)
    assert high - low < 1e-6


def test_ols_statistics_match_statsmodels() -> None:
    x, y = noisy_points()
    fit = fit_line(x, y)
    reference = sm.OLS(y, sm.add_constant(x)).fit()
    assert fit.intercept == pytest.approx(reference.params[0], rel=1e-10)
    assert fit.slope == pytest.approx(reference.params[1], rel=1e-10)
    assert fit.intercept_stderr == pytest.approx(reference.bse[0], rel=1e-8)
    assert fit.slope_stderr == pytest.approx(reference.bse[1], rel=1e-8)
    assert fit.p_value == pytest.approx(reference.pvalues[1], rel=1e-6)
    assert fit.r2 == pytest.approx(reference.rsquared, rel=1e-10)
    assert fit.residual_std == pytest.approx(np.sqrt(reference.mse_resid), rel=1e-10)


def test_cooks_distance_and_loo_match_statsmodels_influence() -> None:
    x, y = noisy_points()
    fit = fit_line(x, y)
    influence = OLSInfluence(sm.OLS(y, sm.add_constant(x)).fit())
    np.testing.assert_allclose(cooks_distance(fit, x, y), influence.cooks_distance[0], rtol=1e-8)
    # A leave-one-out residual is the PRESS residual e_i / (1 - h_ii).
    np.testing.assert_allclose(y - loo_predictions(x, y), influence.resid_press, rtol=1e-8)


def test_the_planted_outlier_is_flagged_influential() -> None:
    x, y = noisy_points()
    points = pd.DataFrame({"model": [f"m{i:02d}" for i in range(len(x))], "harness": x, "device": y})
    calibration = calibrate_points("latency_ms", {"cpus": 1.0}, points)
    flagged = calibration.points.loc[calibration.points["influential"], "model"].tolist()
    assert f"m{len(x) - 1:02d}" in flagged
    # Theil–Sen's slope is the median of the pairwise slopes (Sen 1968).
    pairwise = [(y[j] - y[i]) / (x[j] - x[i]) for i, j in itertools.combinations(range(len(x)), 2)]
    assert calibration.fit.theil_slope == pytest.approx(np.median(pairwise), rel=1e-12)


def test_prediction_interval_matches_statsmodels() -> None:
    x, y = noisy_points()
    fit = fit_line(x, y)
    new_x = np.array([0.5, 20.0, 80.0])
    yhat, low, high = prediction_interval(fit, new_x)
    frame = sm.OLS(y, sm.add_constant(x)).fit().get_prediction(sm.add_constant(new_x)).summary_frame(alpha=0.05)
    np.testing.assert_allclose(yhat, frame["mean"], rtol=1e-10)
    np.testing.assert_allclose(low, frame["obs_ci_lower"], rtol=1e-8)
    np.testing.assert_allclose(high, frame["obs_ci_upper"], rtol=1e-8)


def test_rank_agreement_and_flipped_pairs() -> None:
    names = ["a", "b", "c", "d", "e"]
    harness = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    device = np.array([1.0, 3.0, 2.0, 5.0, 4.0])
    flips = discordant_pairs(names, harness, device)
    assert flips == [("b", "c"), ("d", "e")]
    pairs = len(names) * (len(names) - 1) / 2
    # Without ties Kendall's tau is (concordant - discordant) / pairs.
    assert stats.kendalltau(harness, device).statistic == pytest.approx((pairs - 2 * len(flips)) / pairs)


def test_error_statistics_are_the_textbook_formulas() -> None:
    x, y = noisy_points()
    points = pd.DataFrame({"model": [f"m{i}" for i in range(len(x))], "harness": x, "device": y})
    calibration = calibrate_points("runtime_s", {"cpus": 2.0}, points)
    loo = loo_predictions(x, y)
    relative = np.abs(loo - y) / y
    assert calibration.stats["loo_rmse"] == pytest.approx(np.sqrt(np.mean((loo - y) ** 2)))
    assert calibration.stats["loo_mape_pct"] == pytest.approx(100 * relative.mean())
    assert calibration.stats["loo_within_10pct"] == pytest.approx(np.mean(relative <= 0.10))
    assert calibration.stats["loo_within_20pct"] == pytest.approx(np.mean(relative <= 0.20))
    fitted = calibration.fit.predict(x)
    assert calibration.stats["rmse"] == pytest.approx(np.sqrt(np.mean((fitted - y) ** 2)))


@pytest.mark.parametrize(("x", "message"), [([1.0, 2.0], "at least 3"), ([2.0, 2.0, 2.0], "identical")])
def test_degenerate_inputs_raise_data_errors(x: list[float], message: str) -> None:
    with pytest.raises(DataError, match=message):
        fit_line(x, [1.0] * len(x))
