"""Calibration statistics: exact recovery of the law each fit can represent, and agreement of every fit with a
reference implementation (statsmodels, scikit-learn)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from scipy import stats
from sklearn.model_selection import LeaveOneOut
from statsmodels.stats.outliers_influence import OLSInfluence

from harness.calibration.calibrate import calibrate_points
from harness.calibration.choice import (
    CONFIDENCE,
    FEW_MODEL_FITS,
    FEW_MODELS,
    Candidates,
    choose,
    leave_one_out,
    tied_with_best,
)
from harness.calibration.fits import (
    RIDGE_ALPHAS,
    Design,
    _Standardiser,
    exact_loo,
    fit_features,
    fit_loglog,
    fit_ols,
    fit_relative,
    fit_spec,
    ridge_loo_errors,
)
from harness.calibration.line import cooks_distance, discordant_pairs, fit_line
from harness.core.errors import DataError

SLOPE, INTERCEPT = 2.5, 0.75
SCALE, POWER = 0.4, 0.85


def exact_points() -> tuple[np.ndarray, np.ndarray]:
    x = np.array([1.0, 2.0, 3.0, 5.0, 8.0, 13.0, 21.0])
    return x, SLOPE * x + INTERCEPT


def noisy_points(n: int = 15, seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(1, 50, n))
    return x, 3.0 * x + 2.0 + rng.normal(0, 4.0, n) + np.where(np.arange(n) == n - 1, 25.0, 0.0)


def facts_design(n: int = 14, seed: int = 3) -> tuple[Design, np.ndarray]:
    """Harness values and two facts that vary independently of each other (random, seeded)."""
    rng = np.random.default_rng(seed)
    x = np.exp(rng.uniform(0, 4, n))
    facts = np.column_stack([np.exp(rng.uniform(15, 22, n)), np.exp(rng.uniform(12, 17, n))])
    return Design(x, facts, ("macs", "params")), rng.normal(0, 1, n)


def frame(x: np.ndarray, y: np.ndarray, design: Design | None = None) -> pd.DataFrame:
    points = pd.DataFrame({"model": [f"m{i:02d}" for i in range(len(x))], "harness": x, "device": y})
    if design is not None:
        for index, name in enumerate(design.fact_names):
            points[name] = design.facts[:, index]
    return points


def test_exact_linear_data_is_recovered_to_1e_9_by_both_lines() -> None:
    x, y = exact_points()
    design = Design(x)
    for fit in (fit_ols, fit_relative):
        model = fit(design, y)
        np.testing.assert_allclose(model.solution.coef, [INTERCEPT, SLOPE], atol=1e-9)
        np.testing.assert_allclose(exact_loo(model, design, y), y, atol=1e-9)
        yhat, low, high = model.interval(Design(np.array([34.0])), CONFIDENCE)
        assert yhat[0] == pytest.approx(SLOPE * 34 + INTERCEPT, abs=1e-9) and high[0] - low[0] < 1e-6
    # Every fit a candidate: seven models are fewer than FEW_MODELS, below which only two would be.
    calibration = calibrate_points("latency_ms", {"cpus": 1.0}, frame(x, y), candidates=Candidates(few_models=0))
    line = calibration.reference_line
    assert line.slope == pytest.approx(SLOPE, abs=1e-9) and line.intercept == pytest.approx(INTERCEPT, abs=1e-9)
    assert line.theil_slope == pytest.approx(SLOPE, abs=1e-9)
    assert line.theil_intercept == pytest.approx(INTERCEPT, abs=1e-9)
    assert line.r2 == pytest.approx(1.0, abs=1e-12)
    # Both lines (and the nested choice) predict every held-out model exactly: equal MAPEs go to the simplest, ols.
    assert calibration.model.name == "ols" and "tied within one standard error" in calibration.choice["reason"]
    np.testing.assert_allclose(calibration.points["loo_predicted"], y, atol=1e-9)
    assert calibration.stats["rmse"] < 1e-9 and calibration.stats["loo_rmse"] < 1e-9
    assert calibration.stats["loo_within_10pct"] == 1.0
    assert calibration.stats["spearman_rho"] == pytest.approx(1.0)
    # 2 of the 7! pairings order the points perfectly (either way): the exact p, not the t approximation's 0.
    assert calibration.stats["spearman_p"] == calibration.stats["kendall_p"] == pytest.approx(2 / math.factorial(7))
    assert calibration.flipped_pairs == []
    assert not calibration.points["influential"].any()


def test_exact_power_law_is_recovered_to_1e_9_by_loglog_and_features() -> None:
    design, _ = facts_design()
    y = SCALE * design.harness**POWER
    loglog = fit_loglog(design, y)
    np.testing.assert_allclose(loglog.solution.coef, [math.log(SCALE), POWER], atol=1e-9)
    # The facts add nothing to an exact power law: the strongest penalty (drop them) ties and wins.
    features = fit_features(design, y)
    assert features.alpha == math.inf and features.fact_names == ()
    np.testing.assert_allclose(features.predict(design), y, rtol=1e-9)
    np.testing.assert_allclose(exact_loo(loglog, design, y), y, rtol=1e-9)


def test_exact_multiplicative_law_in_harness_and_facts_is_recovered_by_features() -> None:
    design, _ = facts_design()
    exponents = np.array([0.6, 0.3, -0.2])
    y = 1e-3 * design.harness ** exponents[0] * np.prod(design.facts ** exponents[1:], axis=1)
    model = fit_features(design, y)
    assert model.alpha == 0.0 and model.fact_names == ("macs", "params")
    np.testing.assert_allclose(model.predict(design), y, rtol=1e-9)
    assert model.solution.coef[1] == pytest.approx(exponents[0], abs=1e-9)
    scale = np.log(design.facts).std(axis=0)
    np.testing.assert_allclose(model.solution.coef[2:] / scale, exponents[1:], atol=1e-9)
    held = leave_one_out(fit_spec("features"), design, y)
    np.testing.assert_allclose(held.predicted, y, rtol=1e-9)


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
    model = fit_ols(Design(x), y)
    np.testing.assert_allclose(model.solution.coef, reference.params, rtol=1e-10)
    np.testing.assert_allclose(model.solution.s2, reference.mse_resid, rtol=1e-10)


def test_cooks_distance_and_loo_match_statsmodels_influence() -> None:
    x, y = noisy_points()
    fit = fit_line(x, y)
    influence = OLSInfluence(sm.OLS(y, sm.add_constant(x)).fit())
    np.testing.assert_allclose(cooks_distance(fit, x, y), influence.cooks_distance[0], rtol=1e-8)
    # A leave-one-out residual is the PRESS residual e_i / (1 - h_ii), by the shortcut and by refitting.
    design = Design(x)
    np.testing.assert_allclose(y - exact_loo(fit_ols(design, y), design, y), influence.resid_press, rtol=1e-8)
    np.testing.assert_allclose(y - leave_one_out(fit_spec("ols"), design, y).predicted, influence.resid_press,
                               rtol=1e-8)


def test_the_planted_outlier_is_flagged_influential() -> None:
    x, y = noisy_points()
    calibration = calibrate_points("latency_ms", {"cpus": 1.0}, frame(x, y))
    flagged = calibration.points.loc[calibration.points["influential"], "model"].tolist()
    assert f"m{len(x) - 1:02d}" in flagged
    # Theil–Sen's slope is the median of the pairwise slopes (Sen 1968).
    pairwise = [(y[j] - y[i]) / (x[j] - x[i]) for i, j in itertools.combinations(range(len(x)), 2)]
    assert calibration.reference_line.theil_slope == pytest.approx(np.median(pairwise), rel=1e-12)


def summary_frame(result: object, exog: np.ndarray, **kwargs: object) -> pd.DataFrame:
    return result.get_prediction(exog, **kwargs).summary_frame(alpha=1 - CONFIDENCE)


def in_log_space(reference: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """statsmodels' interval ŷ ± h made in log space as the harness makes a linear fit's: ŷ · e^(±h/ŷ), none (NaN)
    for a prediction at or below zero."""
    mean = reference["mean"].to_numpy(float)
    half = reference["obs_ci_upper"].to_numpy(float) - mean
    np.testing.assert_allclose(mean - reference["obs_ci_lower"].to_numpy(float), half, rtol=1e-10)
    with np.errstate(divide="ignore", invalid="ignore"):
        spread = np.where(mean > 0, half / mean, np.nan)
    return mean * np.exp(-spread), mean * np.exp(spread)


def test_ols_prediction_interval_matches_statsmodels() -> None:
    x, y = noisy_points()
    new_x = np.array([0.5, 20.0, 80.0])
    yhat, low, high = fit_ols(Design(x), y).interval(Design(new_x), CONFIDENCE)
    reference = summary_frame(sm.OLS(y, sm.add_constant(x)).fit(), sm.add_constant(new_x))
    np.testing.assert_allclose(yhat, reference["mean"], rtol=1e-10)
    assert reference["mean"][0] < 0 and np.isnan(low[0]) and np.isnan(high[0])  # no interval for ŷ ≤ 0
    expected_low, expected_high = in_log_space(reference)
    np.testing.assert_allclose(low, expected_low, rtol=1e-8)
    np.testing.assert_allclose(high, expected_high, rtol=1e-8)


def test_relative_fit_is_statsmodels_wls_with_weights_one_over_device_squared() -> None:
    x, y = noisy_points()
    model = fit_relative(Design(x), y)
    reference = sm.WLS(y, sm.add_constant(x), weights=1 / y**2).fit()
    np.testing.assert_allclose(model.solution.coef, reference.params, rtol=1e-10)
    # It minimises the squared relative errors: no other line does better.
    relative_sse = np.sum(((y - reference.fittedvalues) / y) ** 2)
    ols_line = sm.OLS(y, sm.add_constant(x)).fit().fittedvalues
    assert relative_sse < np.sum(((y - ols_line) / y) ** 2)
    new_x = np.array([0.5, 20.0, 80.0])
    yhat, low, high = model.interval(Design(new_x), CONFIDENCE)
    # A new model's own scatter is weighted as the fit weighs a point at its predicted value.
    expected = summary_frame(reference, sm.add_constant(new_x), weights=1 / yhat**2)
    np.testing.assert_allclose(yhat, expected["mean"], rtol=1e-10)
    expected_low, expected_high = in_log_space(expected)
    np.testing.assert_allclose(low, expected_low, rtol=1e-8)
    np.testing.assert_allclose(high, expected_high, rtol=1e-8)


def test_loglog_fit_and_interval_are_statsmodels_ols_on_logs() -> None:
    rng = np.random.default_rng(11)
    x = np.exp(rng.uniform(0, 4, 16))
    y = SCALE * x**POWER * np.exp(rng.normal(0, 0.08, len(x)))
    model = fit_loglog(Design(x), y)
    reference = sm.OLS(np.log(y), sm.add_constant(np.log(x))).fit()
    np.testing.assert_allclose(model.solution.coef, reference.params, rtol=1e-10)
    new_x = np.array([0.5, 10.0, 200.0])
    yhat, low, high = model.interval(Design(new_x), CONFIDENCE)
    expected = summary_frame(reference, sm.add_constant(np.log(new_x)))
    np.testing.assert_allclose(np.log(yhat), expected["mean"], rtol=1e-10)
    np.testing.assert_allclose(np.log(low), expected["obs_ci_lower"], rtol=1e-8)
    np.testing.assert_allclose(np.log(high), expected["obs_ci_upper"], rtol=1e-8)


def ridge_reference(design: Design, y: np.ndarray, alpha: float) -> np.ndarray:
    """statsmodels' ridge with a penalty on the facts only: (ZᵀZ + n·diag(a))β = Zᵀt."""
    z = _Standardiser.learn(design, design.static_names).rows(design)
    penalty = np.array([0.0, 0.0] + [alpha / len(y)] * (z.shape[1] - 2))
    return sm.OLS(np.log(y), z).fit_regularized(alpha=penalty, L1_wt=0).params


