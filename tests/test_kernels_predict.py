"""The kernel predictor on real per-op rows: zoo models profiled per-op under onnxruntime (this host, CPUS=1), one
family held out; its packed trees give scikit-learn's own numbers; its predictions are positive with an interval
around them, carried by the kinds' regressors or the pooled one, and a loaded graph is predicted fast."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import GradientBoostingRegressor

from harness.analysis.per_op import BETWEEN_OPS, TABLE_CSV, run_dir
from harness.cli import main
from harness.kernels.features import FEATURES, vector
from harness.kernels.predictor import (
    FOOTPRINT_MODELS,
    NO_FOOTPRINT_LINE,
    KernelModel,
    footprint_line,
    held_out_line_residuals,
    held_out_sums,
    interval_factors,
    predict_graph,
    predictions_per_second,
    profiler_cost,
    samples_of,
    without_profiler,
)
from harness.kernels.regressors import (
    ALIAS,
    DESIGNED,
    POOLED,
    KernelRegressors,
    fitted_trees,
    kind_view,
    work_units,
)
from harness.kernels.rules import host_block, load_rules
from harness.kernels.table import write_table
from harness.kernels.term import (
    LINE_MODELS,
    latency_term,
    left_out_residuals,
    line_and_call,
    log_line,
    median_ratio,
)
from harness.kernels.training import ModelTable, as_table_rows, median_of_runs, session_tables
from harness.kernels.trees import PackedTrees
from harness.store.results import list_sessions, load_runs
from tests.test_kernels_detect import MISSED_CONVERSIONS
from tests.zoo_support import zoo_cache  # noqa: F401 - fixture

MODELS = ("mobilenet_v1_0.25_128", "mobilenet_v1_0.5_128", "squeezenet1_1", "resnet8_cifar10", "kws_dscnn")
HELD_OUT = "mobilenet_v1"


def test_packed_trees_give_sklearns_numbers() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 6))
    y = np.sin(x[:, 0]) + x[:, 1] * x[:, 2] + rng.normal(scale=0.1, size=400)
    model = GradientBoostingRegressor(n_estimators=60, max_depth=3, subsample=0.9, random_state=0).fit(x, y)
    probe = rng.normal(size=(50, 6))
    assert np.allclose(PackedTrees.of(model).predict(probe), model.predict(probe), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("n", [3, 12, 24, 79])
def test_the_interval_covers_a_new_residual_at_any_table_size(n: int) -> None:
    """95% of a new model's residual, near enough, from a table of 3 models (where the extremes alone cover half) to
    79 (where the conformal ranks are inside them), on heavy-tailed draws as kernel sums' residuals have."""
    rng = np.random.default_rng(1)
    trials = 4000
    draws = rng.standard_t(4, size=(trials, n + 1)) * 0.1 + 0.03  # a bias too: held-out sums run to one side
    inside = 0
    for row in draws:
        low, high = interval_factors(row[:n])
        inside += int(np.log(low) <= row[n] <= np.log(high))
    assert 0.92 <= inside / trials <= 0.975  # binomial sd ≈ 0.004


@pytest.mark.parametrize("slope", [-0.08, 0.0, 0.05])
def test_the_footprints_slope_is_the_held_out_residuals_line(slope: float) -> None:
    """The slope of held-out log residuals on the graphs' footprints (log weight bytes of zoo models: 10 to 20), found
    within three standard errors from 25 models with 5% of noise, with their footprints' mean and range; none from
    fewer than FOOTPRINT_MODELS models or from footprints that do not vary."""
    rng = np.random.default_rng(3)
    footprints = rng.uniform(10.0, 20.0, 25)
    residuals = 0.02 + slope * (footprints - 15.0) + rng.normal(0.0, 0.05, 25)
    found, centre, least, most = footprint_line(residuals, footprints)
    standard_error = 0.05 / np.sqrt(np.sum((footprints - footprints.mean()) ** 2))
    assert abs(found - slope) < 3 * standard_error and centre == pytest.approx(footprints.mean())
    assert (least, most) == (footprints.min(), footprints.max())  # a footprint beyond them is read at the nearest
    few = FOOTPRINT_MODELS - 1
    assert footprint_line(residuals[:few], footprints[:few]) == NO_FOOTPRINT_LINE
    assert footprint_line(residuals, np.full(25, 15.0)) == NO_FOOTPRINT_LINE


