"""`harness import-device FILE... --device NAME`: store on-device measurements, from a device CSV or the text
output of the device's own tools (benchmark_model, onnxruntime_perf_test, tegrastats, jtop, dumpsys meminfo, a
power meter's CSV).

Every file of a device goes into one import (it replaces what the device held); several files of one model are
its repeats, whose median the fits use. A log that does not name its model is given one: MODEL=FILE, or
--model NAME for every such file. A power log gives energy per inference with --inferences N (the run's count),
or beside the same model's benchmark log (its mean latency); --idle FILE, a power log of the idle device, or
--idle-s SECONDS, each log's idle start, gives the dynamic energy above idle (docs/energy.md).
"""

from __future__ import annotations

import argparse
import difflib
from pathlib import Path
from typing import Any

import pandas as pd

from harness.commands import COMMANDS
from harness.commands.shared import add_device_option, fmt, print_json, warn
from harness.core.config import resolve_results_dir
from harness.device.importer import DeviceFile, EnergyRun, ImportResult, import_device
from harness.device.library import is_member, set_member
from harness.device.log_formats import FORMAT_NAMES
from harness.report.console import out_console
from harness.store.results import iter_all_runs


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "import-device", help=COMMANDS["import-device"],
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("files", nargs="+", metavar="[MODEL=]FILE",
                        help="device CSVs and tool logs; MODEL= names the model a log stands for")
    add_device_option(parser)
    parser.add_argument("--format", choices=FORMAT_NAMES,
                        help="read every FILE in this format instead of telling it from the content")
    parser.add_argument("--model", help="the model of the logs that do not name theirs (and have no MODEL=)")
    parser.add_argument("--inferences", type=int, metavar="N",
                        help="inferences the power logs' timed phase ran, for energy per inference")
    parser.add_argument("--interval", type=float, metavar="MS",
                        help="the --interval tegrastats ran with (its lines carry no finer time)")
    parser.add_argument("--idle", type=Path, metavar="FILE", help="a power log of the idle device, for the energy "
                        "above idle (dynamic_energy_mj)")
    parser.add_argument("--idle-s", type=float, metavar="SECONDS", help="the first SECONDS of each power log are "
                        "the idle device, before the run (instead of --idle)")
    parser.add_argument("--library", action="store_true",
                        help="the device joins the device library: other devices' calibrations learn from it (an "
                             "import joins nothing without it; `harness devices leave NAME` takes it out)")
    parser.add_argument("--results-dir", help="results directory (default: RESULTS_DIR of the profile)")
    parser.add_argument("--json", action="store_true", help="print what was imported, per model, as JSON")
    parser.set_defaults(func=run)


def _metrics_text(metrics: dict[str, Any]) -> str:
    return ", ".join(f"{name} {fmt(float(value))}" for name, value in metrics.items())


def _model_rows(result: ImportResult) -> list[dict[str, Any]]:
    """One entry per stored row: the model, its thread count, the repeats behind it, each metric's median."""
    rows = []
    for row, provenance in zip(result.table.to_dict(orient="records"), result.provenance, strict=True):
        rows.append({**provenance, "values": {m: row[m] for m in result.metrics if not pd.isna(row[m])},
                     "tags": {t: row[t] for t in result.tags if row[t] is not None}})
    return rows


def _sources_text(sources: list[str]) -> str:
    """`d.csv:2, 4, 5` for lines of one CSV, `a.log, b.log` for logs."""
    lines: dict[str, list[str]] = {}
    for source in sources:
        path, _, line = source.rpartition(":")
        if path and line.isdigit():
            lines.setdefault(path, []).append(line)
        else:
            lines.setdefault(source, [])
    return ", ".join(f"{path}:{', '.join(numbers)}" if numbers else path for path, numbers in lines.items())


def _say(text: str) -> None:
    """A line as it is: file and model names may hold `[/x]`, which rich would read as markup."""
    out_console.print(text, highlight=False, markup=False)


def _print(result: ImportResult, harness_models: list[str], results_dir: str) -> None:
    for source in result.sources:
        if source["format"] != "csv":
            threads = f", threads {fmt(source['cpus'])}" if source.get("cpus") else ""
            ops = f", per-op profile of {source['op_types']} node types" if source["op_types"] else ""
            _say(f"read {source['name']} ({source['format']}): {source['model']}{threads}: "
                 f"{_metrics_text(source['metrics'])}{ops}")
    for conversion in result.conversions:
        _say(f"converted {conversion['from']} → {conversion['to']} (× {fmt(conversion['factor'], 6)}; "
             f"{conversion['note']})")
    for row in result.provenance:
        at = f" at cpus={fmt(row['cpus'])}" if row.get("cpus") is not None else ""
        if row["n"] > 1:
            _say(f"{row['n']} repeats of {row['model']}{at} ({_sources_text(row['sources'])}): their median "
                 f"kept, n={row['n']}")
        elif len(row["sources"]) > 1:
            _say(f"{row['model']}{at}: one row from {_sources_text(row['sources'])}")
    if result.unknown_models:
        where = "any harness run" if harness_models else "a harness run (none yet)"
        warn(f"{len(result.unknown_models)} of {result.models} device models match no model of {where} under "
             f"{results_dir}: {', '.join(_with_closest(result.unknown_models, harness_models))}; profile them, or "
             "map names with a harness_model column or MODEL=FILE")
    per_op = (f", per-op profiles of {result.op_profiles} model{'s' if result.op_profiles > 1 else ''}"
              if result.op_profiles else "")
    _say(f"{result.status}: device {result.device}, {result.rows} rows, {result.models} models{per_op} → "
         f"{result.path}")


def _with_closest(unknown: list[str], harness_models: list[str]) -> list[str]:
    """Each unknown device model, with the harness model whose name is closest where one is close (a typo)."""
    named = []
    for model in unknown:
        close = difflib.get_close_matches(model, harness_models, n=1, cutoff=0.75)
        named.append(f"{model} (did you mean {close[0]}?)" if close else model)
    return named


def run(args: argparse.Namespace) -> int:
    results_dir = resolve_results_dir(args.results_dir)
    harness_models = sorted({run["model_name"] for run in iter_all_runs(results_dir) if "model_name" in run})
    files = [DeviceFile.from_argument(argument) for argument in args.files]
    result = import_device(files, args.device, results_dir, harness_models, args.format, args.model,
                           EnergyRun(args.inferences, args.interval, args.idle, args.idle_s))
    if args.library:
        set_member(results_dir, result.device, True, "import-device --library")
    member = is_member(results_dir, result.device)
    if args.json:
        print_json({"device": result.device, "status": result.status, "path": str(result.path),
                    "models": _model_rows(result), "sources": result.sources, "conversions": result.conversions,
                    "op_profiles": result.op_profiles, "unknown_models": result.unknown_models, "library": member})
        return 0
    _say(f"device library: {result.device} {'is in it' if member else 'is not in it'}: other devices' calibrations "
         + ("learn from it (`harness devices leave " + result.device + "` takes it out)" if member else
            f"do not learn from it (`harness devices join {result.device}`, or import with --library, to add it)"))
    _print(result, harness_models, str(results_dir))
    return 0