def test_features_ridge_matches_statsmodels_and_its_loo_matches_refitting() -> None:
    design, noise = facts_design(n=12)
    y = 0.02 * design.harness**0.7 * design.facts[:, 0] ** 0.05 * np.exp(0.1 * noise)
    model = fit_features(design, y)
    assert 0 < model.alpha < math.inf, "noisy data with a weak fact wants a finite, positive penalty"
    np.testing.assert_allclose(model.solution.coef, ridge_reference(design, y, model.alpha), rtol=1e-8)
    # The leave-one-out errors behind the choice: the hat-matrix shortcut against refitting without each model
    # (scikit-learn's LeaveOneOut splits, statsmodels' ridge), standardised on all models as the shortcut is.
    scaler = _Standardiser.learn(design, design.static_names)
    z, t = scaler.rows(design), np.log(y)
    shortcut = ridge_loo_errors(design, y, scaler)
    for alpha, error in zip(RIDGE_ALPHAS, shortcut, strict=True):
        if math.isinf(alpha):
            z_alpha, penalty = z[:, :2], np.zeros(2)
        else:
            z_alpha, penalty = z, np.array([0.0, 0.0] + [alpha / (len(y) - 1)] * (z.shape[1] - 2))
        residuals = []
        for train, test in LeaveOneOut().split(z_alpha):
            params = sm.OLS(t[train], z_alpha[train]).fit_regularized(alpha=penalty, L1_wt=0).params
            residuals.append(t[test][0] - z_alpha[test][0] @ params)
        assert error == pytest.approx(np.mean(np.square(residuals)), rel=1e-7)
    assert model.alpha == RIDGE_ALPHAS[int(np.argmin(shortcut))]


