"""Per-operator profiles: a framework's raw trace of the per-op phase turned into one table, whatever the runtime.

Definitions (also in docs/per-op.md):
- a node's time is the framework's own duration of one node run: onnxruntime's `<node>_kernel_time` event,
  torch's top-level operator (an `aten::` op not nested in another) inside one marked call;
- per inference, a node's runs are summed; `mean_ms` and `median_ms` are over the profiled inferences,
  `calls` is runs per inference, `share` is of the profiled wall latency;
- two rows are not operators and are never hidden: `(between ops)` is the framework's own span of one call
  (ORT `model_run`, torch's marked call) minus the op sum: executor, allocation and thread-pool scheduling
  gaps; `(outside the run)` is the wall latency the bench script measured minus that span: the Python call;
- coverage = op sum / the headline latency (steady-phase mean, measured without any profiler), and op sum / the
  profiled calls' own wall latency (which the gap rows complete to 100%);
- profiling overhead = median profiled wall latency / median steady latency - 1, both from the same run.
MACs and parameter bytes come from the static ONNX analysis (harness.models.facts.node_facts), joined by node
name; where the runtime renamed or fused a node, from the graph node that produced the fused node's output,
walking back to the node of the traced op type; torch ops get them from their recorded argument shapes.
"""

from __future__ import annotations

import base64
import gzip
import json
import math
import statistics
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from harness.analysis.onnx_join import OnnxJoin
from harness.core import metric_registry
from harness.core.bounds import read_bounded, too_large
from harness.core.errors import DataError
from harness.core.records import RunRecord
from harness.core.storage import writing
from harness.measure.report_protocol import LATENCIES_KEY
from harness.store.results import atomic_write_csv, atomic_write_json

RUNS_DIR = "runs"  # per-run files: RESULTS_DIR/<session>/runs/<run_id>/
RAW_DIR = "raw"  # the framework's own files, as written inside the limited environment
META_FILE = "per_op_meta.json"  # harness.measure.benchloop.PROFILE_META
TABLE_CSV, TABLE_JSON = "per_op.csv", "per_op.json"
TORCH_ITERATION_MARK = "harness_iteration"  # bench_scripts/torch_bench.py's record_function label
BETWEEN_OPS, OUTSIDE_RUN = "(between ops)", "(outside the run)"
MAX_TRACE_BYTES = 256 * 1024 * 1024
"""The most bytes of a framework's per-op trace (and of its meta) read: a few MiB per hundred profiled inferences of a
large model; a larger trace is refused in one line before it is parsed (JSON takes several times its size)."""
COVERAGE_GOAL = 0.8  # below it the coverage line names the largest gap as the cause
TABLE_COLUMNS = ("node_index", "node", "onnx_node", "op_type", "input_shapes", "output_shapes", "macs",
                 "param_bytes", "calls", "mean_ms", "median_ms", "depthwise", "share")
"""`depthwise`: a convolution joined to a graph node whose groups equal its input channels (None where the node
could not be joined, or is not a convolution)."""
_TORCH_ITEMSIZE = {"float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "signed char": 1,
                   "unsigned char": 1, "int": 4, "long int": 8}


@dataclass
class OpEvent:
    """One node run inside one profiled inference, on the raw trace's clock (microseconds)."""

    iteration: int
    seq: int
    name: str
    op_type: str
    ts_us: float
    dur_us: float
    input_shapes: list[Any] = field(default_factory=list)
    output_shapes: list[Any] = field(default_factory=list)
    macs: int | None = None
    param_bytes: int | None = None
    depthwise: bool | None = None  # a convolution the framework itself says is depthwise or not (ncnn)


@dataclass
class RawProfile:
    """The kept (post-warmup) inferences of one run's per-op phase."""

    framework: str
    events: list[OpEvent]
    runs: list[tuple[float, float]]  # (ts_us, dur_us) of each inference as the framework saw it
    wall_ms: list[float]  # the bench script's own clock around each inference
    first_start_s: float | None = None  # monotonic start of the first kept inference (aligns the trace)
    phase_offset_s: float | None = None  # that start minus the `profile` phase mark


