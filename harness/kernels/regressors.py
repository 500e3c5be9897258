"""Per-kind regressors of a kernel's time, the rows that train them, and which one carries each kind of a graph.

- Per kind: a gradient-boosted regressor (scikit-learn's GradientBoostingRegressor, evaluated as packed arrays:
  harness.kernels.trees; each row weighted by √ms: fitted_trees) of the kernel's log time per unit of work,
  log ms − log(1 + MACs + bytes moved), on its log features (harness.kernels.features), and its input footprint:
  the graph's footprint for the kernel that reads the graph's input (harness.kernels.predictor.kernel_vector),
  whose buffers were last touched an inference ago.
  Trees predict a constant beyond the sizes they were trained on: as a time per unit of work, that constant scales
  with a kernel smaller or larger than any seen, where a time would not.
- Evidence: the rows of models (zoo models profiled per-op: each kernel in context, its input just written by the
  kernel before it). A designed kernel runs in a probe graph beside kernels of no model of its own, and ran slower
  there than in a model, the more so the smaller it is: with a probe's 1,517 designed kernels beside the models' rows
  (timed before probe graphs ran them as in a model), held-out families fell from 88% to 72–80% within ±10%
  (docs/kernels.md). So designed kernels train the regressors only in a table with models of fewer than
  MODEL_FAMILIES families (a phone's exported and imported probe holds none). In a table with more, they carry only
  the kinds no model of the table runs, at their time in a probe graph plus what running in a model took off the
  compute kinds both have (designed_regressors).
- A kind with fewer than MIN_KIND_ROWS rows, or never seen (and not carried by designed kernels), is predicted by
  one pooled regressor over every row, with the kind one-hot; the prediction's detail names the kinds the pooled
  regressor carried. A grouped convolution with no regressor of its own, nor designed kernels of its kind, is
  predicted instead as its groups' dense convolutions (per_group), as an engine runs it: the pooled regressor, which
  no family of the training rows had shown one, put RegNet's at a quarter of their time. A kernel of such a kind
  larger than any model row of it is predicted from designed kernels of its kind in context, where there are some
  (KernelRegressors.beyond_models).
- Twins: a kernel of a graph at the very configuration of a designed kernel the table timed (`harness probe --for`
  probes a user's graphs' own; Twins) is predicted at that kernel's time, whatever regressor would carry it, where
  the fit asks for twins (not on onnxruntime).
- A kind the engine runs as an alias of its input (harness.kernels.predictor.ALIAS_KINDS: onnxruntime's Reshape,
  Flatten, Squeeze, Unsqueeze) moves nothing: the median time of the table's rows of it, at any size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
from sklearn.ensemble import GradientBoostingRegressor
from sklearn.isotonic import IsotonicRegression

from harness.kernels.features import FEATURES
from harness.kernels.graph import INNER_TRANSPOSE
from harness.kernels.trees import PackedTrees

MODEL_FAMILIES = 3
"""Models of this many families in a table, and their rows alone train the regressors (designed kernels do not)."""
MIN_KIND_ROWS = 30
"""Rows a kind needs for a regressor of its own; below, the pooled regressor predicts it."""
MIN_DESIGNED_ROWS = 20
"""Designed rows a kind needs for a regressor of designed kernels (designed_regressors). A 3-minute probe times 13–15
layer norms and GELUs, which the pooled regressor then carries; at 10 rows MaxViT-T came out nearer its time from
four tables and ConvNeXt-Tiny further from it from all four (docs/kernels.md). A probe of the default 20 minutes
timed 154 layer norms and 153 GELUs."""

TWINS = "designed twins"
TWIN_IGNORED = ("bytes", "weight_bytes", "intensity", "fused")
"""Features a twin need not share: a bias's bytes (a designed convolution has one; ResNet-18's convolutions, their
batch norm left to the engine, have none) and an activation the engine runs inside the kernel (`activation_pass`,
which it shares, says when the engine runs it as a pass of its own)."""
MIN_TWIN_ROWS = 10
"""Model rows with a twin that measure what running in a model takes off a twin's time (Twins.log_factor); below,
the in-context curve does (InContext)."""
ALIAS = "alias"
DESIGNED = "designed kernels"
PER_GROUP = "GroupedConv"
"""The kind predicted, where it has no regressor of its own, as its groups' dense convolutions (per_group)."""