def test_shortcut_loo_equals_refitting_for_every_plain_fit() -> None:
    rng = np.random.default_rng(5)
    x = np.exp(rng.uniform(0, 3, 10))
    y = 1.5 * x**0.9 * np.exp(rng.normal(0, 0.1, 10))
    design = Design(x, rng.uniform(0, 0.4, (10, 1)), ("depthwise_share",))
    for name in ("ols", "relative", "loglog", "ops"):
        spec = fit_spec(name)
        np.testing.assert_allclose(exact_loo(spec.train(design, y), design, y),
                                   leave_one_out(spec, design, y).predicted, rtol=1e-9)


def test_loglog_intervals_cover_about_95_percent_of_held_out_models() -> None:
    """Simulated power laws with log-normal scatter: the leave-one-out share inside the 95% interval."""
    rng = np.random.default_rng(2024)
    inside = []
    for _ in range(150):
        x = np.exp(rng.uniform(0, 4, 12))
        y = SCALE * x**POWER * np.exp(rng.normal(0, 0.1, 12))
        held = leave_one_out(fit_spec("loglog"), Design(x), y)
        inside.extend((held.low <= y) & (y <= held.high))
    assert 0.93 <= np.mean(inside) <= 0.97


def test_nested_choice_finds_the_law_that_generated_the_data() -> None:
    rng = np.random.default_rng(8)
    x = np.exp(rng.uniform(0, 4.5, 18))
    power_law = SCALE * x**0.6 * np.exp(rng.normal(0, 0.03, 18))
    calibration = calibrate_points("latency_ms", {"cpus": 1.0}, frame(x, power_law))
    assert calibration.model.name == "loglog"
    nested = next(row for row in calibration.comparison if row["fit"] == "auto")
    assert nested["note"] == "picked per fold: loglog 18"
    # A line with a large intercept: device time is mostly a fixed cost (straight line, not through zero).
    line = 40.0 + 0.5 * x * np.exp(rng.normal(0, 0.02, 18))
    calibration = calibrate_points("latency_ms", {"cpus": 1.0}, frame(x, line))
    assert calibration.model.name in ("ols", "relative")
    assert calibration.stats["loo_within_10pct"] == 1.0


