"""A probe's sessions' runs as kernel-table rows: each model's per-op table (each node's median of its runs' times),
with the model's headline latency from the same runs' timed phases, and each designed row mapped back to the
designed kernel it times."""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Mapping
from pathlib import Path

import onnx
import pandas as pd

from harness.analysis.per_op import pooled
from harness.core import metric_registry
from harness.core.errors import DataError
from harness.core.records import RunRecord
from harness.kernels.designed import OVERHEAD, PACK_KINDS, WARM
from harness.kernels.packing import tensor_shapes
from harness.kernels.table import DESIGNED_FAMILY, GRAPHS_DIR
from harness.kernels.training import median_of_runs
from harness.measure.ncnn_param import param_layers
from harness.models.families import model_family
from harness.store.results import load_runs

KERNEL_NAME = re.compile(r"^(?P<kernel>(?:k\d+|p\d+[ows]\d+)_(?P<kind>[a-z0-9]+))/")
"""A designed node's name: `<kernel>/<node>`, where the kernel is `k<index>_<kind>`, or `p<pack>o<i>_overhead`,
`p<pack>w<i>_warm` and `p<pack>s<i>_sink` for a pack's own nodes (harness.kernels.designed.PACK_KINDS)."""
Shape = tuple[int, ...]


def model_latency_ms(runs: Iterable[RunRecord]) -> float | None:
    """The model's headline latency in the session: the median over its ok runs of each run's (LATENCY_STATISTIC of
    the timed phase, which never runs under the profiler)."""
    metric = metric_registry.get(metric_registry.LATENCY)
    values = [v for run in runs if run.ok and (v := metric.value(run.line)) is not None]
    return statistics.median(values) if values else None


def _shapes(text: object) -> set[Shape]:
    """per_op's `input_shapes`/`output_shapes` cell (`1x32x28x28 1x32x1x1`) as shapes."""
    if not isinstance(text, str):
        return set()
    return {tuple(int(d) for d in part.split("x")) for part in text.split() if re.fullmatch(r"\d+(x\d+)*", part)}


def ncnn_layer_kernels(param: Path, graph: onnx.ModelProto) -> dict[str, str]:
    """ncnn layer name -> the designed kernel it runs, from the .param pnnx converted the probe graph to: pnnx names
    the graph's inputs in0, in1, ... and its outputs out0, out1, ... in the ONNX graph's order. A layer writing a
    graph output belongs to that output's owner (a pack's sink); any other to the kernel whose blobs it reads
    (kernels share none), and what a pack's warm node writes is its kernel's."""
    initializers = {init.name for init in graph.graph.initializer}
    inputs = [value.name for value in graph.graph.input if value.name not in initializers]
    blobs = {f"in{index}": named["kernel"] for index, name in enumerate(inputs) if (named := KERNEL_NAME.match(name))}
    written = {f"out{index}": named["kernel"] for index, value in enumerate(graph.graph.output)
               if (named := KERNEL_NAME.match(value.name))}
    warmed = {named["kernel"]: written_by["kernel"] for node in graph.graph.node
              if (named := KERNEL_NAME.match(node.name)) and named["kind"] == WARM
              and (written_by := KERNEL_NAME.match(node.output[0]))}
    found: dict[str, str] = {}
    for line in param_layers(param):
        if len(line) < 4 or not (line[2].isdigit() and line[3].isdigit()):
            continue
        ins, outs = line[4:4 + int(line[2])], line[4 + int(line[2]):4 + int(line[2]) + int(line[3])]
        if line[0] == "Input":  # the blob of a graph input it names
            owners = {blobs[blob] for blob in outs if blob in blobs}
        else:
            owners = ({written[blob] for blob in outs if blob in written}
                      or {blobs[blob] for blob in ins if blob in blobs})
        if len(owners) == 1:
            found[line[1]] = owners.pop()
            if line[0] != "Input":
                blobs.update(dict.fromkeys(outs, warmed.get(found[line[1]], found[line[1]])))
    return found


def owner(row: Mapping[str, object], shapes: Mapping[str, set[Shape]], layers: Mapping[str, str]) -> str:
    """The designed kernel a per-op row times: the one its graph node (or the engine's node) is named after, or
    the ncnn layer's (`layers`), else the one kernel of the pack with a tensor of the row's shapes
    (ONNX Runtime's unnamed ReorderInput/ReorderOutput, or the HardSigmoid and Mul it runs a HardSwish as): its input
    shapes first, then its output shapes, then both; '' where none or several kernels do."""
    for name in (row.get("onnx_node"), row.get("node")):
        named = KERNEL_NAME.match(name) if isinstance(name, str) else None
        if named:
            return named["kernel"]
    if isinstance(row.get("node"), str) and row["node"] in layers:
        return layers[str(row["node"])]
    ins, outs = _shapes(row.get("input_shapes")), _shapes(row.get("output_shapes"))
    for seen in (ins, outs, ins | outs):  # a reorder's unpadded side is its input (ReorderInput) or output
        candidates = [kernel for kernel, known in shapes.items() if seen & known]
        if len(candidates) == 1:
            return candidates[0]
    return ""


