"""`harness ops MODEL`: the per-operator table of a model profiled with PER_OP=1 (`harness profile --per-op`).

Every profiled inference of the model's runs in the session (default: the newest session that profiled it) is
pooled, per CPUS value. Rows are in execution order, or the N slowest with --top N; --by type sums them per
op type, and, for a session with several CPUS values, what the extra cores changed per op type. The coverage
line sets the per-op sum against the headline (steady-phase) latency. --device NAME adds the device's per-op
profile (imported from a benchmark_model log with --enable_op_profiling=true) beside the harness's, op kind by
op kind: the share of each side's operator time, and their ratio. --engines sets the model's per-op profile on
every engine that profiled it (the newest session of each: onnxruntime, ncnn) side by side, op kind by op kind.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pandas as pd
from rich.table import Table

from harness.analysis.model_runs import profiled_runs
from harness.analysis.per_op import PerOp, pooled
from harness.commands import COMMANDS
from harness.commands.shared import fmt, print_json, warn
from harness.core.config import resolve_results_dir
from harness.core.errors import ConfigError, DataError
from harness.core.records import RunRecord
from harness.core.storage import write_bytes_atomically
from harness.report.console import out_console

TABLE_HEADINGS = {"node_index": "#", "node": "node", "onnx_node": "ONNX node", "op_type": "op type",
                  "input_shapes": "inputs", "output_shapes": "outputs", "macs": "MMACs", "param_bytes": "param KiB",
                  "calls": "calls", "mean_ms": "mean ms", "median_ms": "median ms", "share": "share"}
TYPE_HEADINGS = {"op_type": "op type", "nodes": "nodes", "macs": "MMACs", "mean_ms": "mean ms", "share": "share"}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("ops", help=COMMANDS["ops"],
                                   description=__doc__)
    parser.add_argument("model", metavar="MODEL", help="model name as profiled, model file or zoo name")
    parser.add_argument("--session", help="session id or path (default: the newest that profiled MODEL per op)")
    parser.add_argument("--cpus", type=float, help="only the runs at this CPUS (default: every CPUS value)")
    parser.add_argument("--top", type=int, metavar="N", help="the N slowest rows instead of every node in order")
    parser.add_argument("--by", choices=["node", "type"], default="node", help="rows per node (default) or op type")
    parser.add_argument("--timeline", type=Path, metavar="PNG",
                        help="also draw the first run's timeline (phases, one profiled inference) to this PNG")
    parser.add_argument("--device", help="also show this device's per-op profile of the model beside the harness's "
                                         "(a device whose measurements the harness holds: a name given to "
                                         "import-device)")
    parser.add_argument("--engines", action="store_true",
                        help="also show the model's per-op time on every engine that profiled it, kind by kind")
    parser.add_argument("--results-dir", help="results directory (default: RESULTS_DIR of the profile)")
    parser.add_argument("--json", action="store_true", help="print JSON only, on stdout")
    parser.set_defaults(func=run)


def device_comparisons(results_dir: Path, device_name: str, model_name: str,
                       tables: dict[float, PerOp]) -> dict[float, dict[str, Any]]:
    """Per CPUS value, the device's profile of the model beside the harness's (one line naming the fix if none)."""
    from harness.analysis.device_ops import compare_device, require_device_profile
    from harness.device.data import load_device

    device = load_device(results_dir, device_name)
    return {cpus: compare_device(require_device_profile(device, model_name, cpus), per_op)
            for cpus, per_op in tables.items()}


def engine_comparison(results_dir: Path, model: str, cpus: float | None) -> tuple[float, dict[str, Any]]:
    """The model's per-op tables on every engine that profiled it, at `cpus` (default: the fewest CPUS all have)."""
    from harness.analysis.device_ops import compare_engines
    from harness.analysis.model_runs import profiled_by_engine

    found = profiled_by_engine(results_dir, model)
    if len(found) < 2:
        raise DataError(f"--engines: {model!r} has a per-op profile on {', '.join(found) or 'no engine'} only; "
                        f"profile it with --per-op --runtime ncnn (or onnxruntime) too")
    common = sorted(set.intersection(*({float(r["cpus"]) for r in runs} for _, runs in found.values())))
    if not common or (cpus is not None and cpus not in common):
        raise ConfigError(f"--engines: no CPUS value every engine profiled {model!r} at"
                          f"{'' if cpus is None else f' is {cpus:g}'} (they have: {common or 'none in common'})")
    at = common[0] if cpus is None else cpus
    tables = {engine: pooled(session_dir, [r for r in runs if float(r["cpus"]) == at])
              for engine, (session_dir, runs) in found.items()}
    return at, compare_engines(tables)