# ---- reading raw traces -------------------------------------------------------------------------------------

def _ort_shapes(items: Any) -> list[Any]:
    return [next(iter(item.values())) for item in items or [] if isinstance(item, dict) and item]


def _in_runs(events: Iterable[dict[str, Any]], runs: list[tuple[float, float]], ts_key: str
             ) -> Iterator[tuple[int, int, float, dict[str, Any]]]:
    """(inference index, order within it, timestamp, event) of each event, in time order, that falls inside a kept
    inference's (ts, dur) span; the events of skipped warmup calls and after the last kept inference are left out."""
    index, seq = 0, 0
    for event in sorted(events, key=lambda item: float(item[ts_key])):
        ts = float(event[ts_key])
        while index < len(runs) and ts > runs[index][0] + runs[index][1]:
            index, seq = index + 1, 0
        if index == len(runs):
            return
        if ts < runs[index][0]:
            continue  # a skipped warmup call
        yield index, seq, ts, event
        seq += 1


def parse_onnxruntime(trace: list[dict[str, Any]], skip: int) -> tuple[list[OpEvent], list[tuple[float, float]]]:
    """ORT's profile: `model_run` spans (cat Session) and `<node>_kernel_time` events (cat Node)."""
    runs = sorted((float(e["ts"]), float(e["dur"])) for e in trace
                  if e.get("cat") == "Session" and e.get("name") == "model_run")[skip:]
    nodes = (e for e in trace if e.get("cat") == "Node" and str(e.get("name", "")).endswith("_kernel_time"))
    events: list[OpEvent] = []
    for index, seq, ts, node in _in_runs(nodes, runs, "ts"):
        args = node.get("args") or {}
        param = args.get("parameter_size")
        events.append(OpEvent(index, seq, node["name"][: -len("_kernel_time")], str(args.get("op_name", "?")), ts,
                              float(node["dur"]), _ort_shapes(args.get("input_type_shape")),
                              _ort_shapes(args.get("output_type_shape")),
                              param_bytes=int(str(param)) if str(param or "").isdigit() else None))
    return events, runs


def parse_ncnn(trace: dict[str, Any], skip: int) -> tuple[list[OpEvent], list[tuple[float, float]]]:
    """ncnn_bench.py's trace: each inference's span and each layer's, timed one extract() call per layer. An
    inference's duration is its span less the blobs' hand-overs, which the layers' times leave out too."""
    spans = sorted((float(ts), float(dur), float(copies)) for ts, dur, copies in trace["runs"])[skip:]
    events = [OpEvent(index, seq, str(layer["name"]), str(layer["type"]), ts, float(layer["dur_us"]),
                      depthwise=layer.get("depthwise"))
              for index, seq, ts, layer in _in_runs(trace["layers"], [(ts, dur) for ts, dur, _ in spans], "ts_us")]
    return events, [(ts, dur - copies) for ts, dur, copies in spans]


def _concrete(args: dict[str, Any], index: int) -> Any:
    values = args.get("Concrete Inputs") or []
    try:
        return json.loads(values[index])
    except (IndexError, TypeError, ValueError):
        return None


