"""A model's latency on a device from its kernels: one regressor per kernel kind, a per-model term for what the sum
misses, and an interval from held-out errors.

- Kernels: harness.kernels.detect splits the graph as the engine runs it; each per-op row of the training models is
  joined to its kernel (harness.kernels.training.join_kernels). Each kernel carries detection's layout (blocked or
  plain) as a feature: a depthwise convolution left in the plain layout (channels not a multiple of 4: GhostNet 0.5,
  ShuffleNetV2 1.0) ran 3.5 times slower a MAC than a blocked one of its size, and without the feature those rows
  raised the predicted time of other families' small blocked depthwise kernels 1.8–2.1 times.
- Per kind: harness.kernels.regressors (a regressor per kernel kind of its time per unit of work; designed
  kernels where a table's models are too few or run no kernel of a compute kind; a pooled regressor for the rest).
- The profiler's own cost: every profiled row carries a fixed cost the unprofiled run does not (per-op sums run
  0.9–1.5 of the end-to-end time on small ops). It is the `profiler_ms` that makes the training models' measured
  per-op sums, less `profiler_ms` a row, most nearly proportional to their end-to-end latency (measured without
  the profiler); every row's time is taken down by it before the regressors see it (to no less than
  PROFILER_FLOOR of itself), so they predict kernels as the unprofiled run spends them.
- Per model: latency = a·Σ + b (neither negative), fitted by relative least squares on the training models'
  end-to-end latency against their measured per-op sums less the profiler's cost: what the sum misses (the
  executor's work between kernels, the call itself), calibrated on the device's model-level measurements.
- The footprint's factor: latency = (a·Σ + b)·exp(γ·(footprint − μ)), γ the least-squares slope of the training
  models' held-out log residuals on their graphs' footprint (μ their mean footprint), with FOOTPRINT_MODELS of them
  or more; a graph's footprint beyond theirs is read at the nearest of them, not extrapolated. The same kernel runs
  faster in a model whose weights leave more of the cache to it (a 3×3 first convolution of 10.8 M MACs took
  0.10 ms in ShuffleNetV2 0.5× and 0.25 ms in MobileNetV2 1.0, CPUS=1), so regressors trained on other families put
  a small model's kernels above their time and a large model's below (held-out error against log latency:
  correlation −0.47 to −0.63 on four of five sessions, docs/kernels.md).
- Held-out sums (held_out_sums): each training model's kernel sum predicted by regressors fitted without its
  family, one family out at a time, so that it errs as a new model's sum errs against regressors of every family.
  With a third of a default probe's twelve families out at a time, regressors of the other eight put the smallest
  and the largest models further from their time (log residuals: KWS −0.118 against −0.042 with one family out,
  ResNet-18 +0.082 against +0.056), the footprint's line steeper (γ 0.037 against 0.020), and its factor at 1.08
  for every model larger than the table's: own models of that size (ResNet-50, DenseNet-121), whose kernel sums
  were within 1% of their time, came out +5 to +8% (docs/kernels.md).
- Engines whose fusion rules are not learned (ncnn, LiteRT: engine_evidence): their per-op rows name their own layers,
  no graph node. Every graph node is a kernel of its own, but the activations ncnn's weighted layers ran inside them
  (read from the .param), and a model's weighted layers join its convolutions and Gemms by order and output channels
  (harness.kernels.ncnn_layers); its other layers join nothing, so its rows give no whole per-op sum. Designed
  kernels train whole (harness.kernels.training.whole_kernel), and the models measured end to end calibrate the term
  on their graphs' kernel sums, each predicted without its family (KernelModel.by_latency; harness.kernels.term).
  Without the join, on this host's ncnn, the designed kernels summed to 1.9–4.6 times the latency of a probe's twelve
  zoo models: small convolutions ran slower in a probe graph than in a model (docs/kernels.md).
- Interval: split-conformal ranks of the training models' held-out log residuals (their family out of the kernel
  regressors, the footprint's line fitted without them: held_out_line_residuals; interval_factors), applied as
  factors, widened to hold the prediction itself: never negative.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from harness.core.errors import ConfigError, DataError
from harness.kernels.designed import OVERHEAD, PACK_KINDS
from harness.kernels.detect import detect
from harness.kernels.features import reads_graph_input, vector
from harness.kernels.graph import Graph, Kernel
from harness.kernels.ncnn_layers import Joined, in_run, joined_kernels, layer_evidence
from harness.kernels.regressors import POOLED, KernelRegressors
from harness.kernels.rules import Rules, learned_engines, load_rules
from harness.kernels.table import GRAPHS_DIR, KernelTable
from harness.kernels.term import latency_term, left_out_residuals, model_term
from harness.kernels.training import GAP_ROWS, TIME_COLUMN, join_kernels, whole_kernel
from harness.models.facts import QUANTIZED_OPS

PROFILER_FLOOR = 0.2
"""A row's time less the profiler's cost is kept at no less than this share of itself: a row the cost would take
below zero did some work."""
PROFILER_GRID_STEPS = 200
"""Candidates for the profiler's cost a row, evenly from 0 up to the least mean row time of any model (a cost at or
above it would leave that model nothing): scaled to the device, since an emulated or slow board's profiler costs many
times this host's 0.003–0.005 ms a row."""
COST_MODELS = 4
"""Models a table needs for the profiler's cost to be fitted on their sums."""
ALIAS_KINDS: dict[str, frozenset[str]] = {"onnxruntime": frozenset({"Reshape"})}
"""Per engine, the kinds its CPU kernels run as an alias of their input (onnxruntime registers Reshape, Flatten,
Squeeze and Unsqueeze with Alias(0, 0)): they move no bytes and take the same time at any size, so they are
predicted by the median time of the table's rows of them, not by a regressor of time per unit of work."""
FOOTPRINT_MODELS = 8
"""Training models with a held-out sum that the footprint's slope needs; with fewer, the slope is 0."""
UNMEASURED_FACTORS = (0.5, 2.0)
"""The interval's factors where fewer than 3 of the table's models have a held-out residual: a bound, not a
measurement."""
COVERAGE = 0.95
GraphFor = Callable[[str], Path]


