"""Predictions beyond the calibration models: what counts as outside their reach, how much wider such an interval
is, per-family held-out figures, suggestions that prefer an unmeasured family, few-shot learning curves, and a
nested choice that never sees the model it predicts."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from harness.calibration import choice
from harness.calibration.calibrate import ACROSS_FAMILIES, calibrate_points
from harness.calibration.choice import Candidates, nested_leave_one_out
from harness.calibration.few_shot import curve_table, learning_curve
from harness.calibration.fits import FIT_NAMES, WORK_FACTS, Design, fit_spec
from harness.calibration.least_squares import KERNEL_FACT
from harness.calibration.reach import EXTRAPOLATION_SPREAD, FAMILY_SPREAD, Reach, widen
from harness.calibration.suggest import suggest, suggest_first
from harness.models.families import model_family

Z = stats.norm.ppf(0.975)
SHIFT = math.exp(0.9 * Z * EXTRAPOLATION_SPREAD)
"""Another family's speed ratio, within what the extrapolation spread is made to cover at 95%."""


def two_families(seed: int = 5) -> pd.DataFrame:
    """Eight models of one family and three of others, on which the device runs SHIFT× slower relative to the
    harness: device = 2 · harness (× SHIFT for the others), 1.5% noise, a depthwise share only the first family has."""
    rng = np.random.default_rng(seed)
    names = [f"mobilenet_v1_{a}_{r}" for a, r in [("0.25", 128), ("0.25", 224), ("0.5", 128), ("0.5", 192),
                                                  ("0.75", 160), ("0.75", 224), ("1.0", 128), ("1.0", 224)]]
    names += ["squeezenet1_0", "squeezenet1_1", "inception_v1"]
    harness = np.exp(rng.uniform(0, 3, len(names)))
    family = [model_family(name) for name in names]
    factor = np.where([f == "mobilenet_v1" for f in family], 1.0, SHIFT)
    device = 2.0 * harness * factor * np.exp(rng.normal(0, 0.015, len(names)))
    share = np.where([f == "mobilenet_v1" for f in family], rng.uniform(0.2, 0.35, len(names)), 0.0)
    return pd.DataFrame({"model": names, "harness_model": names, "harness": harness, "device": device,
                         "family": family, "depthwise_share": share})


def test_model_family_from_zoo_names_and_from_variant_tokens() -> None:
    assert model_family("mobilenet_v2_0.35_96_int8_static") == "mobilenet_v2"
    assert model_family("mobilenet_v2_0.6_224") == "mobilenet_v2"  # the grammar's family, whatever its values
    assert model_family("squeezenet1_1") == "squeezenet"
    assert model_family("resnet_v2_101_quant") == "resnet_v2"
    assert model_family("my-net-1.0-224") == "my-net"


def test_widen_adds_the_spread_in_quadrature_to_each_side_in_log_space() -> None:
    yhat, low, high = np.array([10.0, 10.0]), np.array([8.0, 8.0]), np.array([12.5, 12.5])
    new_low, new_high = widen(yhat, low, high, np.array([0.1, 0.0]))
    assert new_low[1] == 8.0 and new_high[1] == 12.5  # inside the reach: unchanged
    assert math.log(10 / new_low[0]) == pytest.approx(math.hypot(math.log(10 / 8), Z * 0.1), rel=1e-12)
    assert math.log(new_high[0] / 10) == pytest.approx(math.hypot(math.log(12.5 / 10), Z * 0.1), rel=1e-12)
    # A linear fit's interval reaching below zero keeps its lower bound; its upper bound still widens.
    low_zero, high_up = widen(np.array([1.0]), np.array([-0.5]), np.array([2.5]), np.array([0.1]))
    assert low_zero[0] == -0.5 and high_up[0] > 2.5


def test_reach_names_harness_value_op_mix_and_family() -> None:
    design = Design(np.array([1.0, 2.0, 4.0]), np.array([[0.2], [0.3], [0.25]]), ("depthwise_share",),
                    ("a", "a", "b"))
    reach = Reach.of(design)
    queries = Design(np.array([3.0, 8.0, 3.0, 3.0]), np.array([[0.25], [0.25], [0.0], [0.25]]),
                     ("depthwise_share",), ("a", "a", "a", "c"))
    reasons = reach.outside(queries)
    assert reasons[0] == []
    assert reasons[1] == ["harness value 8 outside the calibration models' 1–4"]
    assert reasons[2] == ["depthwise share 0% outside the calibration models' 20%–30%"]
    assert reasons[3] == ["no calibration model of its family (c)"]
    # A new family's law is unseen: its interval widens by FAMILY_SPREAD, any other reason's by EXTRAPOLATION_SPREAD.
    assert reach.spreads(queries)[1].tolist() == [0.0, EXTRAPOLATION_SPREAD, EXTRAPOLATION_SPREAD, FAMILY_SPREAD]
    # Families count only when some calibration models share one: else the fit's scatter is between families.
    assert Reach.of(Design(np.array([1.0, 2.0]), families=("a", "b"))).families == frozenset()