POOLED = "pooled"
WEIGHT_ELEMENT_BYTES = 4
"""float32 weights, the precision kernels are probed at: a kernel's weight elements are its weight bytes over this."""


def weights_a_row(x: np.ndarray) -> np.ndarray:
    """log(1 + the weight bytes a row of output reads) of each feature row: its weights over the rows that reuse them
    (MACs over weight elements; 1 for a classifier). Whose largest designed value bounds the kernels designed kernels
    predict beyond the models' sizes (beyond_models): weights read for few rows, past every designed kernel's, may be
    past the cache too. AlexNet's 150 MB of fully connected weights, a row each, against the largest designed Gemm's
    5.2 MB, ran bound by memory as no designed Gemm did (carried by them, AlexNet held out went from −7.6% to
    −11.0%); ConvNeXt-Tiny's and Swin-T's last stages reuse 9.4 MB of weights for 49 rows, bound by compute as the
    designed Gemms are (docs/kernels.md)."""
    raw = np.expm1(x)
    weights = raw[:, FEATURES.index("weight_bytes")]
    rows = np.maximum(raw[:, FEATURES.index("macs")] / np.maximum(weights / WEIGHT_ELEMENT_BYTES, 1.0), 1.0)
    return np.log1p(weights / rows)


def fitted_trees(x: np.ndarray, y: np.ndarray, ms: np.ndarray | None = None) -> PackedTrees:
    """A gradient-boosted regressor of `y` (log time per unit of work) on `x`, packed; with `ms`, each row weighted by
    the square root of its time. A model's error is its kernels' errors weighted by their time, and unweighted trees
    spent their splits on the many microsecond rows: in cross-validation on a default probe's table (five folds of
    families), the error of the models' rows weighted by time fell 0.060 → 0.051 (dense convolutions 0.041 → 0.032;
    weighted by the time itself, 0.052). The designed kernels' own regressors (designed_regressors, no `ms`) stay
    unweighted: weighted, the designed Gemms that carry the transformers' last stages put ConvNeXt-Tiny and Swin-T
    6–10 points lower from 3-minute probes' tables, whose designed Gemms are a few dozen (docs/kernels.md)."""
    model = GradientBoostingRegressor(n_estimators=120, max_depth=3, learning_rate=0.1, min_samples_leaf=3,
                                      subsample=0.9, random_state=0)
    return PackedTrees.of(model.fit(x, y, sample_weight=None if ms is None else np.sqrt(ms)))


def work_units(x: np.ndarray) -> np.ndarray:
    """log(1 + MACs + bytes moved) of each row of feature vectors (harness.kernels.features.vector: log1p values,
    MACs and bytes first): the kernel's work, which the regressors' target divides out."""
    return np.log1p(np.expm1(x[:, 0]) + np.expm1(x[:, 1]))


