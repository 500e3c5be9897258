"""`harness compare A B`: two models' static facts and measured medians side by side, with B/A ratios.

Each model's runs come from the newest session that holds it, so `make profile MODEL=x` then
`make profile MODEL=x_int8_static` compares the latest measurement of each. Medians over repeats with the
95% CI of the median where there are 6 or more (harness.analysis.stats.summarize); a ratio below 1 means B is smaller
(faster, lighter). It prints what harness.compare returns.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.table import Table

from harness.analysis.comparison import CHECKED_SETTINGS, MEASURED
from harness.analysis.stats import UNSTABLE_RULE
from harness.api.queries import compare
from harness.commands import COMMANDS
from harness.commands.shared import fmt, print_json, warn
from harness.core.config import resolve_results_dir
from harness.core.errors import ConfigError
from harness.report.console import out_console


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "compare", help=COMMANDS["compare"],
        description=__doc__,
    )
    parser.add_argument("models", nargs=2, metavar="MODEL",
                        help="A then B: model names as profiled, model files (matched by content) or zoo names")
    parser.add_argument("--cpus", type=float, help="compare the runs at this CPUS (default: every CPUS both have)")
    parser.add_argument("--results-dir", help="results directory (default: RESULTS_DIR of the profile)")
    parser.add_argument("--per-op", action="store_true",
                        help="also time per op type, B against A (both profiled with --per-op; see `harness ops`)")
    parser.add_argument("--device", help="with --per-op: also each model's per-op profile on this device beside the "
                                         "harness's (a device whose measurements the harness holds, imported from "
                                         "benchmark_model --enable_op_profiling logs)")
    parser.add_argument("--json", action="store_true", help="print JSON only, on stdout")
    parser.set_defaults(func=run)


def _warn_mismatches(comparison: dict[str, Any]) -> None:
    a, b = comparison["a"], comparison["b"]
    for key in CHECKED_SETTINGS:
        if a["settings"][key] != b["settings"][key]:
            warn(f"{key} differs: {a['settings'][key]} for {a['model']} vs {b['settings'][key]} for {b['model']}; "
                 "the columns were measured under different conditions, profile both with the same ENV")
    for side in (a, b):
        if side["n_ok"] < side["n_runs"]:
            warn(f"{side['model']}: only {side['n_ok']} of {side['n_runs']} runs ok ({side['statuses']}); "
                 "its measured rows use the ok runs only")
        unstable = [m.label for m in MEASURED if side["metrics"][m.name]["unstable"]]
        if unstable:
            warn(f"{side['model']}: {', '.join(unstable)} vary ({UNSTABLE_RULE}); raise REPEATS or ITERATIONS")


def _cell(value: Any, summary: dict[str, Any] | None) -> str:
    text = f"{value:,}" if isinstance(value, int) else fmt(value)
    if summary and summary.get("ci95_low") is not None and summary["ci95_low"] != summary["ci95_high"]:
        text += f" [{fmt(summary['ci95_low'], 3)}, {fmt(summary['ci95_high'], 3)}]"
    return text + ("*" if summary and summary.get("unstable") else "")


def _table(comparison: dict[str, Any]) -> Table:
    a, b = comparison["a"], comparison["b"]
    table = Table(title=f"compare · cpus={comparison['cpus']:g} · median [95% CI] over ok runs · * unstable",
                  title_justify="left")
    table.add_column("metric")
    for side in (a, b):
        table.add_column(f"{side['model']}\n{side['session']} · {side['n_ok']}/{side['n_runs']} ok", justify="right")
    table.add_column("B/A", justify="right")
    for row in comparison["rows"]:
        ratio = f"{row['ratio']:.3f}x" if row["ratio"] is not None else "—"
        table.add_row(row["metric"], _cell(row["a"], row.get("a_summary")), _cell(row["b"], row.get("b_summary")),
                      ratio)
    return table


def _device_per_op(results_dir: Path, device_name: str,
                   comparison: dict[str, Any]) -> dict[str, dict[str, Any] | None]:
    """Each model's device profile beside its harness profile; None, with a warning, where the device has none."""
    from harness.analysis.device_ops import compare_device, device_profile_for
    from harness.analysis.model_runs import profiled_runs
    from harness.analysis.per_op import pooled
    from harness.device.data import load_device

    device, cpus = load_device(results_dir, device_name), comparison["cpus"]
    found: dict[str, dict[str, Any] | None] = {}
    for key in ("a", "b"):
        side = comparison[key]
        profile = device_profile_for(device, side["model_name"], cpus)
        if profile is None:
            warn(f"device {device_name} has no per-op profile of {side['model_name']}; import a benchmark_model log "
                 "run with --enable_op_profiling=true (docs/device-logs.md)")
            found[side["model"]] = None
            continue
        session_dir, runs = profiled_runs(results_dir, side["model"], None)
        found[side["model"]] = compare_device(profile, pooled(session_dir, [r for r in runs
                                                                          if float(r["cpus"]) == cpus]))
    return found


def run(args: argparse.Namespace) -> int:
    results_dir = resolve_results_dir(args.results_dir)
    model_a, model_b = args.models
    comparisons = compare(model_a, model_b, cpus=args.cpus, results_dir=results_dir).comparisons
    for comparison in comparisons:
        _warn_mismatches(comparison)
    if args.device and not args.per_op:
        raise ConfigError("--device compares per-op profiles: give --per-op too")
    if args.per_op:
        from harness.analysis.op_deltas import per_op_deltas

        for comparison in comparisons:
            comparison["per_op"] = per_op_deltas(results_dir, model_a, model_b, comparison["cpus"])
            if args.device:
                comparison["device_per_op"] = _device_per_op(results_dir, args.device, comparison)
    if args.json:
        print_json({"models": list(args.models), "comparisons": comparisons})
        return 0
    for comparison in comparisons:
        out_console.print(_table(comparison))
        if args.per_op:
            from harness.analysis.op_deltas import deltas_table

            out_console.print(deltas_table(comparison["per_op"], model_a, model_b, f"cpus={comparison['cpus']:g}"))
            for side, device in (comparison.get("device_per_op") or {}).items():
                if device is not None:
                    from harness.analysis.device_ops import device_table

                    title = f"{side} · cpus={comparison['cpus']:g} · device {args.device}"
                    out_console.print(device_table(device, title))
    return 0