def kernel_kind(kernel: str) -> str:
    named = KERNEL_NAME.match(f"{kernel}/")
    return named["kind"] if named else ""


def merged(table: pd.DataFrame) -> pd.DataFrame:
    """One row per node: an engine may run a graph's independent nodes in another order from one run to the next
    (ONNX Runtime does with a probe graph's kernels), and per_op.pooled keeps a node at each position apart, each
    with its share of the inferences (calls < 1); their times add up to the node's."""
    sums = {"calls": "sum", "mean_ms": "sum", "median_ms": "sum", "share": "sum", "node_index": "min"}
    agg = {column: sums.get(column, "first") for column in table.columns if column not in ("node", "op_type")}
    joined = table.groupby(["node", "op_type"], sort=False, dropna=False).agg(agg).reset_index()
    return joined.sort_values("node_index", na_position="last", kind="stable", ignore_index=True)[table.columns]


ModelRuns = dict[str, list[tuple[RunRecord, pd.DataFrame | None]]]
"""Per model, its ok runs with a per-op profile, each with its per-op table (None where the profile does not read)."""


def per_op_tables(session_dir: Path) -> ModelRuns:
    """The session's ok runs with a per-op profile, each with its per-op table (merged), by model: read once, as a
    session ends, and combined with other sessions' runs of the same models by session_rows."""
    found: ModelRuns = {}
    for run in load_runs(session_dir):
        if run.ok and run.line.get("per_op", {}).get("iterations"):
            try:
                table: pd.DataFrame | None = merged(pooled(session_dir, [run]).table)
            except DataError:
                table = None
            found.setdefault(run.model_name, []).append((run, table))
    return found


def session_rows(found: ModelRuns, designed: Mapping[str, Path]) -> pd.DataFrame:
    """Every model's per-op rows from its runs (per_op_tables, of one session or several: each node at the median of
    its runs' times, harness.kernels.training.median_of_runs), with model, source, family, model_latency_ms and
    graph; a designed probe graph's rows (`designed`: the model's name -> its graph) also with kernel and
    kernel_kind, and graph naming the kernel's own graph under the table's graphs/; a zoo model's graph names its
    file there too (the probe copies it in), so a table predicts where the zoo is not. A model with no per-op
    profile gives no rows."""
    frames = []
    for model, pairs in sorted(found.items()):
        runs = [run for run, _ in pairs]
        tables = [table for _, table in pairs if table is not None]
        if not tables:
            continue
        table = median_of_runs(tables)
        latency = model_latency_ms(runs)
        if model in designed:
            graph = designed[model]
            proto = onnx.load(str(graph), load_external_data=False)
            converted = str(runs[0].model.get("model_converted") or "")
            layers = ncnn_layer_kernels(Path(converted), proto) if converted.endswith(".param") else {}
            shapes = {k: v for k, v in tensor_shapes(proto).items() if kernel_kind(k) not in PACK_KINDS}
            kernels = [owner({str(k): v for k, v in row.items()}, shapes, layers)
                       for row in table.to_dict("records")]
            own = [f"{GRAPHS_DIR}/{k}.onnx" if k and kernel_kind(k) not in PACK_KINDS else f"{GRAPHS_DIR}/{graph.name}"
                   for k in kernels]
            table = table.assign(model=graph.name, source="designed", family=DESIGNED_FAMILY,
                                 model_latency_ms=latency, graph=own, kernel=kernels,
                                 kernel_kind=[kernel_kind(k) for k in kernels])
        else:
            table = table.assign(model=model, source="zoo", family=model_family(model), model_latency_ms=latency,
                                 graph=f"{GRAPHS_DIR}/{model}.onnx", kernel="", kernel_kind="")
        frames.append(table)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def kernel_times(rows: pd.DataFrame) -> pd.Series:
    """Each designed kernel's time (ms per inference) in its probe graph: the sum of its rows' mean_ms less the
    profiler's own cost per row, which is its pack's overhead nodes' median time (they do no work, so their time
    is that cost); never below zero."""
    designed = rows[(rows["source"] == "designed") & rows["kernel"].fillna("").ne("")]
    overhead = designed[designed["kernel_kind"] == OVERHEAD].groupby("model")["mean_ms"].median()
    work = designed[~designed["kernel_kind"].isin(PACK_KINDS)]
    per_row = work["model"].map(overhead).fillna(0.0)
    return (work["mean_ms"] - per_row).groupby(work["kernel"]).sum().clip(lower=0.0)