def _torch_costs(name: str, args: dict[str, Any]) -> tuple[int | None, int | None]:
    """(MACs, parameter bytes) of a conv or linear op from its recorded shapes; (None, None) otherwise."""
    dims = args.get("Input Dims") or []
    types = args.get("Input type") or []
    itemsize = _TORCH_ITEMSIZE.get(types[1] if len(types) > 1 else "", 0)
    if len(dims) < 2 or not dims[0] or not dims[1]:
        return None, None
    x, w = dims[0], dims[1]
    params = (math.prod(w) + (math.prod(dims[2]) if len(dims) > 2 and dims[2] else 0)) * itemsize or None
    if name in ("aten::conv1d", "aten::conv2d", "aten::conv3d"):
        stride, padding, dilation = (_concrete(args, i) for i in (3, 4, 5))
        spatial = len(w) - 2
        if not all(isinstance(v, list) and len(v) == spatial for v in (stride, padding, dilation)):
            return None, params
        out = [(x[-spatial + i] + 2 * padding[i] - dilation[i] * (w[2 + i] - 1) - 1) // stride[i] + 1
               for i in range(spatial)]
        return x[0] * w[0] * math.prod(out) * math.prod(w[1:]), params
    if name == "aten::linear":
        return math.prod(x[:-1]) * w[0] * w[1], params
    if name in ("aten::matmul", "aten::mm", "aten::bmm"):
        return math.prod(x) * w[-1], None
    if name == "aten::addmm" and len(dims) > 2 and dims[2]:
        return math.prod(dims[1]) * dims[2][-1], None
    return None, params if name.startswith("aten::conv") else None


def parse_torch(trace: dict[str, Any], skip: int) -> tuple[list[OpEvent], list[tuple[float, float]]]:
    """torch.profiler's Chrome trace: marked calls (user_annotation) and the top-level cpu_ops inside each."""
    items = trace.get("traceEvents") or []
    marks = sorted((e for e in items if e.get("cat") == "user_annotation" and e.get("name") == TORCH_ITERATION_MARK),
                   key=lambda e: float(e["ts"]))[skip:]
    ops = sorted((e for e in items if e.get("cat") == "cpu_op"), key=lambda e: (float(e["ts"]), -float(e["dur"])))
    events: list[OpEvent] = []
    for index, mark in enumerate(marks):
        start, end = float(mark["ts"]), float(mark["ts"]) + float(mark["dur"])
        covered_until, seq = -math.inf, 0
        for op in ops:
            ts, dur = float(op["ts"]), float(op["dur"])
            if op.get("tid") != mark.get("tid") or ts < start or ts > end or ts < covered_until:
                continue
            covered_until = ts + dur
            args = op.get("args") or {}
            macs, params = _torch_costs(op["name"], args)
            events.append(OpEvent(index, seq, op["name"], op["name"].removeprefix("aten::"), ts, dur,
                                  [d for d in args.get("Input Dims") or [] if d], macs=macs, param_bytes=params))
            seq += 1
    return events, [(float(m["ts"]), float(m["dur"])) for m in marks]


def _bounded_text(path: Path) -> str:
    """A trace file's text, refused in one line past MAX_TRACE_BYTES."""
    data = read_bounded(path, MAX_TRACE_BYTES)
    if data is None:
        raise DataError(too_large(path, MAX_TRACE_BYTES, "a per-op trace", "MAX_TRACE_BYTES"))
    return data.decode("utf-8")


def load_raw(raw_dir: Path) -> tuple[dict[str, Any], RawProfile | None]:
    """The meta the bench script wrote, and the parsed profile (None when the framework offers no profiler)."""
    try:
        meta = json.loads(_bounded_text(raw_dir / META_FILE))
    except (OSError, ValueError) as err:
        raise DataError(f"{raw_dir}: no readable {META_FILE} ({type(err).__name__}); the per-op phase did not "
                        "finish (see the run's stderr_tail)") from None
    if meta.get("unsupported"):
        return meta, None
    path = raw_dir / str(meta.get("trace", ""))
    try:
        trace = json.loads(_bounded_text(path))
    except (OSError, ValueError) as err:
        raise DataError(f"{path}: the framework's trace is missing or not JSON ({type(err).__name__})") from None
    skip = int(meta.get("skip_runs", 0))
    parsers: dict[str, Callable[[Any, int], tuple[list[OpEvent], list[tuple[float, float]]]]] = {
        "onnxruntime": parse_onnxruntime, "torch": parse_torch,
        "ncnn": parse_ncnn}  # a trace is JSON: each parser reads its own shape
    if meta.get("framework") not in parsers:
        raise DataError(f"{raw_dir}: per-op traces of framework {meta.get('framework')!r} are not read")
    try:
        events, runs = parsers[meta["framework"]](trace, skip)
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise DataError(f"{path}: not a {meta['framework']} trace this harness reads ({type(err).__name__}: {err})"
                        ) from None
    if not runs or not events:
        raise DataError(f"{path}: no profiled inference with operator events after {skip} warmup calls")
    return meta, RawProfile(meta["framework"], events, runs, [float(v) for v in meta.get(LATENCIES_KEY, [])],
                            meta.get("first_start_s"), meta.get("phase_offset_s"))