def test_a_model_outside_the_calibration_models_reach_gets_a_wider_interval_that_covers_it() -> None:
    points = two_families()
    mobilenets = points[points["family"] == "mobilenet_v1"]
    calibration = calibrate_points("latency_ms", {}, mobilenets.iloc[:-1], fit="relative")
    # Two new models at the same harness value, of the calibrated family and of another one.
    probe = pd.DataFrame({"harness": [mobilenets["harness"].median()] * 2, "depthwise_share": [0.25, 0.25]},
                         index=["mobilenet_v1_1.0_224", "squeezenet1_0"])
    design = calibration.design(probe["harness"], probe, probe.index)
    same, other = calibration.predict(design, probe.index)
    assert same.predicted == pytest.approx(other.predicted) and same.outside == () and same.reach == "inside"
    assert other.outside == ("no calibration model of its family (squeezenet)",) and other.reach == "outside"
    assert other.pi_high - other.pi_low > same.pi_high - same.pi_low
    # The other families' models, SHIFT× slower than the fit knows: outside its fit's own interval, inside the
    # widened one (the extra spread is made for such a shift).
    others = points[points["family"] != "mobilenet_v1"]
    fit_own = calibration.model.interval(Design(others["harness"].to_numpy()), 0.95)
    design = calibration.design(others["harness"], others.set_index("harness_model"), others["harness_model"])
    found = calibration.intervals(design)
    device = others["device"].to_numpy()
    assert np.all(device > fit_own[2])
    assert np.all((found.low <= device) & (device <= found.high))


def test_nested_figures_per_family_and_across_families() -> None:
    points = two_families()
    calibration = calibrate_points("latency_ms", {}, points)
    rows = {row["family"]: row for row in calibration.by_family()}
    assert set(rows) == {"mobilenet_v1", "squeezenet", "inception_v1", ACROSS_FAMILIES}
    assert rows["mobilenet_v1"]["n"] == 8 and rows[ACROSS_FAMILIES]["n"] == len(points)
    error = np.abs(calibration.points["loo_predicted"] - calibration.points["device"]) / calibration.points["device"]
    mobilenet = calibration.points["family"] == "mobilenet_v1"
    assert rows["mobilenet_v1"]["within_10pct"] == pytest.approx(np.mean(error[mobilenet] <= 0.10))
    assert rows[ACROSS_FAMILIES]["within_10pct"] == calibration.stats["loo_within_10pct"]
    # The lone inception held out has no model of its family in its fold: outside, its interval widened.
    held = calibration.points.set_index("family")
    assert bool(held.loc["inception_v1", "loo_outside"])


def test_suggest_measures_an_unmeasured_family_with_models_left_to_predict_first() -> None:
    points = two_families()
    measured = points[points["family"] == "mobilenet_v1"]
    calibration = calibrate_points("latency_ms", {}, measured, fit="relative")
    extra = pd.DataFrame({"harness_model": ["squeezenet1_0_int8_static", "squeezenet1_1_int8_static",
                                            "mobilenet_v1_0.5_160", "mobilenet_v1_0.75_192"],
                          "harness": [3.0, 4.0, measured["harness"].max() * 3, measured["harness"].max() * 4]})
    picks = suggest(calibration, extra, 2)
    assert picks[0].family == "squeezenet" and picks[0].new_family
    assert picks[1].family == "mobilenet_v1" and not picks[1].new_family  # the family is measured now
    # Before any measurement: the picks spread over the candidates and take the big family early.
    design = Design(points["harness"].to_numpy(), families=tuple(points["family"]))
    first = suggest_first(design, points["harness_model"].tolist(), "relative", 4)
    assert len({p.model for p in first}) == 4 and "mobilenet_v1" in {p.family for p in first[:2]}
    assert [p.mean_before for p in first] == sorted((p.mean_before for p in first), reverse=True)


def test_learning_curve_scores_the_models_not_measured() -> None:
    points = two_families()
    trials = learning_curve(points, Candidates(("relative",)), k_values=(3, 5, 8), draws=5)
    assert {(t.k, t.how) for t in trials} == {(k, how) for k in (3, 5, 8) for how in ("suggest", "random")}
    for t in trials:
        assert len(t.models) == t.k and 0.0 <= t.within_10pct <= 1.0 and 0.0 <= t.coverage <= 1.0
    table = curve_table(trials)
    assert set(table["draws"]) == {1, 5}
    # From 8 of 11 models with the family shift the fit cannot see, the rest still land inside their intervals.
    eight = [t for t in trials if t.k == 8]
    assert np.mean([t.coverage for t in eight]) >= 0.8
    # A k leaving fewer than three models to predict is not shown.
    assert learning_curve(points, k_values=(9,), draws=2) == []