def _divided_by_groups(x: np.ndarray, names: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Feature rows with the features `names` divided by each row's group count, and the group counts."""
    raw = np.expm1(x)
    groups = np.maximum(raw[:, FEATURES.index("groups")], 1.0)
    out = x.copy()
    for name in names:
        out[:, FEATURES.index(name)] = np.log1p(raw[:, FEATURES.index(name)] / groups)
    return out, groups


def per_group(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Grouped convolutions' feature rows as one group's dense convolution (MACs, bytes, channels divided by the
    groups, one group), and each row's group count: an engine runs a grouped convolution as that many dense ones."""
    one, groups = _divided_by_groups(x, ("macs", "bytes", "in_bytes", "out_bytes", "weight_bytes", "cin", "cout"))
    one[:, FEATURES.index("groups")] = np.log1p(1.0)
    return one, groups


TRANSPOSE_KINDS = frozenset({"Transpose", INNER_TRANSPOSE})
PERMUTATION = [FEATURES.index("axes"), FEATURES.index("run")]
"""The features only a Transpose has (harness.kernels.features), which only the transposes' own regressors read (of
models' rows or designed kernels). Always 0 for the other kinds, they are never split on, but their columns change
the trees' random draws: read by every regressor, they moved three of the zoo's held-out models that run no
Transpose by 1.8–3.3 points across ±10%; by every regressor but the pooled one, still two (docs/kernels.md). The
pooled regressor sees the transposes of a table's models only, ShuffleNet's in the zoo: none moves the innermost
axis, none copies runs shorter than 49 elements."""


def kind_view(kind: str, x: np.ndarray) -> np.ndarray:
    """The feature rows a kind's own regressor reads (per kind, designed or in context; POOLED: the pooled one's): a
    Transpose's permutation (PERMUTATION) for the transposes alone, and a grouped convolution's channels a group (its
    width) in place of its channels, its MACs, bytes and group count as they are. A grouped convolution's time a unit
    of work follows its width (a plain 3×3 one ran at 0.12 ns a unit of work in groups of 4, 0.04 in groups of 8 and
    24; blocked ones at 0.017–0.021), which trees read from channels and groups only by splitting on both: from a
    3-minute probe's 27 designed grouped kernels, eight RegNet and ResNeXt models' grouped convolutions came out at
    0.80–1.42 of their profiled time, and 0.89–1.05 with the width (docs/kernels.md)."""
    if kind in TRANSPOSE_KINDS:
        return x
    view = _divided_by_groups(x, ("cin", "cout"))[0] if kind == PER_GROUP and len(x) else x
    return np.delete(view, PERMUTATION, axis=1)


IN_CONTEXT_BINS = 8
"""The model rows that fit the in-context curve, in this many bins of equal count by work (fewer where a bin would
hold under MIN_KIND_ROWS rows): each bin's median."""


def binned_curve(values: np.ndarray, positions: np.ndarray,
                 y_max: float | None = None) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(centres, levels): the medians of `values` in IN_CONTEXT_BINS bins of equal count by `positions` (fewer where a
    bin would hold under MIN_KIND_ROWS), made non-decreasing (isotonic regression, at most `y_max`), for np.interp."""
    order = np.argsort(positions, kind="stable")
    bins = np.array_split(order, max(1, min(IN_CONTEXT_BINS, len(order) // MIN_KIND_ROWS)))
    centres = np.array([np.median(positions[b]) for b in bins])
    medians = np.array([np.median(values[b]) for b in bins])
    curve = IsotonicRegression(increasing=True, y_max=y_max).fit(centres, medians, sample_weight=[len(b) for b in bins])
    return tuple(float(c) for c in centres), tuple(float(v) for v in curve.predict(centres))


@dataclass(frozen=True)
class InContext:
    """What running in a model adds to a designed kernel's log time, as a curve in its log work (work_units): the
    medians of the model rows' residuals in bins of their work, made non-decreasing (isotonic regression) and never
    above 0, joined linearly and held flat beyond the outer bins. The gap shrinks as kernels grow: on this host a
    model's convolutions of under 0.1 M MACs ran at 0.58 of their designed twins' time (median), of 1–10 M at 0.77,
    of over 100 M at 0.92. One factor for all, the median, had put the transformers' Gemms (up to 0.9 G MACs, larger
    than any of the models' rows) at 0.65 of theirs: Swin-T −27%, ConvNeXt-Tiny −16% (docs/kernels.md).
    - Medians of bins, not one line: a 3-minute probe's thin designed regressor put the models' convolutions of
      0.1–1 M MACs at 5 times their time (median residual −1.65), and a line through every row, even fitted by
      Theil–Sen, followed them down the whole range: it read 0.59 at 10 M units of work and 0.70 at 100 M, where
      that table's rows of 10–100 M had run at 0.83 of their designed twins (median), and it put RegNets' grouped
      convolutions 11–21% and Swin-T and MaxViT-T 15% and 28% below their time (docs/kernels.md).
    - Never above 0: a kernel in a model reuses buffers still in the cache, and runs no slower than alone in a probe
      graph (convolutions and Gemms of one configuration in both ran at a median 0.50–0.95 of their probe time, per
      kind and size). Fitted on two default probes' tables, a line rose above 0 at the models' largest kernels
      (1.13 and 1.41 at 180 M units of work) and put the transformers' largest Gemms above their time: ConvNeXt-Tiny
      +40%, Swin-T +29% on one table, +14% and +6% held at 0 (docs/kernels.md)."""

    work: tuple[float, ...] = (0.0,)
    log_factor: tuple[float, ...] = (0.0,)

    @classmethod
    def fit(cls, residuals: np.ndarray, work: np.ndarray) -> InContext:
        """The curve of the model rows' `residuals` (log time less the designed regressor's) on their `work`."""
        return cls(*binned_curve(residuals, work, y_max=0.0))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return np.interp(work_units(x), self.work, self.log_factor)


def twin_key(kind: str, x: np.ndarray) -> tuple[object, ...]:
    """A kernel's kind and configuration, rounded: its features (a feature row of kernel_vector, its input footprint
    last) less TWIN_IGNORED and the footprint."""
    kept = np.delete(np.asarray(x, dtype=float)[:-1], [FEATURES.index(name) for name in TWIN_IGNORED])
    return (kind, *np.round(kept, 4).tolist())


@dataclass(frozen=True)
class Twins:
    """Designed kernels' times by configuration (twin_key), and what running in a model takes off them.

    A regressor reads a kernel from the rows nearest it; a designed kernel at its very configuration was timed on the
    device. On an ncnn probe of this host (CPUS=1) that also probed the eleven models it was scored on (`harness
    probe --for`), 296 of its zoo models' 515 kernels had a twin: their log error was 0.089 weighted by time against
    0.18 from the regressors fitted without the model's family, and ResNet-18's 3×3 convolutions of 64 channels came
    out at 2.12 ms against 2.0 measured, where the regressors said 1.31; held-out families within ±10% went from 45%
    to 82%, at CPUS=2 from 55% to 55%. On onnxruntime, from 60% to 44% (docs/kernels.md): KernelModel.fit reads
    twins only where an engine's rows name no graph node. What running in a model takes off a twin is one factor,
    or a curve in the twin's time where that predicts the table's own families better (twin_curve)."""

    log_ms: dict[tuple[object, ...], float] = field(default_factory=dict)
    log_factor: float | None = None
    """the median log ratio of the models' rows to their twins' (MIN_TWIN_ROWS or more), else None"""
    curve: tuple[tuple[float, ...], tuple[float, ...]] | None = None
    """that ratio as a curve in the twin's log ms (binned_curve), where it beat the flat factor (twin_curve)"""

    @classmethod
    def fit(cls, designed: pd.DataFrame, models: pd.DataFrame) -> Twins:
        """The `designed` rows' median log ms by configuration; the `models`' rows with a twin give the factor."""
        found: dict[tuple[object, ...], list[float]] = {}
        for kind, x, ms in zip(designed["kind"], designed["x"], designed["ms"], strict=True):
            found.setdefault(twin_key(str(kind), x), []).append(math.log(float(ms)))
        log_ms = {key: float(np.median(values)) for key, values in found.items()}
        columns = zip(models["kind"], models["x"], models["ms"], models["family"], strict=True)
        pairs = [(math.log(float(ms)) - log_ms[key], log_ms[key], family) for kind, x, ms, family in columns
                 if (key := twin_key(str(kind), x)) in log_ms]
        if len(pairs) < MIN_TWIN_ROWS:
            return cls(log_ms)
        ratios, twin_log_ms, families = (np.array(column) for column in zip(*pairs, strict=True))
        return cls(log_ms, float(np.median(ratios)), twin_curve(ratios, twin_log_ms, families))

    def times(self, kind: str, x: np.ndarray, in_context: InContext) -> np.ndarray:
        """Each kernel's time from its twin (NaN where it has none)."""
        twins = np.array([self.log_ms.get(twin_key(kind, row), np.nan) for row in x])
        if self.curve is not None:
            return np.exp(twins + np.interp(twins, *self.curve))
        return np.exp(twins + (self.log_factor if self.log_factor is not None else in_context(x)))


