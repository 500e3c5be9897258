"""`harness suggest --device NAME [-n K]`: which profiled models to measure on the device next, ranked by how
much their measurement would shrink the prediction intervals of the models still unmeasured."""

from __future__ import annotations

import argparse
from dataclasses import asdict

import pandas as pd
from rich.table import Table

from harness.analysis.run_values import resolve_results_dir, select_runs
from harness.calibration.calibrate import Calibration, calibrate_runs
from harness.calibration.fits import FIT_NAMES
from harness.calibration.suggest import relative_widths, suggest
from harness.commands import COMMANDS
from harness.commands import _analysis as ui
from harness.core.errors import ConfigError, DataError
from harness.device.data import load_device

DEFAULT_COUNT = 3


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "suggest", help=COMMANDS["suggest"],
        description="Rank the profiled models the device data lacks by how much measuring each on the device "
        "would shrink the prediction intervals of the others (greedy I-optimal picks).",
    )
    ui.add_device_option(parser)
    parser.add_argument("-n", "--count", type=int, default=DEFAULT_COUNT,
                        help=f"how many models to suggest (default: {DEFAULT_COUNT})")
    ui.add_metric_option(parser, None, "one metric (default: every metric the device data has)",
                         lambda m: m.calibrated)
    ui.add_fit_option(parser, FIT_NAMES)
    ui.add_across_repeats_option(parser)
    ui.add_results_options(parser, pooled=True)
    parser.set_defaults(func=run)


def _unmeasured(calibration: Calibration, measured: pd.DataFrame, facts: pd.DataFrame) -> pd.DataFrame:
    """Models profiled at the group's CPU count that the device data lacks, with the facts the fit reads."""
    at_cpus = measured[measured["cpus"] == calibration.group["cpus"]]
    table = at_cpus[~at_cpus["model_name"].isin(calibration.points["harness_model"])]
    table = table.rename(columns={"model_name": "harness_model", "value": "harness"}).join(facts, on="harness_model")
    needed = list(calibration.model.fact_names)
    return table.dropna(subset=needed) if needed else table


def _width(value: float | None, relative: bool) -> str:
    """An interval half-width as the fit measures it: a share of the prediction, or device units for ols."""
    return "—" if value is None else (f"±{value:.0%}" if relative else f"±{ui.fmt(value, 3)}")


def run(args: argparse.Namespace) -> int:
    if args.count < 1:
        raise ConfigError(f"-n {args.count}: give a positive number of models to suggest")
    results_dir = resolve_results_dir(args.results_dir)
    device = load_device(results_dir, args.device)
    runs, session = select_runs(results_dir, args.session)
    cset, measured = calibrate_runs(device, runs, args.metric, fit=args.fit, across=args.across_repeats)
    results = []
    for calibration in cset.calibrations:
        unmeasured = _unmeasured(calibration, measured[calibration.metric], cset.facts)
        picks = suggest(calibration, unmeasured, args.count) if not unmeasured.empty else []
        results.append({"metric": calibration.metric, "group": calibration.group, "fit": calibration.model.name,
                        "relative_widths": relative_widths(calibration.model),
                        "calibration_models": calibration.fit.n, "unmeasured": len(unmeasured),
                        "picks": [asdict(pick) for pick in picks]})
    if not any(r["picks"] for r in results):
        raise DataError(f"every model profiled in session {session} is measured on {device.name} already; "
                        "profile the candidates you might deploy, then ask again")
    if args.json:
        ui.print_json({"session": session, "device": device.name, "suggestions": results})
        return 0
    for result, calibration in zip(results, cset.calibrations, strict=True):
        if not result["picks"]:
            continue
        relative = result["relative_widths"]
        table = Table(
            title=f"{calibration.metric} · {calibration.label} · {result['fit']} fit on {result['calibration_models']} "
            f"models: the {result['unmeasured']} unmeasured models' 95% intervals average "
            f"{_width(result['picks'][0]['mean_before'], relative)}",
            title_justify="left",
        )
        for column in ("#", "measure next", "harness", "its interval now", "the rest's mean interval after"):
            table.add_column(column)
        for rank, pick in enumerate(result["picks"], start=1):
            table.add_row(str(rank), pick["model"], ui.fmt(pick["harness"]), _width(pick["own_halfwidth"], relative),
                          _width(pick["mean_after"], relative))
        ui.stdout.print(table)
    return 0