def test_models_measured_end_to_end_choose_the_terms_form_by_each_models_residual_against_the_others() -> None:
    """Sums that run 4 times the smallest model's latency and 2 times the largest's: the line in logs finds that power
    within noise and is chosen over the median ratio; a model off the others' line keeps its whole miss as its
    residual; with fewer than LINE_MODELS models, the median ratio."""
    rng = np.random.default_rng(5)
    sums = np.exp(rng.uniform(np.log(0.3), np.log(50.0), 12))
    measured = 0.2 * sums ** 1.15 * np.exp(rng.normal(0.0, 0.03, 12))
    scale, power, _ = log_line(sums, measured)
    assert power == pytest.approx(1.15, abs=0.05) and scale == pytest.approx(0.2, rel=0.1)
    assert latency_term(sums, measured) is log_line
    assert latency_term(sums, 0.3 * sums * np.exp(rng.normal(0.0, 0.03, 12))) is median_ratio
    measured[3] *= 1.5
    residuals = left_out_residuals(sums, measured, log_line)
    others = np.arange(12) != 3
    c, k, _ = log_line(sums[others], measured[others])
    assert residuals[3] == pytest.approx(math.log(measured[3] / (c * sums[3] ** k)))
    assert residuals[3] > math.log(1.4) and np.all(np.abs(residuals[others]) < 0.2)
    assert latency_term(sums[:LINE_MODELS - 1], measured[:LINE_MODELS - 1]) is median_ratio


def test_models_that_spend_a_time_per_call_beside_their_kernels_choose_a_line_with_that_time() -> None:
    """Latency 0.9·Σ + 0.05 ms over sums of 0.02 to 30 ms: a tiny model spends more on the call than on its kernels,
    which neither a ratio nor a power of the sum follows; the line with a time per call is chosen and finds it."""
    rng = np.random.default_rng(9)
    sums = np.exp(rng.uniform(np.log(0.02), np.log(30.0), 12))
    measured = (0.9 * sums + 0.05) * np.exp(rng.normal(0.0, 0.02, 12))
    assert latency_term(sums, measured) is line_and_call
    a, k, b = line_and_call(sums, measured)
    assert k == 1.0 and a == pytest.approx(0.9, rel=0.05) and b == pytest.approx(0.05, rel=0.2)


def test_each_models_interval_residual_is_against_a_footprint_line_fitted_without_it() -> None:
    """A model at the end of the footprints and off the others' line pulls an in-sample line to itself and looks
    nearer its prediction than a new model there would be; against the line of the others it keeps its whole miss."""
    footprints = np.linspace(10.0, 20.0, 12)
    residuals = 0.05 * (footprints - 15.0)
    residuals[-1] += 0.4
    held = held_out_line_residuals(residuals, footprints)
    others = footprints[:-1].mean()
    nearest = footprints[-2]  # read at the others' largest footprint, as a prediction reads one beyond them
    assert held[-1] == pytest.approx(residuals[-1] - 0.05 * (nearest - others))  # the others' slope: 0.05
    slope, centre, _, _ = footprint_line(residuals, footprints)
    assert held[-1] - (residuals[-1] - slope * (footprints[-1] - centre)) > 0.1


def test_each_models_held_out_sum_is_from_regressors_of_every_other_family() -> None:
    """Five families run the same convolutions at 1.0 to 2.0 times one time a unit of work. Each model's held-out sum
    is what regressors fitted on the other four families alone predict for its kernels: as a new model's sum is
    predicted by regressors of every family of the table, not of two thirds of them."""
    rng = np.random.default_rng(7)
    frames = []
    for family, scale in zip("abcde", (1.0, 1.2, 1.5, 1.7, 2.0), strict=True):
        for model in (f"{family}1", f"{family}2"):
            xs = [[*conv(int(c), int(c), 1, int(s)), 0.0] for c, s in zip(rng.choice([16, 32, 64, 128], 12),
                                                                           rng.choice([7, 14, 28], 12), strict=True)]
            ms = [scale * float(work) * 1e-8 for work in np.expm1(work_units(np.array(xs)))]
            frames.append(samples_frame("Conv", xs, ms, False, family).assign(model=model))
    samples = pd.concat(frames, ignore_index=True)
    regressors = KernelRegressors.fit(samples)
    sums = held_out_sums(samples, samples, regressors)
    assert sorted(sums.index) == sorted(samples["model"].unique())
    for model, group in samples.groupby("model"):
        others = KernelRegressors.fit(samples[samples["family"].ne(group["family"].iloc[0])])
        expected = others.predict("Conv", np.vstack(list(group["x"])), 10.0)[0].sum()
        assert sums[model] == pytest.approx(expected, rel=1e-9), model
    one_family = samples[samples["family"].eq("a")]
    assert held_out_sums(one_family, one_family, regressors).empty  # no other family to predict it from