def footprint(graph: Graph) -> float:
    """log(1 + the graph's weight bytes): whether a kernel's weights are still in the cache from the last inference,
    which a kernel's own features cannot say. A classifier's Gemm of a 2 MB matrix ran at 30 µs a MB in models whose
    weights fit this host's 32 MB last-level cache many times over, 55–63 µs a MB in the largest."""
    return math.log1p(sum(int(node["param_bytes"] or 0) for node in graph.nodes))


def kernel_vector(graph: Graph, kernel: Kernel, graph_footprint: float) -> list[float]:
    """The kernel's features (harness.kernels.features.vector) and its input footprint: the graph's footprint where
    the kernel reads the graph's input, else 0 (designed kernels, each timed in a probe graph, get 0). The first
    convolution of ten models, one configuration, took 0.10 ms in ShuffleNetV2 0.5× and 0.25 ms in MobileNetV2 1.0
    (CPUS=1): its input and output buffers were last touched an inference ago, so how much the model touches in
    between decides whether they are still in the cache. A flag alone (1 for such a kernel) did not tell them apart
    (docs/kernels.md)."""
    return [*vector(kernel.features), graph_footprint if reads_graph_input(graph, kernel) else 0.0]


@dataclass
class LoadedGraph:
    """A graph's kernels grouped by kind as feature matrices: what a prediction needs, computed once per graph; and the
    quantized op types it holds (QUANTIZED_OPS), which no kernel table predicts."""

    kernels: int
    by_kind: dict[str, np.ndarray]
    footprint: float
    quantized: tuple[str, ...] = ()

    @classmethod
    def of(cls, graph: Graph, rules: Rules) -> LoadedGraph:
        kernels, weights = detect(graph, rules), footprint(graph)
        grouped: dict[str, list[list[float]]] = {}
        for kernel in kernels:
            grouped.setdefault(kernel.kind, []).append(kernel_vector(graph, kernel, weights))
        quantized = tuple(sorted({node["op_type"] for node in graph.nodes if node["op_type"] in QUANTIZED_OPS}))
        return cls(len(kernels), {kind: np.array(rows) for kind, rows in grouped.items()}, weights, quantized)


