"""`harness predict --device NAME MODEL...`: device values with 95% prediction intervals from the chosen fit."""

from __future__ import annotations

import argparse

from rich.table import Table

from harness.analysis.run_values import select_runs
from harness.calibration.calibrate import calibrate_runs, group_label, predict_models
from harness.calibration.fits import FIT_NAMES
from harness.calibration.reach import EXTRAPOLATION_SPREAD
from harness.commands import COMMANDS
from harness.commands.shared import (
    add_across_repeats_option,
    add_device_option,
    add_fit_option,
    add_library_option,
    add_metric_option,
    add_results_options,
    fmt,
    library_option,
    print_json,
    warn,
)
from harness.core.config import resolve_results_dir
from harness.core.errors import DataError
from harness.device.data import load_device
from harness.report.console import out_console


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "predict", help=COMMANDS["predict"],
        description="Predict a device's numbers for models the harness profiled, from each group's chosen fit.",
    )
    parser.add_argument("models", nargs="+", metavar="MODEL", help="harness model names, as `harness rank` lists them")
    add_device_option(parser)
    add_library_option(parser)
    add_metric_option(parser, None, "one metric (default: every metric the device data has)",
                         lambda m: m.calibrated)
    add_fit_option(parser, FIT_NAMES)
    add_across_repeats_option(parser)
    add_results_options(parser, pooled=True, by_runtime=True)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    models = args.models
    results_dir = resolve_results_dir(args.results_dir)
    device = load_device(results_dir, args.device)
    runs, session = select_runs(results_dir, args.session, args.runtime, device)
    profiled = {run.get("model_name") for run in runs}
    missing = [model for model in models if model not in profiled]
    if missing:
        raise DataError(
            f"no runs of {', '.join(missing)} in session {session}; profile them first (make profile MODEL=...) "
            "or pass --session all"
        )
    cset, measured = calibrate_runs(device, runs, args.metric, fit=args.fit, across=args.across_repeats,
                                    library=library_option(args, results_dir, device.name))
    predictions = predict_models(cset, measured, models)
    for calibration in cset.calibrations:
        if carried := calibration.library_note():
            warn(f"{calibration.metric} {group_label(calibration.group)}: {carried}")
    for p in predictions:
        if p["predicted"] is None:
            warn(f"{p['model']} {p['metric']} {group_label(p['group'])}: not predicted: {p['note']}")
            continue
        for note in (p.get("note"), p.get("counts_note")):
            if note:
                warn(f"{p['model']} {p['metric']} {group_label(p['group'])}: {note}")
        if p["outside"]:
            warn(f"{p['model']} {p['metric']}: outside the calibration models' reach ({'; '.join(p['outside'])}); "
                    f"the {p['fit']} fit is extrapolated there, so its interval is widened "
                    f"(±{EXTRAPOLATION_SPREAD:.0%} more in log space)")
    if not any(p["predicted"] is not None for p in predictions):
        raise DataError(f"none of {', '.join(models)} has ok runs at a calibrated CPU count; see `harness regress`")
    if args.json:
        print_json({"session": session, "device": device.name, "predictions": predictions})
        return 0
    table = Table(title=f"predicted on {device.name} (95% prediction interval)", title_justify="left")
    for column in ("model", "metric", "group", "fit", "harness", "predicted", "95% PI", "measured", "reach"):
        table.add_column(column)
    for p in predictions:
        if p["predicted"] is None:
            continue
        table.add_row(
            p["model"], p["metric"], group_label(p["group"]), p["fit"], fmt(p["harness"]), fmt(p["predicted"]),
            f"[{fmt(p['pi_low'])}, {fmt(p['pi_high'])}]", fmt(p["measured_on_device"]),
            "outside" if p["outside"] else "inside",
        )
    out_console.print(table)
    return 0