@pytest.mark.parametrize("cost_ms", [0.004, 0.3, 2.0])
def test_the_profilers_cost_is_found_at_the_devices_scale(cost_ms: float) -> None:
    """The cost a row that the profiler adds, from models' per-op sums against their latency: this host's few
    microseconds, and an emulated board's hundreds (a fixed grid that stopped at 0.05 ms left most of it in)."""
    rng = np.random.default_rng(2)
    latency = np.exp(rng.uniform(np.log(0.3), np.log(40.0), 12)) * (1 if cost_ms < 0.1 else 300)
    counts = rng.integers(20, 300, 12).astype(float)
    sums = latency * rng.normal(1.0, 0.02, 12) + cost_ms * counts
    assert profiler_cost(sums, counts, latency, pd.Series(dtype=float)) == pytest.approx(cost_ms, rel=0.1)


@pytest.mark.usefixtures("zoo_cache")
def test_held_out_family_is_predicted_from_its_graph(tmp_path: Path) -> None:
    assert main(["profile", *MODELS, "--per-op", "--repeats", "2", "--iterations", "10", "--warmup", "2",
                 "--cpus", "1", "--backend", "local", "--results-dir", str(tmp_path), "--no-report"]) == 0
    session = list_sessions(tmp_path)[-1]
    tables = session_tables([session], "onnxruntime")
    check_median_of_runs(session, tables)
    rows = as_table_rows(tables)
    rules = load_rules("onnxruntime")
    train = rows[rows["family"] != HELD_OUT]
    samples = samples_of(train, Path, rules)
    assert len(samples) == len(train)  # every engine row became one kernel sample
    check_input_footprint(samples)
    model = KernelModel.fit(train, Path, rules, samples=samples)
    held = [table for table in tables if table.model.startswith(HELD_OUT)]
    assert len(held) == 2
    for table in held:
        ms, low, high, detail = model.predict(table.model_path)
        assert 0 < low <= ms <= high
        missed = MISSED_CONVERSIONS.get(host_block("onnxruntime"), 0)
        assert abs(detail["kernels"] - len(table.rows)) <= missed  # the detected kernels are the engine's rows
        assert 0.25 < ms / table.latency_ms < 4  # within a factor of four of the measured latency
        term = detail["term"]  # (a·Σ + b)·the footprint's factor
        assert ms == pytest.approx((term["a"] * detail["kernel_sum_ms"] + term["b_ms"]) * term["footprint_factor"])
        assert set(detail["by_kind"]) >= {"Conv", "DepthwiseConv"}
        reshape = detail["by_kind"]["Reshape"]  # onnxruntime runs it as an alias: the table's median, at any size
        assert reshape["regressor"] == ALIAS
        kept = without_profiler(samples, model.profiler_ms)
        median = float(kept.loc[kept["kind"].eq("Reshape"), "ms"].median())
        assert reshape["ms"] == pytest.approx(reshape["kernels"] * median, rel=1e-9)
    assert min(model.term) >= 0 and 0 <= model.profiler_ms < 0.05
    assert predictions_per_second(model, held[0].model_path, seconds=0.3) >= 100
    check_table_face(tmp_path, train, model, held[0].model_path)


def check_input_footprint(samples: pd.DataFrame) -> None:
    """The kernel that reads a model's input, and no other, carries the graph's footprint as its last feature."""
    carried = np.array([x[-1] for x in samples["x"]])
    first = samples[carried > 0]
    assert sorted(first["model"]) == sorted(samples["model"].unique())  # one kernel a model
    assert carried[carried > 0] == pytest.approx(first["footprint"].to_numpy())
    assert set(first["kind"]) == {"Conv"}  # each of these models begins with a convolution


def check_median_of_runs(session: Path, tables: list[ModelTable]) -> None:
    """Each node of a model's table is at the median of its two runs' times (their mean), matched by name."""
    moved = 0
    for table in tables:
        runs = [run for run in load_runs(session) if run.ok and run.model_name == table.model]
        assert len(runs) == 2
        per_run = [pd.read_csv(run_dir(session, run.run_id) / TABLE_CSV).set_index("node") for run in runs]
        rows = table.rows.set_index("node")
        first, second = (t.loc[rows.index, "median_ms"].to_numpy() for t in per_run)
        assert rows["median_ms"].to_numpy() == pytest.approx((first + second) / 2)
        moved += int((rows["median_ms"].to_numpy() != first).sum())
    assert moved > 0  # the runs did differ, and both counted