def test_the_choice_counts_models_within_10_percent_and_breaks_near_ties_by_mape() -> None:
    y = np.full(10, 100.0)
    nine_within = y * (1 + np.array([0.09] * 9 + [0.30]))  # MAPE 11.1%
    eight_within_closer = y * (1 + np.array([0.01] * 8 + [0.11, 0.11]))  # MAPE 3.0%
    five_within_closest = y * (1 + np.array([0.0] * 5 + [0.105] * 5))  # MAPE 5.25%
    predicted = {"ols": nine_within, "relative": eight_within_closer, "loglog": five_within_closest}
    # 9 vs 8: one model only the first has within (b = 1, c = 0), 1 ≤ √1, a tie; 9 vs 5: b = 4, c = 0, 4 > √4.
    assert tied_with_best(predicted, y) == ["ols", "relative"]
    assert choose(predicted, y) == "relative"
    assert choose({"ols": nine_within, "loglog": five_within_closest}, y) == "ols"
    # Equal MAPEs go to the simpler fit, whatever the order given.
    assert choose({"loglog": eight_within_closer, "relative": eight_within_closer}, y) == "relative"


def test_forced_fit_reports_its_own_leave_one_out() -> None:
    x, y = noisy_points()
    calibration = calibrate_points("latency_ms", {"cpus": 1.0}, frame(x, y), fit="loglog")
    assert calibration.model.name == "loglog" and calibration.choice["reason"] == "forced with --fit loglog"
    held = leave_one_out(fit_spec("loglog"), Design(x), y)
    relative = np.abs(held.predicted - y) / y
    assert calibration.stats["loo_within_10pct"] == pytest.approx(np.mean(relative <= 0.10))
    assert [row["fit"] for row in calibration.comparison] == ["ols", "ops", "relative", "loglog", "kernels", "features",
                                                              "work", "library"]
    assert "PER_OP=1" in calibration.comparison[1]["note"]
    assert "kernel table" in calibration.comparison[4]["note"]
    assert "needs static facts" in calibration.comparison[5]["note"]