def samples_of(rows: pd.DataFrame, graph_for: GraphFor, rules: Rules,
               joins: Mapping[str, dict[str, Joined]] | None = None) -> pd.DataFrame:
    """One training sample per engine row (kind, feature vector, ms, model, family, alone: a designed kernel timed
    on its own, and the footprint of the graph it ran in), each row joined to its kernel; a probe graph's own nodes
    (PACK_KINDS) are no kernel and give none. For an engine whose rules were not learned (engine_evidence: its rows
    name its own layers, no graph node), one sample per designed kernel, timed whole (whole_kernel), and of a model's
    rows those of the layers `joins` joins to a node (by its `graph` cell; harness.kernels.ncnn_layers), each at its
    time in the graph's whole run (in_run)."""
    out: list[dict[str, Any]] = []
    learned = rules.engine in learned_engines()
    rows = rows if learned else in_run(rows)
    rows = rows[~rows["op_type"].isin(GAP_ROWS)]  # a table keeps the between-ops and outside-the-run rows
    if "kernel_kind" in rows:
        rows = rows[~rows["kernel_kind"].isin(PACK_KINDS)]  # a pack's own nodes (harness.kernels.designed)
    for (model, graph_name), group in rows.groupby(["model", "graph"], sort=False):
        alone = bool(group["source"].eq("designed").any())
        join = (joins or {}).get(str(graph_name), {})
        if not alone and not learned and not join:
            continue  # a model's rows, named by the engine's layers (ncnn's), and no join of them to its nodes
        graph = Graph.load(graph_for(str(graph_name)))
        family = str(group["family"].iloc[0])
        ran = Graph.load(graph_for(f"{GRAPHS_DIR}/{model}")) if alone else graph  # a designed kernel ran in its pack
        weights = footprint(ran)
        pairs = (join_kernels(graph, group, rules) if learned else whole_kernel(graph, group, rules) if alone
                 else joined_kernels(graph, group, rules, join))
        for kernel, ms in pairs:
            if ms > 0:
                x = kernel_vector(graph, kernel, 0.0 if alone else weights)
                out.append({"kind": kernel.kind, "x": np.array(x), "ms": ms, "model": model,
                            "family": family, "alone": alone, "footprint": weights})
    return pd.DataFrame(out)


def profiler_cost(sums: np.ndarray, counts: np.ndarray, measured: np.ndarray, overhead_ms: pd.Series) -> float:
    """The profiler's cost a row (ms): of PROFILER_GRID_STEPS candidates, the one that leaves the models' per-op sums,
    less it a row, with the least spread of log(sum / latency); with under COST_MODELS models, the median time of the
    designed packs' overhead nodes (`overhead_ms`: nodes that do no work), else 0."""
    if len(measured) < COST_MODELS:
        overhead_ms = overhead_ms.dropna()
        return float(overhead_ms.median()) if len(overhead_ms) else 0.0
    best, cost = math.inf, 0.0
    for candidate in np.linspace(0.0, float(np.min(sums / counts)), PROFILER_GRID_STEPS, endpoint=False):
        spread = float(np.std(np.log((sums - candidate * counts) / measured)))
        if spread < best:
            best, cost = spread, float(candidate)
    return cost


def without_profiler(samples: pd.DataFrame, cost_ms: float) -> pd.DataFrame:
    """The samples with the profiler's cost taken off each row's time (to no less than PROFILER_FLOOR of it)."""
    ms = samples["ms"].to_numpy(dtype=float)
    return samples.assign(ms=np.maximum(ms - cost_ms, PROFILER_FLOOR * ms))


NO_FOOTPRINT_LINE = (0.0, 0.0, -math.inf, math.inf)


def end_to_end(rows: pd.DataFrame) -> pd.DataFrame:
    """The table's models with an end-to-end latency (graph, latency, family), one row each, by name."""
    zoo = rows[rows["source"].eq("zoo") & rows["model_latency_ms"].gt(0)]
    return zoo.groupby("model").agg(graph=("graph", "first"), latency=("model_latency_ms", "first"),
                                    family=("family", "first"))


def without_family(samples: pd.DataFrame, family: str, regressors: KernelRegressors) -> KernelRegressors:
    """Regressors like `regressors` (their alias kinds, their designed kernels' fits) on `samples` less `family`'s:
    what predicts a model of that family as a new family's."""
    return KernelRegressors.fit(samples[samples["family"].ne(family)], frozenset(regressors.aliases),
                                regressors.designed, regressors.reads_twins)