# ---- the table ----------------------------------------------------------------------------------------------

@dataclass
class PerOp:
    """One model's per-op table (one run, or several pooled), its op-type sums and its coverage."""

    framework: str
    iterations: int
    table: pd.DataFrame
    by_type: pd.DataFrame
    coverage: dict[str, Any]
    depthwise_share: float | None = None
    """Share of the operators' time spent in depthwise convolutions (the `ops` calibration fit's split); None
    when a convolution could not be joined to the graph, or without a graph (torch)."""

    def op_time_ms(self) -> dict[str, float]:
        """The per-run metric family op_time_ms.<op type> (operators only, mean ms per inference)."""
        ops = self.by_type[~self.by_type["op_type"].isin([BETWEEN_OPS, OUTSIDE_RUN])]
        return {str(row.op_type): float(row.mean_ms) for row in ops.itertuples()}

    def to_json(self) -> dict[str, Any]:
        return {"framework": self.framework, "iterations": self.iterations, "coverage": self.coverage,
                "depthwise_share": self.depthwise_share, "ops": _records(self.table), "by_type": _records(self.by_type)}


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return json.loads(frame.to_json(orient="records", double_precision=15))


def _shapes_text(shapes: Iterable[Any]) -> str:
    return " ".join("x".join(str(d) for d in s) if isinstance(s, list) else "?" for s in shapes)