def tables_by_cpus(session_dir: Path, runs: list[RunRecord], cpus: float | None) -> dict[float, PerOp]:
    values = sorted({float(r["cpus"]) for r in runs})
    if cpus is not None:
        if cpus not in values:
            raise ConfigError(f"--cpus {cpus:g}: the per-op runs are at CPUS {values}; pick one of them")
        values = [cpus]
    return {value: pooled(session_dir, [r for r in runs if float(r["cpus"]) == value]) for value in values}


def _cell(column: str, value: Any) -> str:
    if value is None or value is pd.NA or (isinstance(value, float) and pd.isna(value)):
        return "—"
    if column == "macs":
        return f"{value / 1e6:.3f}"
    if column == "param_bytes":
        return f"{value / 1024:.1f}"
    if column == "share":
        return f"{value:.1%}"
    if column == "calls":
        return f"{value:g}"
    return fmt(value) if isinstance(value, float) else str(value)


def render(frame: pd.DataFrame, headings: dict[str, str], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for column, heading in headings.items():
        table.add_column(heading, justify="right" if pd.api.types.is_numeric_dtype(frame[column]) else "left")
    for row in frame.itertuples(index=False):
        table.add_row(*(_cell(column, getattr(row, column)) for column in headings))
    return table


def selected(per_op: PerOp, by: str, top: int | None) -> pd.DataFrame:
    frame = per_op.by_type if by == "type" else per_op.table
    if top is not None:
        if top < 1:
            raise ConfigError(f"--top {top}: give a number of rows >= 1")
        frame = frame.sort_values("mean_ms", ascending=False).head(top)
    return frame


def run(args: argparse.Namespace) -> int:
    """The tables (or JSON) first, then the timeline file: a disk that refuses it still leaves the answer printed."""
    results_dir = resolve_results_dir(args.results_dir)
    session_dir, runs = profiled_runs(results_dir, args.model, args.session)
    tables = tables_by_cpus(session_dir, runs, args.cpus)
    device = device_comparisons(results_dir, args.device, runs[0]["model_name"], tables) if args.device else {}
    engines = engine_comparison(results_dir, args.model, args.cpus) if args.engines else None
    if args.json:
        print_json({"model": args.model, "session": session_dir.name,
                    "tables": [{"cpus": cpus, **per_op.to_json(), **({"device": device[cpus]} if device else {})}
                               for cpus, per_op in tables.items()],
                    **({"engines": {"cpus": engines[0], **engines[1]}} if engines else {})})
    else:
        print_tables(args, session_dir, runs, tables, device)
        if engines:
            from harness.analysis.device_ops import engines_table
            out_console.print(engines_table(engines[1], f"{args.model} · cpus={engines[0]:g}"))
    if args.timeline:
        from harness.report.ops import timeline_png

        write_bytes_atomically(args.timeline, timeline_png(session_dir, runs[0]))
    return 0


def print_tables(args: argparse.Namespace, session_dir: Path, runs: list[RunRecord], tables: dict[float, PerOp],
                 device: dict[float, dict[str, Any]]) -> None:
    """Each CPUS value's table (and the device's beside it), then what the extra cores sped up."""
    for cpus, per_op in tables.items():
        n_runs = sum(1 for r in runs if float(r["cpus"]) == cpus)
        title = (f"{args.model} · cpus={cpus:g} · {per_op.framework} · {per_op.iterations} profiled inferences "
                 f"over {n_runs} runs · session {session_dir.name}")
        headings = TYPE_HEADINGS if args.by == "type" else TABLE_HEADINGS
        out_console.print(render(selected(per_op, args.by, args.top), headings, title))
        coverage = per_op.coverage
        if coverage["coverage"] is not None and coverage["coverage"] < 0.8:
            warn(coverage["line"])
        else:
            out_console.print(f"coverage: {coverage['line']}", highlight=False, soft_wrap=True)
        if device:
            from harness.analysis.device_ops import device_table

            out_console.print(device_table(device[cpus], f"{args.model} · cpus={cpus:g} · device {args.device}"))
    if args.by == "type" and len(tables) > 1:
        from harness.analysis.op_deltas import deltas_table, op_deltas

        (low, first), *rest = tables.items()
        for cpus, per_op in rest:  # what the extra cores sped up, op type by op type
            out_console.print(deltas_table(op_deltas(first, per_op), f"cpus={low:g}", f"cpus={cpus:g}",
                                      f"{args.model} · cpus={cpus:g} against cpus={low:g}"))