def op_split_design(n: int = 14, seed: int = 11) -> Design:
    """Harness values and a depthwise share per model (0 for a family without depthwise convolutions)."""
    rng = np.random.default_rng(seed)
    share = np.where(np.arange(n) % 5 == 0, 0.0, rng.uniform(0.15, 0.4, n))
    return Design(np.exp(rng.uniform(-0.5, 4.5, n)), share[:, None], ("depthwise_share",))


def test_exact_two_factor_law_is_recovered_by_ops_and_beats_one_factor() -> None:
    """Depthwise time 1.0×, the rest 1.8× (what Pixel 3 data shows): one factor for the whole latency cannot
    represent it, the ops fit recovers both factors and predicts every held-out model exactly."""
    design = op_split_design()
    share = design.facts[:, 0]
    y = design.harness * (1.0 * share + 1.8 * (1 - share))
    model = fit_spec("ops").train(design, y)
    np.testing.assert_allclose(model.solution.coef, [1.0, 1.8], rtol=1e-9)
    np.testing.assert_allclose(exact_loo(model, design, y), y, rtol=1e-9)
    np.testing.assert_allclose(leave_one_out(fit_spec("ops"), design, y).predicted, y, rtol=1e-9)
    assert "1 · harness in depthwise convs + 1.8 · the rest" in model.equation
    calibration = calibrate_points("latency_ms", {"cpus": 1.0}, frame(design.harness, y, design))
    assert calibration.model.name == "ops" and calibration.stats["loo_within_10pct"] == 1.0
    relative = next(row for row in calibration.comparison if row["fit"] == "relative")
    assert relative["within_10pct"] < 1.0  # the split is what the one-factor line misses


def test_ops_fit_is_statsmodels_wls_through_the_origin_on_the_two_times() -> None:
    design = op_split_design(seed=12)
    share = design.facts[:, 0]
    rng = np.random.default_rng(4)
    y = design.harness * (0.9 * share + 1.9 * (1 - share)) * np.exp(rng.normal(0, 0.05, len(share)))
    times = np.column_stack([design.harness * share, design.harness * (1 - share)])
    reference = sm.WLS(y, times, weights=1 / y**2).fit()
    model = fit_spec("ops").train(design, y)
    np.testing.assert_allclose(model.solution.coef, reference.params, rtol=1e-10)
    yhat, low, high = model.interval(design.take(np.array([0, 3, 5])), CONFIDENCE)
    expected_low, expected_high = in_log_space(summary_frame(reference, times[[0, 3, 5]], weights=1 / yhat**2))
    np.testing.assert_allclose(low, expected_low, rtol=1e-8)
    np.testing.assert_allclose(high, expected_high, rtol=1e-8)


def test_one_split_for_every_model_leaves_the_ops_fit_untrainable() -> None:
    design = Design(np.exp(np.linspace(0, 3, 8)), np.full((8, 1), 0.25), ("depthwise_share",))
    assert fit_spec("ops").train(design, 1.5 * design.harness) is None


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
    calibration = calibrate_points("runtime_s", {"cpus": 2.0}, frame(x, y), fit="relative")
    loo = leave_one_out(fit_spec("relative"), Design(x), y)
    relative = np.abs(loo.predicted - y) / y
    assert calibration.stats["loo_rmse"] == pytest.approx(np.sqrt(np.mean((loo.predicted - y) ** 2)))
    assert calibration.stats["loo_mape_pct"] == pytest.approx(100 * relative.mean())
    assert calibration.stats["loo_within_10pct"] == pytest.approx(np.mean(relative <= 0.10))
    assert calibration.stats["loo_within_20pct"] == pytest.approx(np.mean(relative <= 0.20))
    assert calibration.stats["loo_coverage"] == pytest.approx(np.mean((loo.low <= y) & (y <= loo.high)))
    assert calibration.stats["loo_kendall_tau"] == pytest.approx(stats.kendalltau(loo.predicted, y).statistic)
    fitted = calibration.model.predict(Design(x))
    assert calibration.stats["rmse"] == pytest.approx(np.sqrt(np.mean((fitted - y) ** 2)))


