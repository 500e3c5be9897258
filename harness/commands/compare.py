"""`harness compare A B`: two models' static facts and measured medians side by side, with B/A ratios.

Each model's runs come from the newest session that holds it, so `make profile MODEL=x` then
`make profile MODEL=x_int8_static` compares the latest measurement of each. Medians over repeats with the
95% CI of the median where there are 6 or more (harness.analysis.stats.summarize); a ratio below 1 means B is smaller
(faster, lighter).
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from typing import Any

from rich.table import Table

from harness.analysis.model_runs import model_matcher
from harness.analysis.stats import UNSTABLE_RULE, metric_value, summarize
from harness.commands import COMMANDS
from harness.commands.shared import fmt, print_json, warn
from harness.core import conditions, metric_registry
from harness.core.config import resolve_results_dir
from harness.core.errors import ConfigError, DataError
from harness.core.records import RunRecord
from harness.report.console import out_console
from harness.store.results import list_sessions, load_runs

# (row label, where in model_facts, scale) for facts read from the graph, the same for every run of a model
STATIC_ROWS = (("size MiB", "size_mib", 1.0), ("params", "params", 1.0), ("MMACs", "macs", 1e-6),
               ("layers", "layers", 1.0))
MEASURED = tuple(metric_registry.get(name) for name in metric_registry.COMPARE_METRICS)
"""Measured rows, each summarised over a model's ok runs."""
# Labels worth a warning when they differ; what must match (harness.core.conditions) is refused when it differs.
CHECKED_SETTINGS = ("device_name",)


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
                                         "harness's (imported from benchmark_model --enable_op_profiling logs)")
    parser.add_argument("--json", action="store_true", help="print JSON only, on stdout")
    parser.set_defaults(func=run)


def latest_runs(results_dir: Path, arg: str) -> tuple[str, list[RunRecord]]:
    """(session id, runs of the model) from the newest session holding `arg`."""
    belongs = model_matcher(arg)
    for session_dir in reversed(list_sessions(results_dir)):
        runs = [run for run in load_runs(session_dir) if belongs(run)]
        if runs:
            return session_dir.name, runs
    raise DataError(f"no runs of model {arg!r} under {results_dir}; run `make profile MODEL={arg}` first")


def _side(arg: str, session: str, runs: list[RunRecord]) -> dict[str, Any]:
    """One column: facts and settings from the latest run, each measured metric summarised over the ok runs."""
    ok = [run for run in runs if run.get("status") == "ok"]
    statuses = Counter(run.get("status", "error") for run in runs)
    latest = runs[-1]
    return {
        "model": arg, "model_name": latest.get("model_name"), "session": session, "cpus": float(latest["cpus"]),
        "n_runs": len(runs), "n_ok": len(ok), "statuses": dict(statuses),
        "facts": latest.get("model_facts") or {"size_mib": latest.get("model_size_mib")},
        "settings": {key: latest.get(key) for key in CHECKED_SETTINGS},
        "metrics": {m.name: summarize([value for run in ok if (value := metric_value(run, m.name)) is not None])
                    .as_dict() for m in MEASURED},
    }


def _ratio(a: float | None, b: float | None) -> float | None:
    return b / a if a and b is not None else None


def _rows(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for label, key, scale in STATIC_ROWS:
        va, vb = (side["facts"].get(key) for side in (a, b))
        va, vb = (v * scale if isinstance(v, (int, float)) and scale != 1.0 else v for v in (va, vb))
        rows.append({"metric": label, "key": key, "a": va, "b": vb, "ratio": _ratio(va, vb)})
    for measured in MEASURED:
        metric = measured.name
        sa, sb = a["metrics"][metric], b["metrics"][metric]
        rows.append({"metric": f"{measured.label} {measured.unit}", "key": metric, "a": sa["median"], "b": sb["median"],
                     "ratio": _ratio(sa["median"], sb["median"]), "a_summary": sa, "b_summary": sb})
    return rows


def compare(results_dir: Path, model_a: str, model_b: str, cpus: float | None = None) -> list[dict[str, Any]]:
    """One comparison per CPUS value both models were measured at (or the one asked for)."""
    sessions = [latest_runs(results_dir, model) for model in (model_a, model_b)]
    cpus_sets = [{float(run["cpus"]) for run in runs} for _, runs in sessions]
    common = sorted(cpus_sets[0] & cpus_sets[1])
    if cpus is not None:
        if cpus not in common:
            raise ConfigError(f"--cpus {cpus:g}: {model_a} has runs at {sorted(cpus_sets[0])}, {model_b} at "
                              f"{sorted(cpus_sets[1])}; pick a value both have")
        common = [cpus]
    if not common:
        raise DataError(f"{model_a} was measured at CPUS {sorted(cpus_sets[0])} and {model_b} at "
                        f"{sorted(cpus_sets[1])}; profile both with the same CPUS to compare them")
    comparisons = []
    for value in common:
        at = [[r for r in runs if float(r["cpus"]) == value] for _, runs in sessions]
        keys = [k for k in conditions.differing_keys(r.line for r in at[0] + at[1]) if k != "model_sha256"]
        if keys:
            raise DataError(f"{model_a} and {model_b} were measured under different conditions at cpus={value:g} "
                            f"({'; '.join(conditions.describe(side[-1]['conditions'], keys) for side in at)}); "
                            "profile both under one profile to compare them")
        sides = [_side(model, session, runs) for model, (session, _), runs in zip((model_a, model_b), sessions, at,
                                                                                strict=True)]
        comparisons.append({"cpus": value, "a": sides[0], "b": sides[1], "rows": _rows(*sides)})
    return comparisons


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
    comparisons = compare(results_dir, model_a, model_b, cpus=args.cpus)
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