def test_a_nodes_time_is_the_median_of_its_runs_whatever_their_order() -> None:
    """A run's nodes in another order (onnxruntime runs independent nodes so) are matched by name, not position;
    runs whose nodes differ keep the first run's table."""
    first = pd.DataFrame({"node": ["a", "b", "b", "c"], "op_type": ["Conv", "Relu", "Relu", "Add"],
                          "mean_ms": [1.0, 2.0, 3.0, 4.0], "median_ms": [1.0, 2.0, 3.0, 4.0]})
    second = first.iloc[[3, 1, 2, 0]].assign(mean_ms=[3.0, 1.0, 5.0, 0.5], median_ms=[3.5, 1.5, 2.5, 0.4])
    third = first.assign(mean_ms=[9.0, 9.0, 9.0, 9.0], median_ms=[0.0, 0.0, 0.0, 0.0])
    middle = median_of_runs([first, second, third])
    assert middle["node"].tolist() == ["a", "b", "b", "c"]
    assert middle["median_ms"].tolist() == [0.4, 1.5, 2.5, 3.5]
    assert middle["mean_ms"].tolist() == [1.0, 2.0, 5.0, 4.0]
    other = second.assign(node=["c", "b", "d", "a"])
    assert median_of_runs([first, other]).equals(first)


