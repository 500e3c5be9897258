"""`harness predict --device NAME MODEL...`: device values with 95% prediction intervals from the chosen fit."""

from __future__ import annotations

import argparse
import os
import shlex

from rich.table import Table

from harness.api.predicting import predict
from harness.api.results import Predictions
from harness.calibration.calibrate import group_label
from harness.calibration.fits import FIT_NAMES
from harness.calibration.reach import spread_of
from harness.commands import COMMANDS
from harness.commands.shared import (
    add_across_repeats_option,
    add_device_option,
    add_fit_option,
    add_library_option,
    add_metric_option,
    add_results_options,
    devices,
    fmt,
    print_json,
    text_table,
    warn,
)
from harness.core.config import resolve_results_dir
from harness.report.console import out_console


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
    add_device_option(parser, several=True)
    add_library_option(parser)
    add_metric_option(parser, None, "one metric (default: every metric the device data has)",
                         lambda m: m.calibrated)
    add_fit_option(parser, FIT_NAMES)
    add_across_repeats_option(parser)
    add_results_options(parser, pooled=True, by_runtime=True)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    models = args.models or shlex.split(os.environ.get("HARNESS_MODEL", ""))
    chosen = devices(args)
    # Defaults pass as unset: a predictor that has no fit to choose or no library (a kernel table) refuses them set.
    predictions = predict(models, chosen[0] if len(chosen) == 1 else chosen, session=args.session,
                          metric=args.metric, fit=None if args.fit == "auto" else args.fit,
                          across_repeats=args.across_repeats, library=False if args.no_library else None,
                          runtime=args.runtime, results_dir=resolve_results_dir(args.results_dir))
    return show_predictions(args, predictions)


def harness_caption(result: Predictions) -> str:
    """What the `harness` column holds, per metric: the figure the fit read (`fastest inference of 3 repeats`), which
    is not the session summary's median."""
    figures = {p.metric: p.harness_figure for p in result.rows if p.predicted is not None}
    return "harness: the value the fit reads, " + "; ".join(f"{metric}: the {figure}" for metric, figure in
                                                            figures.items())


def show_predictions(args: argparse.Namespace, result: Predictions) -> int:
    """What harness.predict returned: its notes and each prediction's as warnings, then the table (or JSON)."""
    for line in result.notes:
        warn(line)
    for p in result.rows:
        if p.predicted is None:
            warn(f"{p.model} {p.metric} {group_label(p.group)}: not predicted: {p.note}")
            continue
        for note in (p.note, p.counts_note):
            if note:
                warn(f"{p.model} {p.metric} {group_label(p.group)}: {note}")
        if p.outside:
            warn(f"{p.model} {p.metric}: outside the calibration models' reach ({'; '.join(p.outside)}); "
                 f"the {p.fit} fit is extrapolated there, so its interval is widened "
                 f"(±{spread_of(list(p.outside)):.0%} more in log space)")
    if args.json:
        print_json(result.to_dict())
        return 0
    if len(result.devices) > 1:
        out_console.print(text_table(result.by_device, "predicted latency by device (95% prediction interval)"))
        return 0
    table = Table(title=f"predicted on {result.device} (95% prediction interval)", title_justify="left",
                  caption=harness_caption(result), caption_justify="left")
    for column in ("model", "metric", "group", "fit", "harness", "predicted", "95% PI", "measured", "reach"):
        table.add_column(column)
    for p in result.rows:
        if p.predicted is None:
            continue
        table.add_row(p.model, p.metric, group_label(p.group), p.fit, fmt(p.harness), fmt(p.predicted),
                      f"[{fmt(p.pi_low)}, {fmt(p.pi_high)}]", fmt(p.measured_on_device), p.reach)
    out_console.print(table)
    return 0