def held_out_sums(zoo: pd.DataFrame, samples: pd.DataFrame, regressors: KernelRegressors) -> pd.Series:
    """Per model of `zoo` (samples of the table's models), its kernel sum predicted by regressors fitted on `samples`
    without its family, one family out at a time: a new model's error against the regressors of every family
    (module docstring). A family that is every sample's has none."""
    sums: dict[str, float] = {}
    for family, held in zoo.groupby("family"):
        if samples["family"].eq(family).all():
            continue
        inner = without_family(samples, str(family), regressors)
        for model, group in held.groupby("model"):
            sums[str(model)] = sum((float(inner.predict(str(kind), np.vstack(list(g["x"])),
                                                        float(g["footprint"].iloc[0]))[0].sum())
                                    for kind, g in group.groupby("kind")), 0.0)
    return pd.Series(sums, dtype=float)


def footprint_line(residuals: np.ndarray, footprints: np.ndarray) -> tuple[float, float, float, float]:
    """(γ, μ, least, most): the least-squares slope of the models' held-out log residuals on their footprints, the
    footprints' mean and range; NO_FOOTPRINT_LINE (no factor) with under FOOTPRINT_MODELS models or footprints that do
    not vary."""
    if len(residuals) < FOOTPRINT_MODELS:
        return NO_FOOTPRINT_LINE
    centred = footprints - footprints.mean()
    spread = float(centred @ centred)
    if spread <= 0:
        return NO_FOOTPRINT_LINE
    return (float(centred @ (residuals - residuals.mean()) / spread), float(footprints.mean()),
            float(footprints.min()), float(footprints.max()))


def held_out_line_residuals(residuals: np.ndarray, footprints: np.ndarray) -> np.ndarray:
    """Each model's residual less the footprint's factor of a line fitted without it (footprint_line, its footprint
    held inside the others' range as a prediction holds it): the interval's residuals, as a new model's would be. Less
    an in-sample line's factor, a model at the ends of the footprints, which pulls the line to itself, looked nearer
    its prediction than a new model there would be."""
    out = np.empty_like(residuals)
    for i in range(len(residuals)):
        others = np.arange(len(residuals)) != i
        slope, centre, least, most = footprint_line(residuals[others], footprints[others])
        out[i] = residuals[i] - slope * (min(max(footprints[i], least), most) - centre)
    return out


def interval_factors(residuals: np.ndarray) -> tuple[float, float]:
    """The interval's factors from n held-out log residuals, each side the wider of two intervals:
    - split-conformal ranks, the ⌊(n+1)·0.025⌋-th smallest and the ⌈(n+1)·0.975⌉-th, so that a new model's residual
      falls between them at least 95% of the time where the residuals are exchangeable, whatever their tails. Below
      39 residuals those ranks are past the extremes, and the extremes are taken: they cover only (n−1)/(n+1), 50% of
      3, 85% of 12 (the models a default probe measures end to end);
    - the t prediction interval of a new draw, mean ± t(0.975, n−1)·s·√(1 + 1/n): 95% at any n where the residuals
      are normal. Together they covered 93–95% of heavy-tailed t(4) draws at 3 to 79 residuals, where the extremes alone
      covered 52–92% (tests/test_kernels_predict.py).
    Widened to hold the prediction, where a few residuals all fell to one side of it; UNMEASURED_FACTORS with under 3
    residuals."""
    if len(residuals) < 3:
        return UNMEASURED_FACTORS
    ranked = np.sort(residuals)
    n = len(ranked)
    centre = float(np.mean(ranked))
    half = float(stats.t.ppf((1 + COVERAGE) / 2, n - 1) * np.std(ranked, ddof=1) * math.sqrt(1 + 1 / n))
    low = min(ranked[max(math.floor((n + 1) * (1 - COVERAGE) / 2), 1) - 1], centre - half)
    high = max(ranked[min(math.ceil((n + 1) * (1 + COVERAGE) / 2), n) - 1], centre + half)
    return math.exp(min(float(low), 0.0)), math.exp(max(float(high), 0.0))