def twin_curve(ratios: np.ndarray, twin_log_ms: np.ndarray,
               families: np.ndarray) -> tuple[tuple[float, ...], tuple[float, ...]] | None:
    """The models' log ratios to their twins as a curve in the twins' log ms, or None where the flat median predicts
    them better: each family's rows predicted by the curve and by the median of the other families' rows, their
    absolute errors weighted by the twin's time (what a model's sum reads). On one ncnn probe (CPUS=1) the models'
    kernels of under 10 µs ran at 0.76 of their twins' time and those over 0.2 ms at 1.18 (docs/kernels.md); on
    another the flat factor had put eleven held-out families at 82% within ±10%."""
    weights = np.exp(twin_log_ms)
    flat_error = curve_error = 0.0
    for family in set(families):
        held, kept = families == family, families != family
        if kept.sum() < MIN_TWIN_ROWS:
            continue
        curve = binned_curve(ratios[kept], twin_log_ms[kept])
        flat_error += float(weights[held] @ np.abs(ratios[held] - np.median(ratios[kept])))
        curve_error += float(weights[held] @ np.abs(ratios[held] - np.interp(twin_log_ms[held], *curve)))
    return binned_curve(ratios, twin_log_ms) if curve_error < flat_error else None


@dataclass
class KernelRegressors:
    """Per-kind regressors of log time per unit of work on log features, and the pooled one over every kind (the
    kind one-hot: a kind never seen is none of them) that also reads the kernel's graph's footprint, each packed for
    fast prediction (harness.kernels.trees). The pooled regressor carries kinds of few rows, each from a handful of
    models (a Gemm a model), where the footprint told warm weights from cold: held-out families within ±5% went from
    48% to 56% and 40% to 52% on two CPUS=1 sessions, 36% to 40% at CPUS=2, 16% to 20% on the loopback board. Given
    to every regressor, it lets the kinds of many rows tell models apart, and did worse (docs/kernels.md)."""

    per_kind: dict[str, PackedTrees] = field(default_factory=dict)
    pooled: PackedTrees | None = None
    kinds: list[str] = field(default_factory=list)
    aliases: dict[str, float] = field(default_factory=dict)
    """Per alias kind (ALIAS_KINDS) the table holds rows of, their median ms."""
    input_footprint: bool = True
    """Whether the regressors read the input footprint (kernel_vector's last column): only where models of
    MODEL_FAMILIES families or more train them, each giving one first kernel; two or three such rows among a probe's
    designed kernels would let a tree set any graph's first kernel apart on them."""
    alone: dict[str, PackedTrees] = field(default_factory=dict)
    """Per kind no model of the table runs, a regressor of its designed kernels (designed_regressors)."""
    in_context: InContext = InContext()
    """What running in a model adds to a designed kernel's log time (designed_regressors): below 0 on this host."""
    designed: dict[str, PackedTrees] = field(default_factory=dict)
    """Every kind's regressor of designed kernels (MIN_DESIGNED_ROWS or more), run by the models or not: a fit on
    fewer families of the same table (the held-out folds of harness.kernels.predictor) has the same designed rows and
    reuses them."""
    largest: dict[str, float] = field(default_factory=dict)
    """Per kind the models run too seldom for a regressor of its own, the log MACs of its largest model row: a
    kernel beyond it, of a kind with designed kernels, is predicted from them (beyond_models)."""
    designed_reach: dict[str, float] = field(default_factory=dict)
    """Per kind with designed kernels, the largest weights a row among them (weights_a_row)."""
    twins: Twins = Twins()
    reads_twins: bool = True
    """whether fit was asked for twins (a fit without a family reads them as this one does)"""

    @classmethod
    def fit(cls, samples: pd.DataFrame, aliases: frozenset[str] = frozenset(),
            designed_fits: dict[str, PackedTrees] | None = None, twins: bool = True) -> KernelRegressors:
        """`aliases`: the engine's ALIAS_KINDS, at the median of every row of them, designed or not (a view does the
        same nothing in a probe graph). With models of enough families (enough_families), their rows train the
        regressors, and designed rows only the kinds no model runs. `designed_fits`: the `designed` of a fit on
        the same designed rows, taken instead of fitting them again. `twins`: whether a kernel with a twin is its
        twin's (Twins; harness.kernels.predictor.KernelModel.fit says where)."""
        input_footprint = enough_families(samples)
        found = Twins.fit(samples[samples["alone"]], samples[~samples["alone"]]) if twins else Twins()
        alias_ms = {str(kind): float(group["ms"].median())
                    for kind, group in samples.groupby("kind") if kind in aliases}
        designed = samples[samples["alone"]] if input_footprint else samples.iloc[:0]
        samples = samples[~samples["alone"]] if input_footprint else samples
        kinds = sorted(samples["kind"].unique())
        x, y = targets(samples, input_footprint)
        onehot = (samples["kind"].to_numpy()[:, None] == np.array(kinds)[None, :]).astype(float)
        ms = samples["ms"].to_numpy(dtype=float)
        pooled = fitted_trees(np.column_stack([kind_view(POOLED, x), samples["footprint"], onehot]), y, ms)
        per_kind = {}
        for kind in kinds:
            mask = (samples["kind"] == kind).to_numpy()
            if mask.sum() >= MIN_KIND_ROWS and kind not in alias_ms:
                per_kind[kind] = fitted_trees(kind_view(kind, x[mask]), y[mask], ms[mask])
        own, alone, in_context = designed_regressors(designed, samples, set(kinds) | set(aliases), designed_fits)
        largest = {kind: float(x[(samples["kind"] == kind).to_numpy(), 0].max())
                   for kind in kinds if kind not in per_kind and kind not in alias_ms}
        reach = {str(kind): float(weights_a_row(np.vstack(list(group["x"]))).max())
                 for kind, group in designed.groupby("kind") if kind in own}
        return cls(per_kind, pooled, kinds, alias_ms, input_footprint, alone, in_context, own, largest, reach, found,
                   twins)

    def without_twins(self) -> KernelRegressors:
        """These regressors reading no twins, nor a fit of them without a family (harness.kernels.predictor
        .without_family)."""
        return replace(self, twins=Twins(), reads_twins=False)

    def predict(self, kind: str, x: np.ndarray, graph_footprint: float) -> tuple[np.ndarray, str]:
        """Predicted ms of kernels of one kind in a graph of this footprint, and which regressor carried them (the
        kind's own, designed kernels', pooled, or the alias kind's median), the kernels with a twin at their twin's
        time (Twins)."""
        times, carried = self.regressed(kind, x, graph_footprint)
        if kind in self.aliases or not self.twins.log_ms:
            return times, carried
        twinned = self.twins.times(kind, x, self.in_context)
        found = ~np.isnan(twinned)
        if not found.any():
            return times, carried
        return np.where(found, twinned, times), TWINS if found.all() else f"{carried}, {TWINS}"

    def regressed(self, kind: str, x: np.ndarray, graph_footprint: float) -> tuple[np.ndarray, str]:
        """predict's times from the regressors alone."""
        x = without_input_footprint(x, self.input_footprint)
        if kind in self.aliases:
            return np.full(len(x), self.aliases[kind]), ALIAS
        if kind in self.per_kind:
            return np.exp(self.per_kind[kind].predict(kind_view(kind, x)) + work_units(x)), kind
        if kind in self.alone:
            return (np.exp(self.alone[kind].predict(kind_view(kind, x)) + work_units(x) + self.in_context(x)),
                    DESIGNED)
        if kind == PER_GROUP and "Conv" in self.per_kind:
            one, groups = per_group(x)
            return groups * np.exp(self.per_kind["Conv"].predict(kind_view("Conv", one)) + work_units(one)), \
                "Conv per group"
        assert self.pooled is not None
        onehot = np.zeros((len(x), len(self.kinds)))
        if kind in self.kinds:
            onehot[:, self.kinds.index(kind)] = 1.0
        footprints = np.full((len(x), 1), graph_footprint)
        times = np.exp(self.pooled.predict(np.column_stack([kind_view(POOLED, x), footprints, onehot])) + work_units(x))
        beyond = self.beyond_models(kind, x)
        if not beyond.any():
            return times, POOLED
        far = x[beyond]
        far_ms = self.designed[kind].predict(kind_view(kind, far)) + work_units(far) + self.in_context(far)
        times[beyond] = np.exp(far_ms)
        return times, DESIGNED if beyond.all() else f"{POOLED}, {DESIGNED} beyond the models' sizes"

    def beyond_models(self, kind: str, x: np.ndarray) -> np.ndarray:
        """Which kernels of a kind the models run too seldom for a regressor of its own are larger (in MACs) than any
        model row of it, where designed kernels of the kind were timed: there the pooled regressor's trees hold the time
        per unit of work of the largest row they saw, and the designed kernels saw the size (of weights a row no larger
        than theirs: weights_a_row). A default probe's twelve models run one Gemm each, a classifier of one row;
        ConvNeXt-Tiny's 37 Gemms of 3,136 rows (its pointwise layers) came out 42.1 ms from the pooled regressor, 35.4
        ms from designed kernels, against 38.6 profiled (docs/kernels.md). Within the models' sizes the pooled regressor
        stays: designed Gemms for the classifiers put the zoo's held-out families from 76% to 68% within ±10%."""
        if kind not in self.designed or kind not in self.largest:
            return np.zeros(len(x), dtype=bool)
        return (x[:, 0] > self.largest[kind]) & (weights_a_row(x) <= self.designed_reach[kind])


