"""`harness regress --device NAME`: calibrate harness numbers against a device's, per metric and group: every
candidate fit's held-out figures side by side, the fit chosen and why, and the OLS reference diagnostics."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.table import Table

from harness.analysis.run_values import runs_by_engine
from harness.api.calibrating import regress
from harness.calibration.calibrate import (
    ACROSS_FAMILIES,
    AUTO_CANDIDATES,
    Calibration,
    calibrated_metrics,
    group_label,
)
from harness.calibration.engine_choice import AUTO_ENGINE, compare_engine_runs
from harness.calibration.fits import FIT_NAMES
from harness.commands import COMMANDS
from harness.commands.shared import (
    add_across_repeats_option,
    add_device_option,
    add_fit_option,
    add_library_option,
    add_metric_option,
    add_results_options,
    env_default,
    fmt,
    print_json,
    warn,
)
from harness.core.config import resolve_results_dir
from harness.core.errors import DataError
from harness.device.data import DeviceData, load_device
from harness.report.calibration_json import calibration_set_json
from harness.report.carried import carried_note
from harness.report.console import out_console


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "regress", help=COMMANDS["regress"],
        description="Fit device ≈ f(harness) for each metric and group; the fit is chosen by held-out error.",
    )
    add_device_option(parser)
    add_library_option(parser)
    add_metric_option(parser, None, "one metric (default: every metric the device data has)",
                         lambda m: m.calibrated)
    add_fit_option(parser, FIT_NAMES)
    add_across_repeats_option(parser)
    parser.add_argument(
        "--group-by", default=env_default("HARNESS_GROUP_BY") or "cpus",
        help="cpus (default) or a tag column of the device CSV such as family (fitted per cpus and tag)",
    )
    add_results_options(parser, pooled=True, by_runtime=True)
    parser.add_argument("--compare-engines", action="store_true",
                        help="compare the engines the session's runs ran on (onnxruntime, ncnn, litert; --session all "
                             "pools sessions): each one's held-out figures on the models every engine ran, and "
                             "the engine chosen inside each fold as the fit is")
    parser.set_defaults(func=run)


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def comparison_table(calibration: Calibration) -> Table:
    """Every candidate's leave-one-out figures side by side; the `auto` row is the nested estimate."""
    table = Table(title="held-out (leave-one-out) figures", title_justify="left")
    for column in ("fit", "within ±10%", "within ±20%", "MAPE", "Kendall τ", "95% PI coverage", "note"):
        table.add_column(column)
    for row in calibration.comparison:
        name = f"{row['fit']} ✓" if row["chosen"] else row["fit"]
        if "within_10pct" not in row:
            table.add_row(name, "—", "—", "—", "—", "—", row["note"])
            continue
        table.add_row(name, _pct(row["within_10pct"]), _pct(row["within_20pct"]), f"{row['mape_pct']:.1f}%",
                      f"{row['kendall_tau']:.3f}", _pct(row["coverage"]), row["note"])
    return table


def family_table(calibration: Calibration) -> Table | None:
    """The held-out figures per architecture family and across them; None for a single family."""
    rows = calibration.by_family()
    if len(rows) <= 2:  # one family: its row is the across-families row
        return None
    kind = "nested `auto`" if calibration.choice.get("mode") == "auto" else calibration.model.name
    table = Table(title=f"held-out by family ({kind})", title_justify="left")
    for column in ("family", "models", "within ±10%", "within ±20%", "95% PI coverage"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["family"], str(row["n"]), _pct(row["within_10pct"]), _pct(row["within_20pct"]),
                      _pct(row["coverage"]), style="bold" if row["family"] == ACROSS_FAMILIES else None)
    return table