@dataclass
class KernelModel:
    """Kernel regressors, the per-model term and the interval's factors of one engine on one device."""

    rules: Rules
    regressors: KernelRegressors
    term: np.ndarray
    factors: tuple[float, float]
    models: int
    profiler_ms: float = 0.0
    footprint_line: tuple[float, float, float, float] = NO_FOOTPRINT_LINE
    """(γ, μ, least, most) of the footprint's factor exp(γ·(footprint − μ)), the footprint held inside [least, most]
    (footprint_line); no factor where no held-out sums fitted it."""
    power: float = 1.0
    """The kernel sum's power in the term, a·Σ^power + b: 1 but where by_latency fitted a line in logs."""
    loaded: dict[str, LoadedGraph] = field(default_factory=dict, repr=False)

    @classmethod
    def fit(cls, rows: pd.DataFrame, graph_for: GraphFor, rules: Rules, samples: pd.DataFrame | None = None,
            interval: bool = True) -> KernelModel:
        """Fit on a kernel table's rows (harness.kernels.table columns); `graph_for` turns a row's `graph` cell into
        its ONNX file; `rules` are the engine's fusion rules (harness.kernels.rules.load_rules). Every joined row
        trains the regressors; zoo models with an end-to-end latency also give the profiler's cost and the per-model
        term (from their measured per-op sums), and the interval (from kernel sums predicted with their family held
        out). `samples`: samples_of(rows, ...) when the caller already has them. `interval=False` skips the held-out
        fits the interval and the footprint's factor need (its factors are then NaN, and it has no footprint factor):
        for a caller that reads the predicted ms alone. An engine whose rules are not learned (engine_evidence) gives
        no whole per-op sum of a model: its term comes from the models' latency (by_latency)."""
        samples = samples_of(rows, graph_for, rules) if samples is None else samples
        if samples.empty:
            raise DataError("no kernel rows to fit on; probe the device first (harness probe)")
        timed, learned = end_to_end(rows), rules.engine in learned_engines()
        # the models whose rows are a whole per-op sum: none where the rules are not learned (ncnn's layers)
        zoo = samples[samples["model"].isin(timed.index)] if learned else samples.iloc[:0]
        models = timed[timed.index.isin(zoo["model"])]
        measured = models["latency"].to_numpy(dtype=float)
        op_sums = zoo.groupby("model")["ms"].sum().reindex(models.index).to_numpy(dtype=float)
        counts = zoo.groupby("model").size().reindex(models.index).to_numpy(dtype=float)
        overhead = (rows.loc[rows["kernel_kind"].eq(OVERHEAD), TIME_COLUMN] if "kernel_kind" in rows
                    else pd.Series(dtype=float))
        cost = profiler_cost(op_sums, counts, measured, overhead)
        samples, zoo = without_profiler(samples, cost), without_profiler(zoo, cost)
        # twins where the engine's rows name no graph node (ncnn's layers, an imported tool's lines): on
        # onnxruntime, whose rows join node by node, twins put held-out families at 44% within ±10%, against 60%
        # without (docs/kernels.md)
        regressors = KernelRegressors.fit(samples, ALIAS_KINDS.get(rules.engine, frozenset()), twins=not learned)
        if models.empty:
            unmeasured = cls(rules, regressors, np.array([1.0, 0.0]), UNMEASURED_FACTORS, 0, cost)
            return unmeasured.by_latency(timed, graph_for, interval, samples)
        term = model_term(op_sums - cost * counts, measured)
        if not interval:
            return cls(rules, regressors, term, (math.nan, math.nan), len(models), cost)
        sums = held_out_sums(zoo, samples, regressors).reindex(models.index, fill_value=0.0)
        known = sums.to_numpy() > 0
        residuals = np.log(measured[known] / np.maximum(term[0] * sums.to_numpy()[known] + term[1], 1e-6))
        footprints = zoo.groupby("model")["footprint"].first().reindex(models.index).to_numpy(dtype=float)[known]
        line = footprint_line(residuals, footprints)
        factors = interval_factors(held_out_line_residuals(residuals, footprints))
        return cls(rules, regressors, term, factors, len(models), cost, line)

    def by_latency(self, models: pd.DataFrame, graph_for: GraphFor, interval: bool,
                   samples: pd.DataFrame) -> KernelModel:
        """This model with its per-model term fitted on the end-to-end latency of `models` (end_to_end) against their
        graphs' predicted kernel sums, where their rows give no whole per-op sum (ncnn's: only its weighted layers
        join a node). Each sum is predicted by regressors fitted without its model's family (`samples` less theirs),
        as a new family's sum is. Twins are read where those models, each against the term fitted on the others,
        err less (median absolute log residual) with them than without: on two ncnn hosts twins moved eleven held-out
        families from 45% to 82% within ±10% and from 55% to 55% on one, from 27% to 18% and 73% to 36% on the other
        (docs/kernels.md). The interval from each model's residual against the term fitted on the others
        (left_out_residuals)."""
        if models.empty:
            return self
        trained = set(samples.loc[~samples["alone"], "family"])
        fits = {family: without_family(samples, family, self.regressors) for family in set(models["family"]) & trained}
        latency = models["latency"].to_numpy(dtype=float)
        choices = []
        for twins in ((True, False) if self.regressors.twins.log_ms and len(models) > 1 else (True,)):
            base = self if twins else replace(self, regressors=self.regressors.without_twins(), loaded={})
            outs = {family: replace(base, regressors=fit if twins else fit.without_twins(), loaded={})
                    for family, fit in fits.items()}
            sums = np.array([outs.get(family, base).predict(graph_for(str(graph)))[0]
                             for graph, family in zip(models["graph"], models["family"], strict=True)])
            form = latency_term(sums, latency)
            residuals = left_out_residuals(sums, latency, form)
            spread = float(np.median(np.abs(residuals))) if len(residuals) else 0.0
            choices.append((spread, base, sums, form, residuals))
        _, chosen, sums, form, residuals = min(choices, key=lambda choice: choice[0])
        factors = interval_factors(residuals) if interval else (math.nan, math.nan)
        scale, power, call = form(sums, latency)
        return replace(chosen, term=np.array([scale, call]), power=power, factors=factors, models=len(models))

    def load(self, model_path: str | Path) -> LoadedGraph:
        """The graph's kernels as feature matrices, read once per path."""
        key = str(Path(model_path).resolve())
        if key not in self.loaded:
            if not Path(key).is_file():
                raise ConfigError(f"model {model_path} does not exist; give the path of an .onnx file")
            self.loaded[key] = LoadedGraph.of(Graph.load(key), self.rules)
        return self.loaded[key]

    def predict(self, model_path: str | Path) -> tuple[float, float, float, dict[str, Any]]:
        """(ms, low, high, detail): the model's latency, its 95% interval, and per kind its kernels, their predicted
        ms and the regressor that carried them. A quantized graph is refused: its convolutions read as float ones, and
        a table probed at float32 puts them at float time (MobileNetV2 0.5/160 quantized static ran in 0.64 of its
        float time on this host, and was predicted at the float model's: +48%; docs/kernels.md)."""
        graph = self.load(model_path)
        if graph.quantized:
            raise DataError(f"model {Path(model_path).name}: a quantized graph ({', '.join(graph.quantized)}); kernel "
                            "tables hold float32 kernels and would predict its kernels at float time: predict its "
                            "float model, or profile this one (make profile MODEL=...)")
        total, by_kind = 0.0, {}
        for kind, x in graph.by_kind.items():
            times, carried = self.regressors.predict(kind, x, graph.footprint)
            total += float(times.sum())
            by_kind[kind] = {"kernels": len(x), "ms": float(times.sum()), "regressor": carried}
        slope, centre, least, most = self.footprint_line
        factor = math.exp(slope * (min(max(graph.footprint, least), most) - centre))
        ms = max(float(self.term[0] * total ** self.power + self.term[1]), 1e-6) * factor
        detail = {"carried_by": "kernel table", "kernels": graph.kernels, "kernel_sum_ms": total,
                  "term": {"a": float(self.term[0]), "b_ms": float(self.term[1]), "power": self.power,
                           "profiler_ms_per_row": self.profiler_ms, "footprint_factor": factor},
                  "pooled_kinds": sorted(k for k, v in by_kind.items() if v["regressor"] == POOLED),
                  "by_kind": by_kind, "calibration_models": self.models}
        return ms, ms * self.factors[0], ms * self.factors[1], detail