@pytest.mark.parametrize(("x", "message"), [([1.0, 2.0], "at least 3"), ([2.0, 2.0, 2.0], "identical")])
def test_degenerate_inputs_raise_data_errors(x: list[float], message: str) -> None:
    with pytest.raises(DataError, match=message):
        fit_line(x, [1.0] * len(x))


def test_a_model_beyond_the_calibration_models_reach_is_not_predicted_by_the_features_fit() -> None:
    # An exact multiplicative law: `features` wins among the calibration models, but its exponents are tuned
    # among them, so a model beyond their reach (held out, or new) is predicted by the best other fit.
    design, _ = facts_design(n=16)
    y = 1e-3 * design.harness**0.6 * np.prod(design.facts ** np.array([0.3, -0.2]), axis=1)
    calibration = calibrate_points("latency_ms", {"cpus": 1.0}, frame(design.harness, y, design))
    assert calibration.model.name == "features"
    beyond = calibration.choice["beyond_reach"]
    assert beyond in ("ols", "relative", "loglog") and beyond in calibration.choice["reason"]
    points = calibration.points.sort_values("model")
    ordered = Design(points["harness"].to_numpy(float), points[["macs", "params"]].to_numpy(float), ("macs", "params"))
    device = points["device"].to_numpy(float)
    extremes = []
    for i in range(len(y)):
        rest = np.arange(len(y)) != i
        leverage = fit_features(ordered.take(rest), device[rest]).beyond_reach(ordered.take(np.array([i])))
        extremes.append(bool(leverage[0]))
    nested = next(row for row in calibration.comparison if row["fit"] == "auto")
    picks = dict(item.rsplit(" ", 1) for item in nested["note"].removeprefix("picked per fold: ").split(", "))
    assert int(picks["features"]) == len(y) - sum(extremes) and 0 < sum(extremes) < len(y)
    # Held-out models within the others' reach are predicted exactly (features); the rest by another fit.
    error = np.abs(points["loo_predicted"] - points["device"]) / points["device"]
    assert np.all(error[~np.array(extremes)] < 1e-9) and np.all(error[np.array(extremes)] > 1e-6)
    # Prediction: a new model amid the others gets `features`, one 100× beyond the largest harness value does not.
    inside = Design(np.array([np.median(design.harness)]), np.median(design.facts, axis=0)[None, :], ("macs", "params"))
    beyond_model = Design(inside.harness * 100, inside.facts, ("macs", "params"))
    (near,) = calibration.predict(inside, ["amid"])
    (far,) = calibration.predict(beyond_model, ["far"])
    assert near.fit == "features" and near.pi_low < near.predicted < near.pi_high and far.fit == beyond
    assert near.outside == () and far.outside and far.outside[0].startswith("harness value")
    assert far.note.startswith("beyond the calibration models' reach")


def test_below_few_models_the_choice_takes_only_the_fits_of_one_number_and_the_library() -> None:
    x, y = exact_points()
    assert len(x) < FEW_MODELS
    calibration = calibrate_points("latency_ms", {"cpus": 1.0}, frame(x, y))
    assert calibration.model.name in FEW_MODEL_FITS == ("relative", "loglog", "kernels", "library")
    notes = {row["fit"]: row["note"] for row in calibration.comparison}
    assert notes["ols"] == f"not a candidate below {FEW_MODELS} models (only relative, loglog, kernels, library)"
    nested = next(row for row in calibration.comparison if row["fit"] == "auto")
    assert set(nested["note"].removeprefix("picked per fold: ").split(", ")) <= {f"{f} {n}" for f in FEW_MODEL_FITS
                                                                                    for n in range(8)}
    assert Candidates().among(FEW_MODELS) == Candidates().names