def targets(samples: pd.DataFrame, input_footprint: bool) -> tuple[np.ndarray, np.ndarray]:
    """The samples' feature rows (the input footprint at 0 where it is not read) and log time per unit of work."""
    x = without_input_footprint(np.vstack(list(samples["x"])), input_footprint)
    return x, np.log(samples["ms"].to_numpy(dtype=float)) - work_units(x)


def designed_regressors(designed: pd.DataFrame, models: pd.DataFrame, seen: set[str],
                        fitted: dict[str, PackedTrees] | None = None
                        ) -> tuple[dict[str, PackedTrees], dict[str, PackedTrees], InContext]:
    """Regressors of designed kernels for every kind of MIN_DESIGNED_ROWS designed rows or more (`fitted`, where a
    fit on the same designed rows made them), those of them no row of `models` (kinds `seen`) has, and what running
    in a model adds to a designed kernel's log time (InContext), fitted on the models' rows of the compute kinds
    (compute_kinds) both have enough of. A kind no model of the table runs (grouped convolutions in a default probe's
    table, whose twelve models have none; a transformer's layer norms, softmaxes and GELUs in a table of CNNs) is
    then predicted from kernels of its kind timed on the device, not by the pooled regressor over other kinds, which
    put Swin-T's layer norms at a fifth of their time and its softmaxes at an eighth. Packed as in a model
    (harness.kernels.designed_graphs._Builder), memory-bound kinds run as much faster in a model as compute kinds of
    their size do (docs/kernels.md)."""
    kinds = compute_kinds(designed)
    if not kinds:
        return {}, {}, InContext()
    own = fitted if fitted is not None else {
        str(kind): fitted_trees(kind_view(str(kind), x), y)
        for kind, group in designed.groupby("kind") if len(group) >= MIN_DESIGNED_ROWS
        for x, y in [targets(group, False)]}
    shared = models[models["kind"].isin(kinds) & models["kind"].isin(own)
                    & models.groupby("kind")["kind"].transform("size").ge(MIN_KIND_ROWS)]
    pairs = [(y_kind - own[str(kind)].predict(kind_view(str(kind), x_kind)), work_units(x_kind))
             for kind, group in shared.groupby("kind") for x_kind, y_kind in [targets(group, False)]]
    if not pairs:
        return own, {kind: trees for kind, trees in own.items() if kind not in seen}, InContext()
    curve = InContext.fit(np.concatenate([r for r, _ in pairs]), np.concatenate([w for _, w in pairs]))
    return own, {kind: trees for kind, trees in own.items() if kind not in seen}, curve


def compute_kinds(samples: pd.DataFrame) -> list[str]:
    """The kinds that multiply-accumulate: convolutions and Gemm, MatMul's kind (their median row's MACs above 0;
    pooling, element-wise and layout kinds count none)."""
    if samples.empty:
        return []
    macs = np.vstack(list(samples["x"]))[:, FEATURES.index("macs")]
    medians = pd.Series(macs, index=samples.index).groupby(samples["kind"]).median()
    return sorted(str(kind) for kind, value in medians.items() if value > 0)


def enough_families(samples: pd.DataFrame) -> bool:
    """Whether models (rows not timed alone) of MODEL_FAMILIES families or more are among the samples: then their rows
    alone train the regressors, and the regressors read the input footprint."""
    return bool(samples.loc[~samples["alone"], "family"].nunique() >= MODEL_FAMILIES)


def without_input_footprint(x: np.ndarray, keep: bool) -> np.ndarray:
    """Feature rows as they are, or with the input footprint (the last column) at 0 where it is not read."""
    if keep or not len(x):
        return x
    cleared = x.copy()
    cleared[:, -1] = 0.0
    return cleared