def _own_value_moves_its_prediction(design: Design, y: np.ndarray) -> bool:
    """Whether some model's held-out prediction changes when only its own device value does."""
    base = nested_leave_one_out(design, y, Candidates()).predicted
    for i in range(len(y)):
        moved = y.copy()
        moved[i] *= 1.5
        if nested_leave_one_out(design, moved, Candidates()).predicted[i] != base[i]:
            return True
    return False


def test_the_nested_choice_never_sees_the_model_it_predicts(monkeypatch: pytest.MonkeyPatch) -> None:
    points = two_families()
    design = Design(points["harness"].to_numpy(), points[["depthwise_share"]].to_numpy(), ("depthwise_share",),
                    tuple(points["family"]))
    y = points["device"].to_numpy()
    assert not _own_value_moves_its_prediction(design, y)
    # A planted leak: folds that keep their held-out model. The same check catches it.
    monkeypatch.setattr(choice, "folds", lambda n: ((i, np.ones(n, dtype=bool)) for i in range(n)))
    assert _own_value_moves_its_prediction(design, y)


@pytest.mark.parametrize("name", FIT_NAMES)
def test_every_fit_recovers_exact_synthetic_data_of_its_own_law(name: str) -> None:
    rng = np.random.default_rng(4)
    n = 12
    harness = np.exp(rng.uniform(0, 4, n))
    work = np.zeros((n, len(WORK_FACTS)))  # kinds no model does stay zero, as in a real graph
    work[:, :3] = rng.uniform(1e6, 1e8, (n, 3))
    library = np.exp(rng.uniform(0, 5, n))  # another device's latency of the same models
    kernels = np.exp(rng.uniform(0, 5, n))  # the device's kernel table's prediction of them
    facts = np.column_stack([np.exp(rng.uniform(15, 20, n)), np.exp(rng.uniform(12, 16, n)),
                             np.exp(rng.uniform(1, 4, n)), rng.uniform(0.0, 0.4, n), work, library, kernels])
    design = Design(harness, facts, ("macs", "params", "activation_mib", "depthwise_share", *WORK_FACTS,
                                     "library:other", KERNEL_FACT))
    share = facts[:, 3]
    laws = {"ols": 3.0 * harness - 0.5, "relative": 2.0 * harness + 0.7, "loglog": 1.7 * harness**0.8,
            "ops": harness * (0.9 * share + 1.8 * (1 - share)),
            "features": 0.01 * harness**0.7 * facts[:, 0] ** 0.2 * facts[:, 1] ** -0.1 * facts[:, 2] ** 0.3,
            "work": 0.5 + 0.8 * harness + 3e-8 * work[:, 0] + 1e-7 * work[:, 1] + 2e-8 * work[:, 2],
            "library": 2.0 * harness**0.3 * library**0.9, "kernels": 1.3 * kernels}
    y = laws[name]
    model = fit_spec(name).train(design, y)
    np.testing.assert_allclose(model.predict(design), y, rtol=1e-8)
    held = choice.leave_one_out(fit_spec(name), design, y)
    np.testing.assert_allclose(held.predicted, y, rtol=1e-8)


def test_a_log_fit_far_beyond_three_close_models_gives_an_unbounded_interval_without_a_warning() -> None:
    design = Design(np.array([1.00, 1.01, 1.02]))
    y = np.array([2.0, 2.1, 1.9])
    model = fit_spec("loglog").train(design, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yhat, low, high = model.interval(Design(np.array([1e6])), 0.95)
    assert np.isfinite(yhat[0]) and low[0] >= 0 and high[0] == np.inf


def test_a_features_fit_whose_constant_overflows_a_float_still_states_its_equation() -> None:
    rng = np.random.default_rng(7)
    n = 12
    facts = np.column_stack([np.exp(rng.uniform(17, 20, n)), np.exp(rng.uniform(12, 16, n)), rng.uniform(1, 9, n)])
    design = Design(rng.uniform(1, 5, n), facts, ("macs", "params", "activation_mib"))
    y = np.exp(750 - 40 * np.log(facts[:, 0])) * rng.lognormal(0, 0.01, n)  # a constant of e^750: beyond a float
    model = fit_spec("features").train(design, y)
    assert model.alpha == 0 and model.equation.startswith("device = e^7")
