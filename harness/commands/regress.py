"""`harness regress --device NAME`: fit device ≈ a · harness + b per metric and group, with diagnostics."""

from __future__ import annotations

import argparse

from rich.table import Table

from harness.calibrate import Calibration, calibrate_runs, group_label
from harness.commands import _analysis as ui
from harness.device_data import load_device
from harness.run_values import resolve_results_dir, select_runs


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "regress", help="calibrate harness numbers against a device's (OLS + Theil–Sen, LOO, ρ/τ, Cook's D)",
        description="Fit device ≈ slope · harness + intercept for each metric and group.",
    )
    ui.add_device_option(parser)
    ui.add_metric_option(parser, None, "one metric (default: every metric the device data has)")
    parser.add_argument(
        "--group-by", default=ui.env_default("HARNESS_GROUP_BY") or "cpus",
        help="cpus (default) or a tag column of the device CSV such as family (fitted per cpus and tag)",
    )
    ui.add_results_options(parser, pooled=True)
    parser.set_defaults(func=run)


def calibration_table(calibration: Calibration) -> Table:
    fit, s, fmt = calibration.fit, calibration.stats, ui.fmt
    table = Table(
        title=f"{calibration.metric} · {calibration.label} · {fit.n} models: "
        f"device ≈ {fmt(fit.slope)} · harness {'+' if fit.intercept >= 0 else '−'} {fmt(abs(fit.intercept))}",
        show_header=False, title_justify="left",
    )
    influential = calibration.points[calibration.points["influential"]]
    rows = [
        ("OLS slope ± SE", f"{fmt(fit.slope)} ± {fmt(fit.slope_stderr, 2)}"),
        ("OLS intercept ± SE", f"{fmt(fit.intercept)} ± {fmt(fit.intercept_stderr, 2)}"),
        ("R², p-value", f"{fit.r2:.4f}, {fmt(fit.p_value, 3)}"),
        ("Theil–Sen slope [95%], intercept", f"{fmt(fit.theil_slope)} [{fmt(fit.theil_slope_low)}, "
         f"{fmt(fit.theil_slope_high)}], {fmt(fit.theil_intercept)}"),
        ("fit RMSE, MAPE", f"{fmt(s['rmse'])}, {s['mape_pct']:.1f}%"),
        ("LOO RMSE, MAPE", f"{fmt(s['loo_rmse'])}, {s['loo_mape_pct']:.1f}%"),
        ("LOO within ±10% / ±20%", f"{s['loo_within_10pct']:.0%} / {s['loo_within_20pct']:.0%}"),
        (f"Spearman ρ (p), Kendall τ (p), p {s['rank_p_method']}",
         f"{s['spearman_rho']:.3f} ({fmt(s['spearman_p'], 2)}), {s['kendall_tau']:.3f} ({fmt(s['kendall_p'], 2)})"),
        ("order flips", ", ".join(f"{a} ↔ {b}" for a, b in calibration.flipped_pairs) or "none"),
        (f"influential (Cook's D > {fmt(s['cooks_threshold'], 2)})",
         ", ".join(f"{r.model} ({fmt(r.cooks_d, 2)})" for r in influential.itertuples()) or "none"),
    ]
    for name, value in rows:
        table.add_row(name, value)
    return table


def run(args: argparse.Namespace) -> int:
    results_dir = resolve_results_dir(args.results_dir)
    device = load_device(results_dir, args.device)
    runs, session = select_runs(results_dir, args.session)
    cset, _ = calibrate_runs(device, runs, args.metric, args.group_by)
    for skipped in cset.skipped:
        ui.warn(f"{skipped['metric']} {group_label(skipped['group'])}: not fitted: {skipped['reason']}")
    if cset.unmatched_device_models:
        ui.warn(f"device models without harness runs in session {session}: {', '.join(cset.unmatched_device_models)}")
    if args.json:
        ui.print_json({"session": session, **cset.to_dict()})
        return 0
    for calibration in cset.calibrations:
        ui.stdout.print(calibration_table(calibration))
    return 0