def predictions_per_second(model: KernelModel, model_path: str | Path, seconds: float = 1.0) -> float:
    """How many predictions of one already-loaded graph the model makes in a second (the search-loop figure)."""
    model.load(model_path)
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        model.predict(model_path)
        count += 1
    return count / (time.perf_counter() - start)


@dataclass(frozen=True)
class KernelPrediction:
    """A graph's latency as a device's kernel table predicts it: ms, its 95% interval, the table that carried it, and
    per kind the kernels, their ms and the regressor that carried them (`detail`)."""

    ms: float
    low: float
    high: float
    table: str
    detail: dict[str, Any]

    @property
    def carried_by(self) -> str:
        return f"kernel table {self.table}"


def graph_resolver(table: KernelTable) -> GraphFor:
    """A row's `graph` cell as a file: a graph inside the table's folder, a path as it is, else a zoo model (exported
    on first use) named by the cell, or by its file's stem (a table written before its zoo graphs travelled in it)."""
    def resolve(graph: str) -> Path:
        inside = table.graph_path(graph)
        if inside.is_file():
            return inside
        if Path(graph).is_file():
            return Path(graph)
        from harness.zoo import export

        return Path(export(Path(graph).stem if graph.startswith(f"{GRAPHS_DIR}/") else graph))
    return resolve