def reference_table(calibration: Calibration) -> Table:
    """The OLS line of the published experiments and its diagnostics, whichever fit was chosen."""
    fit, s = calibration.reference_line, calibration.stats
    table = Table(title="OLS reference and rank agreement", show_header=False, title_justify="left")
    influential = calibration.points[calibration.points["influential"]]
    rows = [
        ("OLS slope ± SE", f"{fmt(fit.slope)} ± {fmt(fit.slope_stderr, 2)}"),
        ("OLS intercept ± SE", f"{fmt(fit.intercept)} ± {fmt(fit.intercept_stderr, 2)}"),
        ("R², p-value", f"{fit.r2:.4f}, {fmt(fit.p_value, 3)}"),
        ("Theil–Sen slope [95%], intercept", f"{fmt(fit.theil_slope)} [{fmt(fit.theil_slope_low)}, "
         f"{fmt(fit.theil_slope_high)}], {fmt(fit.theil_intercept)}"),
        (f"Spearman ρ (p), Kendall τ (p), p {s['rank_p_method']}",
         f"{s['spearman_rho']:.3f} ({fmt(s['spearman_p'], 2)}), {s['kendall_tau']:.3f} ({fmt(s['kendall_p'], 2)})"),
        ("order flips", ", ".join(f"{a} ↔ {b}" for a, b in calibration.flipped_pairs) or "none"),
        (f"influential (Cook's D > {fmt(s['cooks_threshold'], 2)})",
         ", ".join(f"{r.model} ({fmt(r.cooks_d, 2)})" for r in influential.itertuples()) or "none"),
    ]
    for name, value in rows:
        table.add_row(name, value)
    return table


def print_calibration(calibration: Calibration) -> None:
    choice = calibration.choice
    models = calibration.reference_line.n
    out_console.print(f"[bold]{calibration.metric} · {calibration.label} · {models} models[/bold] "
                      f"({calibration.threads}; harness value: the {calibration.harness_value})", highlight=False)
    out_console.print(f"chosen fit: [bold]{choice['chosen']}[/bold]: {calibration.model.equation}", highlight=False)
    out_console.print(f"why: {choice['reason']}", highlight=False)
    if carried := carried_note(calibration):
        out_console.print(carried, highlight=False)
    out_console.print(comparison_table(calibration))
    families = family_table(calibration)
    if families is not None:
        out_console.print(families)
    out_console.print(reference_table(calibration))
    out_console.print()


def engines_table(metric: str, rows: list[dict[str, Any]]) -> Table:
    table = Table(title=f"{metric}: held-out (nested leave-one-out) figures per engine, on the models every engine "
                        "ran", title_justify="left")
    for column in ("engine", "models", "fit", "within ±10%", "within ±20%", "MAPE", "Kendall τ"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["engine"], str(row["models"]), row["fit"], _pct(row["within_10pct"]),
                      _pct(row["within_20pct"]), f"{row['mape_pct']:.1f}%", fmt(row["kendall_tau"], 2))
    return table


def compare(args: argparse.Namespace, results_dir: Path, device: DeviceData) -> int:
    """`--compare-engines`: which engine's timings predict this device best, held out."""
    split, session = runs_by_engine(results_dir, args.session)
    if len(split) < 2:
        held = ", ".join(split) or "none"
        raise DataError(f"--compare-engines: session {session} holds the runs of one engine ({held}); profile the "
                        "device's models with another RUNTIME too and compare with --session all")
    results = {metric: compare_engine_runs(device, split, metric, args.across_repeats, AUTO_CANDIDATES)
               for metric in calibrated_metrics(device, args.metric)}
    if not any(results.values()):
        raise DataError(f"--compare-engines: fewer than 3 of device {device.name}'s models were run on every engine "
                        f"({', '.join(split)}) in session {session}; profile the same models on each")
    if args.json:
        print_json({"session": session, "device": device.name, "engines": results})
        return 0
    for metric, rows in results.items():
        if rows:
            out_console.print(engines_table(metric, rows))
            out_console.print(f"{AUTO_ENGINE}: the (engine, fit) pair chosen again without each model, from the "
                              "others only; `fit` names the engines it took per fold", highlight=False)
    return 0


def run(args: argparse.Namespace) -> int:
    results_dir = resolve_results_dir(args.results_dir)
    if args.compare_engines:
        return compare(args, results_dir, load_device(results_dir, args.device))
    regression = regress(args.device, session=args.session, metric=args.metric, group_by=args.group_by, fit=args.fit,
                         across_repeats=args.across_repeats, library=not args.no_library, runtime=args.runtime,
                         results_dir=results_dir)
    cset, session = regression.calibrations, regression.session
    for note in regression.notes:
        warn(note)
    for skipped in cset.skipped:
        warn(f"{skipped['metric']} {group_label(skipped['group'])}: not fitted: {skipped['reason']}")
    if cset.unmatched_device_models:
        warn(f"device models without harness runs in session {session}: {', '.join(cset.unmatched_device_models)}")
    if args.json:
        print_json({"session": session, **calibration_set_json(cset)})
        return 0
    for calibration in cset.calibrations:
        print_calibration(calibration)
    return 0
