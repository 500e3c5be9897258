"""Kernel rows for the predictor: from a kernel table (harness.kernels.table's rows.csv), or straight from sessions
profiled with PER_OP=1, in the same columns, and each row joined to the kernel detection finds in its graph.

A session's models give one table each, pooled over its runs (each node's median of the runs' figures:
median_of_runs), and their end-to-end latency as the session measured it without the profiler (the median of the
runs' headline latency)."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from harness.analysis.per_op import BETWEEN_OPS, OUTSIDE_RUN, TABLE_CSV, run_dir
from harness.core import metric_registry
from harness.core.config import dim_sizes
from harness.kernels.detect import blocked_layouts, detect, group_nodes
from harness.kernels.features import inserted_features, set_layout, shape_of, with_features
from harness.kernels.graph import Graph, Kernel, node_kind
from harness.kernels.rules import Rules
from harness.models.families import model_family
from harness.store.results import load_runs

GAP_ROWS = (BETWEEN_OPS, OUTSIDE_RUN)
TIME_COLUMN = "median_ms"
"""A kernel's time: the median over the profiled inferences, which a busy spell of the machine moves less than the
mean."""
RUN_TIMES = ("mean_ms", TIME_COLUMN)
"""The columns median_of_runs takes the median of."""


@dataclass(frozen=True)
class ModelTable:
    """One profiled model: its per-op rows (operators only), graph, dims and end-to-end latency."""

    model: str
    model_path: str
    dims: dict[str, int]
    rows: pd.DataFrame
    latency_ms: float


def session_tables(session_dirs: Iterable[Path], engine: str) -> list[ModelTable]:
    """Each model these sessions profiled per-op on `engine`: its runs' tables pooled (median of their mean_ms)."""
    value = metric_registry.get(metric_registry.LATENCY).value
    found: list[ModelTable] = []
    for session in session_dirs:
        per_model: dict[str, list] = {}
        for run in load_runs(Path(session)):
            per_op = run.get("per_op") or {}
            if run.ok and per_op.get("framework") == engine and (run_dir(session, run.run_id) / TABLE_CSV).is_file():
                per_model.setdefault(run.model_name, []).append(run)
        for model, runs in per_model.items():
            tables = [pd.read_csv(run_dir(session, run.run_id) / TABLE_CSV) for run in runs]
            tables = [t[~t["op_type"].isin(GAP_ROWS)] for t in tables]
            first = median_of_runs(tables)
            latencies = [v for v in (value(run.line) for run in runs) if v is not None]
            line = runs[0].line
            found.append(ModelTable(model, line["model_path"], dim_sizes(line.get("model_dims") or ""),
                                    first.reset_index(drop=True), statistics.median(latencies) if latencies else 0.0))
    return found


def median_of_runs(tables: list[pd.DataFrame]) -> pd.DataFrame:
    """One per-op table of a model's runs (each with one row per node): each node's times the median of its runs',
    the runs' nodes matched by name (onnxruntime runs independent nodes in another order from one run to the next,
    so a node's position is no key). The least of the runs was tried: it made the models' own per-op sums track
    their latency better at CPUS=1 and worse at CPUS=2, and predicted held-out families no better (docs/kernels.md).
    Runs whose nodes differ keep the first run's table."""
    first = tables[0].reset_index(drop=True)
    keys = ["node", "op_type"]
    keyed = [t.assign(seen=t.groupby(keys, dropna=False, sort=False).cumcount()).set_index([*keys, "seen"])
             for t in tables]
    if any(len(k) != len(keyed[0]) or not k.index.isin(keyed[0].index).all() for k in keyed[1:]):
        return first
    middle = pd.concat([k[list(RUN_TIMES)] for k in keyed]).groupby(level=[0, 1, 2], dropna=False, sort=False)
    median = middle.median()
    return first.assign(**{column: median[column].reindex(keyed[0].index).to_numpy() for column in RUN_TIMES})


def as_table_rows(tables: Iterable[ModelTable]) -> pd.DataFrame:
    """The models' rows in a kernel table's columns (source zoo; graph: the model's file)."""
    frames = []
    for table in tables:
        frame = table.rows.copy()
        frame["model"], frame["source"], frame["family"] = table.model, "zoo", model_family(table.model)
        frame["model_latency_ms"], frame["graph"] = table.latency_ms, table.model_path
        frames.append(frame)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def join_kernels(graph: Graph, rows: pd.DataFrame, rules: Rules) -> list[tuple[Kernel, float]]:
    """Each engine row as (the kernel detection finds for it, its TIME_COLUMN ms): a row that names a graph node gets
    the kernel anchored there (its kind and features from the graph, its layout as detection decides it); a row the
    engine inserted gets a kernel of its own shape. A row whose node is no kernel's anchor (a rule the engine broke
    here) keeps its node alone, in its kernel's layout."""
    kernels, owner = group_nodes(graph, rules)
    blocked = blocked_layouts(graph, rules, kernels, owner)
    by_anchor = {kernel.nodes[0]: position for position, kernel in enumerate(kernels)}
    index = {node["name"]: node["index"] for node in graph.nodes}
    joined = []
    for row in rows.itertuples():
        name = row.onnx_node if isinstance(row.onnx_node, str) and row.onnx_node else None
        if name is None or name not in index:
            kernel = Kernel(str(row.op_type), [], shape_of(str(row.input_shapes)))
            kernel.features = inserted_features(kernel.shape)
        else:
            node = index[name]
            found = kernels[by_anchor[node]] if node in by_anchor else None
            kernel = with_features(graph, Kernel(found.kind, list(found.nodes)) if found else
                                   Kernel(node_kind(graph.nodes[node]), [node]))
            set_layout(kernel.features, node in owner and blocked[owner[node]], rules.block)
        joined.append((kernel, float(str(getattr(row, TIME_COLUMN)))))
    return joined


def whole_kernel(graph: Graph, rows: pd.DataFrame, rules: Rules) -> list[tuple[Kernel, float]]:
    """A designed kernel's rows that name no graph node (ncnn's layers, an imported tool's lines) as the one kernel its
    own graph holds, at the sum of their TIME_COLUMN ms (their mean_ms where a tool printed means alone: benchncnn,
    benchmark_model): what the engine spent running it, whatever layers it made of it (ncnn runs a MatMul as a Split,
    two Reshapes and a Gemm). A kernel whose graph detection splits into several (a squeeze-excite block, a GELU)
    gives none, since nothing says how its time divides."""
    kernels = detect(graph, rules)
    ms = rows[TIME_COLUMN].astype(float).fillna(rows["mean_ms"].astype(float))
    return [(kernels[0], float(ms.sum()))] if len(kernels) == 1 else []


def row_kind(graph: Graph, row: Any) -> str:
    """The kernel kind of an engine row: its graph node's kind where it names one, else the engine's op type (a kernel
    the engine inserted)."""
    name = getattr(row, "onnx_node", None)
    index = {node["name"]: node["index"] for node in graph.nodes}
    if isinstance(name, str) and name in index:
        return node_kind(graph.nodes[index[name]])
    return str(row.op_type)
