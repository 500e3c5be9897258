"""`harness suggest --device NAME [-n K]`: which profiled models to measure on the device next, ranked by how
much their measurement would shrink the prediction intervals of the models still unmeasured. Before the device
has enough measured models to fit (or any data at all), the first picks spread over the profiled models' harness
values and families."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd
from rich.table import Table

from harness.analysis.run_values import harness_values, select_runs
from harness.calibration.calibrate import Calibration, NothingToFit, calibrate_runs, group_label, points_design
from harness.calibration.few_shot import FIRST_PICKS_FIT
from harness.calibration.fits import FIT_NAMES
from harness.calibration.line import MIN_POINTS
from harness.calibration.points import model_facts_table
from harness.calibration.suggest import relative_widths, suggest, suggest_first
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
from harness.core import metric_registry
from harness.core.config import resolve_results_dir
from harness.core.errors import ConfigError, DataError
from harness.core.records import RunRecord
from harness.device.data import list_devices, load_device
from harness.models.families import model_family
from harness.report.console import out_console

DEFAULT_COUNT = 3


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "suggest", help=COMMANDS["suggest"],
        description="Rank the profiled models the device data lacks by how much measuring each on the device "
        "would shrink the prediction intervals of the others (greedy I-optimal picks).",
    )
    add_device_option(parser)
    add_library_option(parser)
    parser.add_argument("-n", "--count", type=int, default=DEFAULT_COUNT,
                        help=f"how many models to suggest (default: {DEFAULT_COUNT})")
    add_metric_option(parser, None, "one metric (default: every metric the device data has)",
                         lambda m: m.calibrated)
    add_fit_option(parser, FIT_NAMES)
    add_across_repeats_option(parser)
    add_results_options(parser, pooled=True, by_runtime=True)
    parser.add_argument("--measure", action="store_true",
                        help="then measure the suggested models on the device's board (a device a TARGET session "
                             "made), which adds them to its data")
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
    return "—" if value is None else (f"±{value:.0%}" if relative else f"±{fmt(value, 3)}")


def first_picks(args: argparse.Namespace, runs: list[RunRecord], session: str, measured_models: set[str],
                why: str) -> int:
    """Picks before a fit exists: per CPUS value, the profiled models the device lacks, spread over their harness
    values and families (suggest_first, for the few-shot fit's shape)."""
    metric = args.metric or metric_registry.LATENCY
    values = harness_values(runs, metric_registry.get(metric).harness_side, args.across_repeats)
    facts = model_facts_table(runs)
    results: list[dict[str, Any]] = []
    for cpus, group in values.groupby("cpus"):
        candidates = group[~group["model_name"].isin(measured_models)]
        if candidates.empty:
            continue
        points = candidates.rename(columns={"model_name": "harness_model", "value": "harness"})
        points = points.join(facts, on="harness_model").assign(family=lambda f: f["harness_model"].map(model_family))
        picks = suggest_first(points_design(points), points["harness_model"].tolist(), FIRST_PICKS_FIT, args.count)
        results.append({"metric": metric, "group": {"cpus": cpus}, "candidates": len(points),
                        "picks": [asdict(pick) for pick in picks]})
    if not results:
        raise DataError(f"no profiled model in session {session} is left to measure on {args.device}; profile the "
                        "candidates you might deploy, then ask again")
    if args.json:
        print_json({"session": session, "device": args.device, "first_picks": True, "reason": why,
                       "suggestions": results})
        return 0
    warn(f"{args.device}: {why}; these picks spread over the profiled models' harness values and families")
    for result in results:
        table = Table(title=f"{result['metric']} · {group_label(result['group'])} · measure these first on "
                      f"{args.device} ({result['candidates']} candidates)", title_justify="left")
        for column in ("#", "measure", "family", "harness"):
            table.add_column(column)
        for rank, pick in enumerate(result["picks"], start=1):
            table.add_row(str(rank), pick["model"], pick["family"], fmt(pick["harness"]))
        out_console.print(table)
    return 0


def measure(args: argparse.Namespace, results_dir: Path, runs: list[RunRecord], picks: list[str]) -> int:
    """Profile the picks on the board that measures args.device (its target.json), as its TARGET session did."""
    from harness.analysis.boards import board_target
    from harness.api.profiling import run_session, start_profile

    where = board_target(results_dir, args.device)
    if where is None:
        raise ConfigError(f"--measure: device {args.device} was not measured through TARGET, so no board is known to "
                          "measure it on; measure the suggested models there yourself and import them")
    paths = {run.model_name: run.model["model_path"] for run in runs}
    start = start_profile([paths[name] for name in picks], target=where["target"], runtime=where["runtime"],
                          cpus=where["threads"], results_dir=results_dir, device_name=args.device)
    session, _ = run_session(start.session, progress=not args.json)
    notes = start.session.plan.notes
    if args.json:
        print_json({"device": args.device, "measured": picks, "session": session.path.name, "notes": notes})
    else:
        for note in notes:
            out_console.print(note, highlight=False, markup=False)
    return 0


def run(args: argparse.Namespace) -> int:
    if args.count < 1:
        raise ConfigError(f"-n {args.count}: give a positive number of models to suggest")
    results_dir = resolve_results_dir(args.results_dir)
    if args.device not in list_devices(results_dir):
        runs, session = select_runs(results_dir, args.session, args.runtime)
        return first_picks(args, runs, session, set(), "no device data imported yet")
    device = load_device(results_dir, args.device)
    runs, session = select_runs(results_dir, args.session, args.runtime, device)
    try:
        cset, measured = calibrate_runs(device, runs, args.metric, fit=args.fit, across=args.across_repeats,
                                        library=library_option(args, results_dir, device.name))
    except NothingToFit:
        matched = set(device.match(sorted({run["model_name"] for run in runs if run.get("model_name")})).values())
        return first_picks(args, runs, session, matched, f"fewer than {MIN_POINTS} of its models have harness runs")
    results: list[dict[str, Any]] = []
    for calibration in cset.calibrations:
        unmeasured = _unmeasured(calibration, measured[calibration.metric], calibration.facts_for(cset.facts))
        picks = suggest(calibration, unmeasured, args.count) if not unmeasured.empty else []
        results.append({"metric": calibration.metric, "group": calibration.group, "fit": calibration.model.name,
                        "relative_widths": relative_widths(calibration.model),
                        "calibration_models": calibration.reference_line.n, "unmeasured": len(unmeasured),
                        "picks": [asdict(pick) for pick in picks]})
    if not any(r["picks"] for r in results):
        raise DataError(f"every model profiled in session {session} is measured on {device.name} already; "
                        "profile the candidates you might deploy, then ask again")
    if args.json and not args.measure:
        print_json({"session": session, "device": device.name, "suggestions": results})
        return 0
    if args.measure:
        return measure(args, results_dir, runs, sorted({pick["model"] for r in results for pick in r["picks"]}))
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
            table.add_row(str(rank), pick["model"], fmt(pick["harness"]), _width(pick["own_halfwidth"], relative),
                          _width(pick["mean_after"], relative))
        out_console.print(table)
    return 0