def build(profiles: list[RawProfile], steady_means_ms: list[float], steady_medians_ms: list[float],
          facts: list[dict[str, Any]] | None = None) -> PerOp:
    """Pool the profiles' inferences (runs of one model at one CPUS) into the table, op-type sums and coverage."""
    join = OnnxJoin(facts, fused=profiles[0].framework == "onnxruntime") if facts else None
    rows, offset = [], 0
    for profile in profiles:
        for e in profile.events:
            rows.append({"iteration": offset + e.iteration, "seq": e.seq, "node": e.name, "op_type": e.op_type,
                         "dur_ms": e.dur_us / 1000.0, "event": e})
        offset += len(profile.runs)
    iterations = offset
    events = pd.DataFrame(rows)
    said = any(e.depthwise is not None for profile in profiles for e in profile.events)  # ncnn says it itself
    table_rows, unjoined_conv = [], join is None and not said
    for (seq, name), group in events.groupby(["seq", "node"], sort=True):
        first: OpEvent = group["event"].iloc[0]
        per_inference = group.groupby("iteration")["dur_ms"].sum().reindex(range(iterations), fill_value=0.0)
        graph = join.find(name, first.op_type, first.input_shapes) if join else None
        is_conv = "Conv" in first.op_type
        depthwise = bool(graph.get("depthwise")) if graph else first.depthwise
        unjoined_conv |= is_conv and depthwise is None
        table_rows.append({
            "node_index": int(seq), "node": name, "onnx_node": graph["name"] if graph else None,
            "op_type": first.op_type, "input_shapes": _shapes_text(first.input_shapes),
            "output_shapes": _shapes_text(first.output_shapes),
            "macs": graph["macs"] if graph else first.macs,
            "param_bytes": graph["param_bytes"] if graph else first.param_bytes,
            "calls": len(group) / iterations, "mean_ms": float(per_inference.mean()),
            "median_ms": float(per_inference.median()),
            "depthwise": depthwise if is_conv else None,
        })
    run_ms = statistics.fmean(dur / 1000.0 for p in profiles for _, dur in p.runs)
    wall = [v for p in profiles for v in p.wall_ms]
    wall_ms = statistics.fmean(wall) if wall else run_ms
    table = pd.DataFrame(table_rows, columns=[c for c in TABLE_COLUMNS if c != "share"])
    op_sum = float(table["mean_ms"].sum())
    gaps = pd.DataFrame([
        {"node": BETWEEN_OPS, "op_type": BETWEEN_OPS, "mean_ms": run_ms - op_sum, "calls": 1.0},
        {"node": OUTSIDE_RUN, "op_type": OUTSIDE_RUN, "mean_ms": wall_ms - run_ms, "calls": 1.0},
    ])
    table = pd.concat([table, gaps], ignore_index=True)
    for column in ("node_index", "macs", "param_bytes"):
        table[column] = table[column].astype("Int64")
    table["share"] = table["mean_ms"] / wall_ms if wall_ms > 0 else math.nan
    by_type = (table.groupby("op_type", sort=False)
               .agg(nodes=("node", "count"), macs=("macs", lambda m: m.sum(min_count=1)), mean_ms=("mean_ms", "sum"),
                    share=("share", "sum"))
               .reset_index().sort_values("mean_ms", ascending=False, ignore_index=True))
    by_type["macs"] = by_type["macs"].astype("Int64")
    coverage = coverage_of(op_sum, run_ms, wall, steady_means_ms, steady_medians_ms)
    depthwise_ms = float(table.loc[table["depthwise"].eq(True), "mean_ms"].sum())
    share = None if unjoined_conv or op_sum <= 0 else depthwise_ms / op_sum
    return PerOp(profiles[0].framework, iterations, table, by_type, coverage, share)


def coverage_of(op_sum: float, run_ms: float, wall: list[float], steady_means: list[float],
                steady_medians: list[float]) -> dict[str, Any]:
    """The per-op sum against the headline latency, the gaps by cause, and the profiler's own cost."""
    wall_ms = statistics.fmean(wall) if wall else run_ms
    steady = statistics.fmean(steady_means) if steady_means else None
    overhead = None
    if wall and steady_medians:
        overhead = statistics.median(wall) / statistics.median(steady_medians) - 1.0
    ratio = op_sum / steady if steady else None
    gaps = {"between ops (executor, allocation, thread-pool scheduling)": run_ms - op_sum,
            "outside the framework's run (Python call, feeds and fetches)": wall_ms - run_ms}
    if steady is not None:
        gaps["steady minus profiled latency (the machine's load changed between the phases)"] = steady - wall_ms
    line = (f"per-op sum {op_sum:.4g} ms" + (f" = {ratio:.1%} of the measured latency {steady:.4g} ms (steady mean)"
                                             if ratio is not None else " (no steady latency measured)"))
    line += f", {op_sum / wall_ms:.1%} of the profiled calls' {wall_ms:.4g} ms" if wall_ms > 0 else ""
    line += "; " + ", ".join(f"{name} {value:.3g} ms" for name, value in gaps.items())
    if overhead is not None:
        line += f"; profiling overhead {overhead:+.1%} (profiled vs steady median)"
    if ratio is not None and ratio < COVERAGE_GOAL:
        cause = max(gaps, key=lambda name: gaps[name])
        line = f"below {COVERAGE_GOAL:.0%}, mostly {cause} · " + line
    return {"op_sum_ms": op_sum, "framework_run_ms": run_ms, "profiled_latency_ms": wall_ms,
            "steady_latency_ms": steady, "coverage": ratio,
            "coverage_of_profiled": op_sum / wall_ms if wall_ms else None, "between_ops_ms": run_ms - op_sum,
            "outside_run_ms": wall_ms - run_ms, "profiling_overhead": overhead, "line": line}