_FITTED: dict[tuple[str, float, str], KernelModel] = {}
_SAMPLES: dict[tuple[str, float], tuple[pd.DataFrame, pd.DataFrame, Rules]] = {}


def _version(table: KernelTable) -> tuple[str, float]:
    """The table's folder and its rows' modification time: what its caches are keyed by."""
    return str(table.path.resolve()), table.rows_path.stat().st_mtime


def engine_evidence(engine: str, rows: pd.DataFrame, graph_for: GraphFor
                    ) -> tuple[Rules, dict[str, dict[str, Joined]]]:
    """The engine's learned fusion rules (harness.kernels.rules) and no layer joins; for an engine none were learned
    for (ncnn, LiteRT: their rows name their own layers, no graph node), the rules and joins its layers show
    (harness.kernels.ncnn_layers.layer_evidence): every node a kernel of its own, but the activations its models'
    weighted layers ran inside them and the chains its designed kernels ran as one layer. Such an engine's designed
    kernels train whole (whole_kernel), and a model's weighted layers where the join holds."""
    if engine in learned_engines():
        return load_rules(engine), {}
    return layer_evidence(engine, rows, graph_for)


def _table_samples(table: KernelTable) -> tuple[pd.DataFrame, pd.DataFrame, Rules]:
    """(rows, samples, rules) of the table, joined once per version of its rows."""
    key = _version(table)
    if key not in _SAMPLES:
        rows, graph_for = table.rows(), graph_resolver(table)
        rules, joins = engine_evidence(str(table.meta.get("engine", "onnxruntime")), rows, graph_for)
        _SAMPLES[key] = (rows, samples_of(rows, graph_for, rules, joins), rules)
    return _SAMPLES[key]


def fitted_model(table: KernelTable, without: str = "") -> KernelModel:
    """The table's KernelModel, fitted once per version of its rows. `without`: a family whose rows are left out of
    it (no interval), where the table's models hold it: what predicts that family's models honestly, for a
    calibration that scores them (harness.kernels.evidence)."""
    rows, samples, rules = _table_samples(table)
    if without and not rows.loc[rows["source"].eq("zoo"), "family"].eq(without).any():
        without = ""  # a family the table never saw: the whole table is already blind to it
    key = (*_version(table), without)
    if key not in _FITTED:
        if without:
            rows, samples = rows[rows["family"] != without], samples[samples["family"] != without]
        _FITTED[key] = KernelModel.fit(rows, graph_resolver(table), rules, samples=samples, interval=not without)
    return _FITTED[key]


def predict_graph(table: KernelTable, model_path: str | Path) -> KernelPrediction:
    """The latency of the ONNX graph at `model_path` on the table's device and engine, from the graph alone."""
    ms, low, high, detail = fitted_model(table).predict(model_path)
    return KernelPrediction(ms, low, high, table.name, detail)