def conv(cin: int, cout: int, groups: int, size: int) -> list[float]:
    """A 3×3 convolution's feature vector (harness.kernels.features.vector), without the input footprint."""
    macs = cout * (cin // groups) * 9 * size * size
    acts = (cin + cout) * size * size * 4
    weights = cout * (cin // groups) * 9 * 4
    return vector({"macs": macs, "bytes": acts + weights, "in_bytes": cin * size * size * 4,
                   "out_bytes": cout * size * size * 4, "weight_bytes": weights,
                   "intensity": macs / (acts + weights), "cin": cin, "cout": cout, "kernel": 3, "stride": 1,
                   "groups": groups, "resolution": size, "inputs": 1, "blocked": 1})


def samples_frame(kind: str, xs: Sequence[Sequence[float]], ms: float | Sequence[float], alone: bool | Sequence[bool],
                  family: str | Sequence[str]) -> pd.DataFrame:
    """Training samples as harness.kernels.predictor.samples_of gives them to KernelRegressors.fit: one kind's feature
    vectors and times, in graphs of one footprint."""
    return pd.DataFrame({"kind": kind, "x": [np.array(x) for x in xs], "ms": ms, "footprint": 10.0, "alone": alone,
                         "family": family})


def test_trees_weigh_each_row_by_the_square_root_of_its_time() -> None:
    """Rows the features cannot tell apart are predicted at their mean weighted by √ms: ninety 1 µs rows at one time a
    unit of work and ten 1 ms rows at e times it come out at 10/(10 + 90·√0.001) of the way to the slow rows' target,
    not at the tenth an unweighted fit gives. A model's error is its kernels' weighted by their time."""
    x = np.ones((100, 3))
    ms = np.r_[np.full(90, 0.001), np.full(10, 1.0)]
    y = np.r_[np.zeros(90), np.ones(10)]
    weight = np.sqrt(ms)
    predicted = fitted_trees(x, y, ms).predict(x[:1])[0]
    assert predicted == pytest.approx(float(weight @ y / weight.sum()), rel=0.02)  # trees of 90% subsamples
    assert predicted > 0.7  # unweighted: 0.1


def test_a_grouped_convolutions_regressor_reads_its_width() -> None:
    """A grouped convolution's time a unit of work follows its width, the channels a group: here 6, 2.5 and 1 for
    widths of 4, 8 and 16 (a plain 3×3 one ran at 0.12, 0.04 and 0.02 ns a unit of work on this host). Forty designed
    kernels of up to 256 channels, timed to ±5%, as a short probe times them, teach it, and RegNet's and ResNeXt's
    wider layers (912 channels in groups of 8, 1,024 in groups of 4 or 16) come out at their width's time; trees
    that read the channels and the groups apart put them 42%, 43% and 42% off."""
    rng = np.random.default_rng(2)
    cost = {4: 6.0, 8: 2.5, 16: 1.0}
    def ms_of(x: list[float], width: int) -> float:
        return cost[width] * float(np.expm1(x[0]) + np.expm1(x[1])) * 1e-7
    widths, groups = rng.choice(list(cost), 40), rng.choice([2, 3, 4, 6, 8, 12, 16], 40)
    xs = [[*conv(int(w * g), int(w * g), int(g), int(s)), 0.0]
          for w, g, s in zip(widths, groups, rng.choice([7, 14, 28, 56], 40), strict=True)]
    ms = [ms_of(x, int(w)) * noise for x, w, noise in zip(xs, widths, np.exp(rng.normal(0, 0.05, 40)), strict=True)]
    regressors = KernelRegressors.fit(samples_frame("GroupedConv", xs, ms, True, "designed"))
    wide = {8: conv(912, 912, 114, 14), 4: conv(1024, 1024, 256, 7), 16: conv(1024, 1024, 64, 7)}
    for width, x in wide.items():
        times, carried = regressors.predict("GroupedConv", np.array([[*x, 0.0]]), 10.0)
        assert carried == "GroupedConv" and times[0] == pytest.approx(ms_of(x, width), rel=0.15), width


def test_a_grouped_convolution_without_rows_of_its_own_is_its_groups_dense_convolutions() -> None:
    """No other family runs RegNet's grouped convolutions: they are predicted as `groups` dense convolutions of one
    group's channels, by the dense convolutions' regressor, not by the pooled one (which put them at a quarter of
    their time)."""
    rng = np.random.default_rng(3)
    dense = [conv(int(c), int(c), 1, int(s)) for c, s in zip(rng.choice([8, 16, 32, 64, 128], 60),
                                                               rng.choice([7, 14, 28, 56], 60), strict=True)]
    ms = [float(np.expm1(x[0])) * 1e-7 + 0.002 for x in dense]
    regressors = KernelRegressors.fit(samples_frame("Conv", dense, ms, False, "dense"))
    grouped = np.array([conv(104, 104, 13, 28), conv(208, 208, 26, 14)])
    times, carried = regressors.predict("GroupedConv", grouped, 10.0)
    assert carried == "Conv per group"
    one_group = np.array([conv(8, 8, 1, 28), conv(8, 8, 1, 14)])
    assert times == pytest.approx([13, 26] * regressors.predict("Conv", one_group, 10.0)[0], rel=1e-6)


def test_a_view_costs_the_median_of_every_row_of_it_designed_kernels_too() -> None:
    """A view (onnxruntime's aliasing Reshape) does the same nothing in a probe graph as in a model, so its time is
    the median of the table's rows of it, the designed kernels' beside the models'. The models' own rows alone (one
    flatten a model, 0.003 ms) had put a held-out ShuffleNetV2's 32 channel-shuffle views (0.0005 ms each) at four
    times their time."""
    rng = np.random.default_rng(5)
    def rows(kind: str, count: int, ms: float, alone: bool, family: str) -> pd.DataFrame:
        return samples_frame(kind, [[*conv(int(c), int(c), 1, 14), 0.0] for c in rng.choice([16, 32, 64], count)], ms,
                             alone, family)
    models = [rows(kind, count, ms, False, family) for family in ("a", "b", "c")
              for kind, count, ms in (("Conv", 20, 0.05), ("Reshape", 1, 0.003))]
    regressors = KernelRegressors.fit(pd.concat([*models, rows("Reshape", 30, 0.0005, True, "designed")],
                                                ignore_index=True), frozenset({"Reshape"}))
    times, carried = regressors.predict("Reshape", np.vstack(list(models[1]["x"])), 10.0)
    assert carried == ALIAS and times == pytest.approx([0.0005])


def test_a_kind_no_model_runs_is_its_designed_kernels_in_context() -> None:
    """Models of three families run dense convolutions at 0.8 of the time their designed twins took in a probe;
    grouped convolutions, 5 times slower a MAC, and an Add were designed only. The grouped ones are predicted by
    their designed kernels' regressor at 0.8 of their time there, not as dense convolutions; the Add too, not by the
    pooled regressor, which has seen no Add; the dense ones keep their models' own regressor. A table of designed
    kernels alone trains on them directly. (The regressors alone: a kernel with a designed twin is its twin's.)"""
    rng = np.random.default_rng(11)
    def rows(kind: str, groups: int, count: int, scale: float, alone: bool, family: str) -> pd.DataFrame:
        channels, sizes = rng.choice([32, 64, 96, 128, 256], count), rng.choice([7, 14, 28, 56], count)
        x = [[*conv(int(c), int(c), groups, int(s)), 0.0] for c, s in zip(channels, sizes, strict=True)]
        return samples_frame(kind, x, [scale * (float(np.expm1(v[0])) * 2e-7 + 0.002) for v in x], alone, family)
    models = pd.concat([rows("Conv", 1, 40, 0.8, False, family) for family in ("a", "b", "c")])
    designed = pd.concat([rows("Conv", 1, 80, 1.0, True, "designed"),
                          rows("GroupedConv", 8, 80, 5.0, True, "designed")])
    adds = designed.iloc[:40].assign(kind="Add", x=[np.array([0.0, *v[1:]]) for v in designed["x"].iloc[:40]])
    regressors = KernelRegressors.fit(pd.concat([models, designed, adds], ignore_index=True))
    grouped = np.array([[*conv(128, 128, 16, 28), 0.0], [*conv(64, 64, 8, 14), 0.0]])
    assert set(regressors.alone) == {"GroupedConv", "Add"}
    assert regressors.in_context(grouped) == pytest.approx(np.log(0.8), abs=0.05)
    times, carried = regressors.regressed("GroupedConv", grouped, 10.0)
    truth = [0.8 * 5.0 * (float(np.expm1(v[0])) * 2e-7 + 0.002) for v in grouped]
    assert carried == DESIGNED and times == pytest.approx(truth, rel=0.15)
    assert regressors.regressed("Add", adds["x"].iloc[0][None, :], 10.0)[1] == DESIGNED
    assert regressors.regressed("Conv", grouped, 10.0)[1] == "Conv"
    alone = KernelRegressors.fit(designed.reset_index(drop=True))
    assert not alone.alone and alone.regressed("GroupedConv", grouped, 10.0)[1] == "GroupedConv"


def in_context_of(model_factor: Callable[[np.ndarray], float], seed: int) -> tuple[KernelRegressors, np.ndarray]:
    """Regressors fitted on designed dense and grouped convolutions and on models of three families whose dense
    convolutions ran at `model_factor(x)` of their designed twins' time; and the models' rows."""
    rng = np.random.default_rng(seed)
    def rows(kind: str, groups: int, count: int, alone: bool, family: str) -> pd.DataFrame:
        channels, sizes = rng.choice([16, 32, 64, 128, 256], count), rng.choice([7, 14, 28, 56], count)
        x = [[*conv(int(c), int(c), groups, int(s)), 0.0] for c, s in zip(channels, sizes, strict=True)]
        return samples_frame(kind, x, [float(np.expm1(v[0])) * 2e-7 + 0.002 for v in x], alone, family)
    designed = pd.concat([rows("Conv", 1, 120, True, "designed"), rows("GroupedConv", 8, 80, True, "designed")])
    models = pd.concat([rows("Conv", 1, 40, False, family) for family in ("a", "b", "c")], ignore_index=True)
    models["ms"] = models["ms"] * [model_factor(x) for x in models["x"]]
    return KernelRegressors.fit(pd.concat([models, designed], ignore_index=True)), np.vstack(list(models["x"]))


def test_what_running_in_a_model_takes_off_a_designed_kernel_shrinks_as_kernels_grow() -> None:
    """Models of three families run small dense convolutions at 0.6 of their designed twins' time and large ones at
    0.95, the factor a line in log work: a grouped convolution no model runs is predicted at the factor of its size,
    where one factor for all would put the large ones far too low; one smaller than the models' rows of the first
    bin is held at that bin's factor."""
    def work(x: np.ndarray) -> float:
        return float(np.log1p(np.expm1(x[0]) + np.expm1(x[1])))
    least, most = work(np.array(conv(16, 16, 1, 7))), work(np.array(conv(256, 256, 1, 56)))
    def factor(x: np.ndarray) -> float:  # 0.6 for the smallest, 0.95 for the largest
        return 0.6 + 0.35 * (work(x) - least) / (most - least)
    regressors, x = in_context_of(factor, 13)
    assert [min(map(work, x)), max(map(work, x))] == pytest.approx([least, most])  # both drawn
    small, large = np.array([[*conv(64, 64, 8, 14), 0.0]]), np.array([[*conv(256, 256, 4, 28), 0.0]])
    expected = [factor(x[0]) for x in (small, large)]
    assert expected[1] / expected[0] > 1.2
    for x, factor_of_size in zip((small, large), expected, strict=True):
        times, carried = regressors.regressed("GroupedConv", x, 10.0)
        in_probe = np.exp(regressors.designed["GroupedConv"].predict(kind_view("GroupedConv", x))[0] + work(x[0]))
        assert carried == DESIGNED and times[0] / in_probe == pytest.approx(factor_of_size, rel=0.05)
    smallest = np.array([[*conv(16, 16, 8, 7), 0.0]])
    first_bin = np.exp(regressors.in_context(smallest)[0])
    assert first_bin == pytest.approx(np.exp(regressors.in_context.log_factor[0]))
    assert factor(smallest[0]) < first_bin < expected[0]


def test_many_small_model_rows_far_below_their_designed_twins_leave_the_large_kernels_factor() -> None:
    """Models run dense convolutions of under 10 M MACs (about half the rows) at a fifth of their designed twins'
    time, as a 3-minute probe's thin designed regressor put a table's models' convolutions of 0.1–1 M MACs at 5
    times theirs, and larger ones at 0.85: a kernel of the larger rows' sizes is predicted at 0.85, where a line
    through every row, even by Theil–Sen, read 0.59–0.70 there and put RegNets' grouped convolutions 11–21% low."""
    def factor(x: np.ndarray) -> float:
        return 0.2 if x[0] < np.log1p(1e7) else 0.85
    regressors, x = in_context_of(factor, 29)
    small = x[:, 0] < np.log1p(1e7)
    assert 0.35 < small.mean() < 0.65
    assert np.exp(regressors.in_context(x[x[:, 0] >= np.log1p(5e7)])) == pytest.approx(0.85, rel=0.05)


def test_a_few_model_rows_the_designed_regressor_misses_do_not_move_what_running_in_a_model_takes_off() -> None:
    """Models run dense convolutions at 0.8 of their designed twins' time, but those of under 1 M MACs (one row in
    seven) at a fifteenth, as a thin designed regressor put 1×1 convolutions of few channels 13 to 20 times above
    their time. The factor stays at 0.8 over the other rows' sizes past the smallest rows' bin, where least squares
    followed the few down the whole range."""
    def factor(x: np.ndarray) -> float:
        return 1 / 15 if x[0] < np.log1p(1e6) else 0.8
    regressors, x = in_context_of(factor, 19)
    rest = x[x[:, 0] >= np.log1p(1e6)]
    assert np.median(np.exp(regressors.in_context(rest))) == pytest.approx(0.8, rel=0.01)
    past_first_bin = rest[work_units(rest) >= regressors.in_context.work[1]]
    assert len(past_first_bin) > 0.6 * len(rest)
    assert np.exp(regressors.in_context(past_first_bin)) == pytest.approx(0.8, rel=0.05)


def test_running_in_a_model_never_adds_to_a_designed_kernels_time() -> None:
    """Models of three families run small convolutions at 0.5 of their designed twins' time and their largest at 1.2,
    a line that rises above 1: a grouped convolution larger than any is predicted at its designed time, no more, as
    a kernel in a model reuses buffers still in the cache; the smallest keep their factor."""
    def factor(x: np.ndarray) -> float:
        return 0.5 + 0.7 * (float(x[0]) - 10.0) / 8.0
    regressors, _ = in_context_of(factor, 23)
    small, large = np.array([[*conv(16, 16, 8, 7), 0.0]]), np.array([[*conv(256, 256, 4, 56), 0.0]])
    assert regressors.in_context(large)[0] == 0.0 and np.exp(regressors.in_context(small)[0]) < 0.8
    times, carried = regressors.predict("GroupedConv", large, 10.0)
    in_probe = np.exp(regressors.designed["GroupedConv"].predict(kind_view("GroupedConv", large)) + work_units(large))
    assert carried == DESIGNED and times[0] == pytest.approx(in_probe[0])


def gemm(rows: int, cin: int, cout: int) -> list[float]:
    """A Gemm's feature vector of `rows` input rows, with the input footprint at 0."""
    macs, weights = rows * cin * cout, cin * cout * 4
    acts = rows * (cin + cout) * 4
    return [*vector({"macs": macs, "bytes": acts + weights, "in_bytes": rows * cin * 4, "out_bytes": rows * cout * 4,
                     "weight_bytes": weights, "intensity": macs / (acts + weights), "cin": cin, "cout": cout,
                     "inputs": 1}), 0.0]


def test_a_kernel_larger_than_any_model_ran_of_its_kind_is_its_designed_kernels_in_context() -> None:
    """Models of three families run one Gemm each, a classifier of one row, too few for a regressor of their own;
    designed Gemms reach 3,136 rows. A Gemm of a classifier's size stays with the pooled regressor; one larger than
    any model's (a channels-last pointwise layer) is predicted by the designed kernels' regressor at what running in a
    model takes off their time alone (0.8 here, from the convolutions both have), where the pooled regressor's trees
    would hold the classifiers' time per MAC. One that reads more weights a row of output than any designed Gemm
    (AlexNet's 150 MB, a row) stays pooled; one of more weights than any designed Gemm, reused for 49 rows (ConvNeXt's
    and Swin's last stage), is the designed kernels'."""
    rng = np.random.default_rng(7)
    def ms_of(x: list[float], scale: float) -> float:
        return scale * (float(np.expm1(x[0])) * 2e-7 + 0.002)
    def frame(kind: str, xs: list[list[float]], scale: float, alone: bool, families: list[str]) -> pd.DataFrame:
        return samples_frame(kind, xs, [ms_of(x, scale) for x in xs], alone, families)
    convs = [[*conv(int(c), int(c), 1, int(size)), 0.0] for c, size in
             zip(rng.choice([32, 64, 128, 256], 120), rng.choice([7, 14, 28, 56], 120), strict=True)]
    heads = [gemm(1, int(cin), 1000) for cin in rng.choice([256, 512, 1024, 1280], 12)]
    designed_gemms = [gemm(int(r), int(cin), int(cout)) for r, cin, cout in
                      zip(rng.choice([1, 49, 196, 784, 3136], 80), rng.choice([96, 192, 384, 768], 80),
                          rng.choice([96, 192, 384, 768], 80), strict=True)]
    families = [f"f{i % 3}" for i in range(120)]
    samples = pd.concat([frame("Conv", convs[:60], 0.8, False, families[:60]),
                         frame("Gemm", heads, 0.8, False, families[:12]),
                         frame("Conv", convs[60:], 1.0, True, ["designed"] * 60),
                         frame("Gemm", designed_gemms, 1.0, True, ["designed"] * 80)], ignore_index=True)
    regressors = KernelRegressors.fit(samples)
    assert "Gemm" not in regressors.per_kind and "Gemm" not in regressors.alone
    pointwise = np.array([gemm(3136, 96, 384), gemm(784, 192, 768)])
    assert regressors.in_context(pointwise) == pytest.approx(np.log(0.8), abs=0.05)
    times, carried = regressors.regressed("Gemm", pointwise, 10.0)
    assert carried == DESIGNED and times == pytest.approx([ms_of(list(x), 0.8) for x in pointwise], rel=0.15)
    pooled = regressors.regressed("Gemm", np.array(heads[:2]), 10.0)
    assert pooled[1] == POOLED and pooled[0] == pytest.approx([ms_of(x, 0.8) for x in heads[:2]], rel=0.15)
    assert regressors.regressed("Gemm", np.array([gemm(1, 9216, 4096)]), 10.0)[1] == POOLED  # weights past the designed
    last_stage = np.array([gemm(49, 768, 3072)])  # 9.4 MB of weights, four times the largest designed Gemm's
    assert regressors.regressed("Gemm", last_stage, 10.0)[1] == DESIGNED


def test_only_a_table_of_enough_families_reads_the_input_footprint() -> None:
    """A few models' first kernels among a probe's designed ones cannot teach the input footprint: with models of
    fewer than MODEL_FAMILIES families the regressors read none, and a graph's first kernel is predicted as any other
    kernel of its configuration; with more, the footprint carries what those kernels ran."""
    rng = np.random.default_rng(5)
    x = rng.uniform(1, 12, size=(90, len(FEATURES) + 1))
    x[:, -1] = 0.0
    x[:6, -1] = 15.0  # the first kernels of models
    ms = np.exp(rng.normal(-3, 0.2, 90))
    ms[:6] *= 50
    samples = samples_frame("Conv", list(x), list(ms), [False] * 6 + [True] * 84, ["a", "b"] * 3 + ["designed"] * 84)
    first = x[:6]
    elsewhere = first.copy()
    elsewhere[:, -1] = 0.0
    few = KernelRegressors.fit(samples)
    assert not few.input_footprint
    assert few.predict("Conv", first, 10.0)[0] == pytest.approx(few.predict("Conv", elsewhere, 10.0)[0])
    many = KernelRegressors.fit(samples.assign(alone=False, family=[f"f{i % 5}" for i in range(90)]))
    assert many.input_footprint
    assert np.all(many.predict("Conv", first, 10.0)[0] > 2 * many.predict("Conv", elsewhere, 10.0)[0])


def check_table_face(tmp_path: Path, train: pd.DataFrame, model: KernelModel, graph: str) -> None:
    """The same rows written as a kernel table, its between-ops rows kept as a probe keeps them, give the same
    prediction through predict_graph, which says the table carried it."""
    gap = train.iloc[:1].assign(op_type=BETWEEN_OPS, node=BETWEEN_OPS, onnx_node=None, median_ms=0.3)
    meta = {"name": "host-onnxruntime-1t-fp32", "device": "host", "engine": "onnxruntime", "threads": 1, "cpus": 1,
            "precision": "fp32", "created": "2026-11-27T00:00:00Z", "probing_s": 1.0, "sessions": [],
            "source": "test", "cpu": None}
    table = write_table(tmp_path / "kernels" / "host-onnxruntime-1t-fp32", meta, pd.concat([train, gap]), {})
    found = predict_graph(table, graph)
    assert found.ms == pytest.approx(model.predict(graph)[0], rel=1e-9)
    assert found.carried_by == "kernel table host-onnxruntime-1t-fp32"
