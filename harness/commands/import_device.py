"""`harness import-device CSV --device NAME`: validate and store on-device measurements."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.analysis.run_values import resolve_results_dir
from harness.commands import COMMANDS
from harness.commands._analysis import add_device_option, fmt, stdout, warn
from harness.device.data import import_device_csv
from harness.store.results import iter_all_runs


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "import-device", help=COMMANDS["import-device"],
        description="Validate a CSV of on-device measurements and store it beside the harness results.",
    )
    parser.add_argument("csv", type=Path, help="CSV with a model column and metric columns such as latency_ms")
    add_device_option(parser)
    parser.add_argument("--results-dir", help="results directory (default: RESULTS_DIR of the profile)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    results_dir = resolve_results_dir(args.results_dir)
    harness_models = sorted({run["model_name"] for run in iter_all_runs(results_dir) if "model_name" in run})
    result = import_device_csv(args.csv, args.device, results_dir, harness_models)
    for conversion in result.conversions:
        stdout.print(
            f"converted {conversion['from']} → {conversion['to']} (× {fmt(conversion['factor'], 6)}; "
            f"{conversion['note']})", highlight=False,
        )
    for duplicate in result.duplicates:
        stdout.print(
            f"averaged {duplicate['n']} rows of {duplicate['model']}"
            + (f" at cpus={fmt(duplicate['cpus'])}" if duplicate.get("cpus") is not None else "")
            + f" (lines {', '.join(map(str, duplicate['lines']))}); n={duplicate['n']} kept",
            highlight=False,
        )
    if result.unknown_models:
        where = "any harness run" if harness_models else "a harness run (none yet)"
        warn(
            f"{len(result.unknown_models)} of {result.models} device models match no model of {where} under "
            f"{results_dir}: {', '.join(result.unknown_models)}; profile them, or map names with a harness_model column"
        )
    stdout.print(
        f"{result.status}: device {result.device}, {result.rows} rows, {result.models} models → {result.path}",
        highlight=False,
    )
    return 0
