"""`harness predict --device NAME MODEL...`: device values with 95% prediction intervals from the chosen fit."""

from __future__ import annotations

import argparse
import os
import shlex
from pathlib import Path

import pandas as pd
from rich.table import Table

from harness.analysis.run_values import select_runs
from harness.calibration.calibrate import CalibrationSet, calibrate_runs, group_label
from harness.calibration.fits import FIT_NAMES
from harness.calibration.predictions import predict_models
from harness.calibration.reach import EXTRAPOLATION_SPREAD
from harness.calibration.transfer import Library
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
from harness.core.errors import ConfigError, DataError
from harness.device.data import list_devices, load_device
from harness.device.library import METRIC, LibraryTable, all_tables
from harness.models.resolve import resolve_model
from harness.report.console import out_console
from harness.run.zero_shot import ZERO_SHOT_DIR, device_data, profile_missing, shipped_table, zoo_models
from harness.store.results import ALL_SESSIONS, iter_all_runs


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "predict", help=COMMANDS["predict"],
        description="Predict a device's numbers for models the harness profiled, from each group's chosen fit. With "
                    "a library device (harness devices) and no data of your own: its table's models are profiled on "
                    "this host once (zero-shot; under RESULTS_DIR/zero-shot), your models beside them, and the "
                    "table's own held-out error is printed first.",
    )
    parser.add_argument("models", nargs="*", metavar="MODEL",
                        help="harness model names, as `harness rank` lists them (with a library device: model files "
                             "or zoo names; make: MODEL=...)")
    add_device_option(parser)
    add_library_option(parser)
    add_metric_option(parser, None, "one metric (default: every metric the device data has)",
                         lambda m: m.calibrated)
    add_fit_option(parser, FIT_NAMES)
    add_across_repeats_option(parser)
    add_results_options(parser, pooled=True, by_runtime=True)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    args.models = args.models or shlex.split(os.environ.get("HARNESS_MODEL", ""))
    if not args.models:
        raise ConfigError("predict: name the models to predict (make predict MODEL=\"a.onnx b.onnx\" DEVICE=...)")
    results_dir = resolve_results_dir(args.results_dir)
    if args.device not in list_devices(results_dir):
        table = shipped_table(args.device, all_tables(results_dir))
        if table is not None:
            return zero_shot(args, results_dir, table)
    device = load_device(results_dir, args.device)
    runs, session = select_runs(results_dir, args.session, args.runtime, device)
    profiled = {run.get("model_name") for run in runs}
    missing = [model for model in args.models if model not in profiled]
    if missing:
        raise DataError(
            f"no runs of {', '.join(missing)} in session {session}; profile them first (make profile MODEL=...) "
            "or pass --session all"
        )
    cset, measured = calibrate_runs(device, runs, args.metric, fit=args.fit, across=args.across_repeats,
                                    library=library_option(args, results_dir, device.name))
    return show_predictions(args, cset, measured, args.models, session, device.name)


def zero_shot(args: argparse.Namespace, results_dir: Path, table: LibraryTable) -> int:
    """A library table as the device: its zoo models and the user's profiled under ZERO_SHOT_DIR (once; later calls
    reuse those sessions, pooled), the table calibrated as imported data, the other tables its library."""
    device = device_data(table)
    names = {arg: resolve_model(arg).name for arg in args.models}
    wanted = list(dict.fromkeys([*zoo_models(table), *args.models]))
    directory = results_dir / ZERO_SHOT_DIR
    profiled = {run.model_name for run in iter_all_runs(directory)} if directory.is_dir() else set()
    missing = [model for model in wanted if names.get(model, model) not in profiled]
    if missing:
        profile_missing(missing, directory)
    runs, session = select_runs(directory, ALL_SESSIONS, args.runtime)
    library = None if args.no_library else Library.for_target(all_tables(results_dir), table.name)
    cset, measured = calibrate_runs(device, runs, METRIC, fit=args.fit, across=args.across_repeats, library=library)
    for calibration in cset.calibrations:
        stats = calibration.stats
        warn(f"held out on {table.name} (each of its {len(calibration.points)} models predicted from the others, the "
             f"fit chosen again each time): {stats['loo_within_10pct']:.0%} within ±10%, "
             f"{stats['loo_within_20pct']:.0%} within ±20%, MAPE {stats['loo_mape_pct']:.1f}%")
    return show_predictions(args, cset, measured, [names[m] for m in args.models], session, table.name)


def show_predictions(args: argparse.Namespace, cset: CalibrationSet, measured: dict[str, pd.DataFrame],
                     models: list[str], session: str, device: str) -> int:
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
        print_json({"session": session, "device": device, "predictions": predictions})
        return 0
    table = Table(title=f"predicted on {device} (95% prediction interval)", title_justify="left")
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