# ---- what a session does with each run ----------------------------------------------------------------------

def run_dir(session_dir: Path, run_id: str) -> Path:
    return Path(session_dir) / RUNS_DIR / run_id


def unpack(files: dict[str, str], directory: Path) -> None:
    """The runner's packed files (gzip + base64) back as they were written inside the environment."""
    with writing(directory):
        directory.mkdir(parents=True, exist_ok=True)
    for name, packed in files.items():
        data, path = gzip.decompress(base64.b64decode(packed)), directory / Path(name).name
        with writing(path, len(data)):
            path.write_bytes(data)


def steady_figures(run: dict[str, Any]) -> tuple[list[float], list[float]]:
    """The timed phase's mean and median latency of the run (its line), each as a list of zero or one value."""
    mean, median = (metric_registry.get(name).value(run)
                    for name in (metric_registry.LATENCY_MEAN, metric_registry.LATENCY))
    return [mean] if mean is not None else [], [median] if median is not None else []


def keep_run_profile(session_dir: Path, record: dict[str, Any], facts: list[dict[str, Any]] | None) -> None:
    """Move a run's packed per-op files to runs/<run_id>/raw, write its table (CSV, JSON) beside them, and put
    the summary (coverage, op_time_ms.<type>) in the record. A trace that cannot be read is noted, never fatal."""
    files = record.pop("per_op_files", None)
    if files is None:
        return
    directory = run_dir(session_dir, record["run_id"])
    unpack(files, directory / RAW_DIR)
    try:
        meta, profile = load_raw(directory / RAW_DIR)
    except DataError as err:
        record["per_op"] = {"error": str(err), "dir": str(directory)}
        return
    if profile is None:
        record["per_op"] = {"framework": meta.get("framework"), "note": meta["unsupported"], "dir": str(directory)}
        return
    per_op = build([profile], *steady_figures(record), facts)
    write_tables(per_op, directory)
    record["per_op"] = {"framework": per_op.framework, "iterations": per_op.iterations,
                        "coverage": per_op.coverage, "depthwise_share": per_op.depthwise_share,
                        "dir": str(directory)}
    record[metric_registry.OP_TIME] = per_op.op_time_ms()


def write_tables(per_op: PerOp, directory: Path) -> None:
    atomic_write_csv(directory / TABLE_CSV, _records(per_op.table))
    atomic_write_json(directory / TABLE_JSON, {"schema_version": 1, **per_op.to_json()})


def model_facts_for(model_path: str, dims: str | None = None) -> list[dict[str, Any]] | None:
    """Graph facts of an ONNX model for the join, at the sizes its runs gave its dynamic dimensions (`dims`, as a
    run's model_dims holds them); None for other formats or a graph onnx cannot read."""
    if not model_path.lower().endswith(".onnx"):
        return None
    from harness.core.config import dim_sizes
    from harness.core.errors import ModelError
    from harness.models.facts import node_facts

    try:
        return node_facts(model_path, dim_sizes(dims or ""))
    except ModelError:
        return None


def pooled(session_dir: Path, runs: list[RunRecord]) -> PerOp:
    """One table over every profiled inference of these runs (one model at one CPUS), from their raw traces."""
    profiles, means, medians = [], [], []
    for run in runs:
        _, profile = load_raw(run_dir(session_dir, run.run_id) / RAW_DIR)
        if profile is None:
            continue
        profiles.append(profile)
        run_means, run_medians = steady_figures(run.line)
        means += run_means
        medians += run_medians
    if not profiles:
        raise DataError(f"no per-op profile among {len(runs)} runs in {session_dir}")
    model = runs[0].model
    return build(profiles, means, medians, model_facts_for(model.get("model_path", ""), model.get("model_dims")))
