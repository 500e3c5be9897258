"""What the calibration benchmarks share: a published latency table whose models the zoo rebuilds, profiled at
CPUS=1 with per-op profiles, and each of its groups calibrated the way `harness regress` does, with every fit's
leave-one-out figures and the nested automatic choice."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from _common import ROOT, Goal, print_table, profile_runs, write_report
from goals import VERDICTS

from harness.analysis.run_values import harness_values, metric_table
from harness.calibration.calibrate import Calibration, calibrate_device
from harness.calibration.points import model_facts_table
from harness.core.metric_registry import ACROSS_REPEATS, FASTEST_INFERENCE
from harness.device.data import DeviceData, parse_device_csv
from harness.store.results import load_runs

COVERAGE_GOAL = (0.90, 0.98)
GOAL_COLUMN = "latency_ms"
"""The device column the goals are checked on (each table's CPU latency); other columns are information."""


@dataclass(frozen=True)
class PublishedTable:
    """One published table of device latencies, its zoo models, and the groups and goals checked on it."""

    benchmark: str
    csv: Path
    device: str
    models: tuple[str, ...]
    groups: dict[str, tuple[str, ...]]
    """Group name → the model-name prefixes of its device rows."""
    share_goals: dict[str, float]
    """Goal group → its least nested share within ±10% (GOAL_COLUMN, the fastest inference)."""
    coverage_group: str
    """The group with every model of the table the zoo has, on which the coverage goal is checked."""
    columns: tuple[str, ...] = (GOAL_COLUMN,)

    @property
    def profile_dir(self) -> Path:
        return ROOT / "results" / self.benchmark.replace("_", "-")

    def device_data(self) -> DeviceData:
        table, info = parse_device_csv(self.csv)
        return DeviceData(self.device, table, info)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--session", nargs="+", default=os.environ.get("HARNESS_BENCH_SESSION", "").split() or None,
                        help="reuse these session directories (their runs pooled) instead of profiling "
                             "(make: SESSION=\"DIR [DIR ...]\")")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)


def profiled_sessions(table: PublishedTable, args: argparse.Namespace) -> list[Path]:
    """The session directories to calibrate: --session, or a new profiling session kept under the table's
    profile directory."""
    if args.session:
        return [Path(directory) for directory in args.session]
    # Zoo names, not the cached files' paths: a path's stem carries the cache's content hash, which no device
    # row's model name matches.
    session = profile_runs(table.profile_dir, None, [], backend="local", repeats=args.repeats, models=table.models,
                           extra_flags=["--per-op", "--cpus", "1", "--memory", "2g",
                                        "--iterations", str(args.iterations), "--warmup", str(args.warmup)])
    return [table.profile_dir / "results" / session.runs[0]["session_id"]]


def calibrate_group(device: DeviceData, runs: list[dict[str, Any]], facts: pd.DataFrame, prefixes: tuple[str, ...],
                    column: str, across: str) -> Calibration:
    """The device rows of one group, fitted against harness latency (whichever device column is compared), each
    model's repeats summarised as `across` says; `facts` is model_facts_table(runs), read once for every group."""
    table = device.table[device.table["model"].str.startswith(prefixes)].reset_index(drop=True)
    subset = DeviceData(device.name, table, device.info)
    values = {column: harness_values(runs, "latency_ms", across)}
    (calibration,) = calibrate_device(subset, values, facts=facts).calibrations
    return calibration


def repeat_spread(runs: list[dict[str, Any]]) -> float:
    """Median over models of the spread of their repeats' latency, (max − min) / median: the harness's own noise,
    which no fit can remove (a busy host inflates some repeats' per-inference times)."""
    values = metric_table(runs, "latency_ms").groupby("model_name")["value"]
    return float(((values.max() - values.min()) / values.median()).median())


def goal_calibrations(table: PublishedTable, device: DeviceData, runs: list[dict[str, Any]]) -> dict[str, Calibration]:
    """Each group's calibration that the goals are checked on: GOAL_COLUMN, the fastest inference."""
    facts = model_facts_table(runs)
    return {group: calibrate_group(device, runs, facts, prefixes, GOAL_COLUMN, FASTEST_INFERENCE)
            for group, prefixes in table.groups.items()}


def table_goals(table: PublishedTable, calibrations: dict[str, Calibration]) -> list[Goal]:
    """The goals: each goal group's nested share within ±10%, and the coverage on every model of the table."""
    goals = []
    for group, target in table.share_goals.items():
        stats = calibrations[group].stats
        goals.append(Goal(f"{group}: nested leave-one-out within ±10%", f"≥ {target:.0%}",
                          f"{stats['loo_within_10pct']:.0%} (±20%: {stats['loo_within_20pct']:.0%})",
                          stats["loo_within_10pct"] >= target))
    every = calibrations[table.coverage_group]
    coverage = every.stats["loo_coverage"]
    low, high = COVERAGE_GOAL
    goals.append(Goal("95% prediction intervals: leave-one-out coverage, every model of the table",
                      f"{low:.0%} to {high:.0%}", f"{coverage:.0%} of {every.fit.n}", low <= coverage <= high))
    return goals


def _rows_of(group: str, column: str, across: str, calibration: Calibration) -> list[dict[str, Any]]:
    return [
        {"group": group, "device column": column, "repeats →": across, "n": calibration.fit.n,
         "fit": f"{row['fit']} ✓" if row["chosen"] else row["fit"],
         "within ±10%": row.get("within_10pct"), "within ±20%": row.get("within_20pct"), "MAPE %": row.get("mape_pct"),
         "Kendall τ": row.get("kendall_tau"), "95% PI coverage": row.get("coverage"), "note": row["note"]}
        for row in calibration.comparison
    ]


def run_benchmark(table: PublishedTable, title: str, args: argparse.Namespace) -> None:
    """Profile (or reuse) the table's models, calibrate every group × device column × repeat summary, print every
    fit's figures and the goals, and write results/bench/<benchmark>.json."""
    device = table.device_data()
    sessions = profiled_sessions(table, args)
    runs = [run for session in sessions for run in load_runs(session)]
    facts = model_facts_table(runs)
    rows, chosen = [], {}
    for across in ACROSS_REPEATS:
        for column in table.columns:
            for group, prefixes in table.groups.items():
                calibration = calibrate_group(device, runs, facts, prefixes, column, across)
                rows += _rows_of(group, column, across, calibration)
                chosen[(group, column, across)] = calibration
    print_table(f"{title}: leave-one-out figures per fit; `auto` is nested", rows)
    for (group, column, across), calibration in chosen.items():
        print(f"{group}, {column}, {across}: chosen {calibration.model.name}: {calibration.model.equation}; "
              f"{calibration.choice['reason']}")
    goals = table_goals(table, {group: chosen[(group, GOAL_COLUMN, FASTEST_INFERENCE)] for group in table.groups})
    every = chosen[(table.coverage_group, GOAL_COLUMN, FASTEST_INFERENCE)]
    goals.append(Goal("harness noise: median spread of a model's repeats, (max − min) / median", "information",
                      f"{repeat_spread(runs):.0%}", None))
    for (group, column, across), calibration in chosen.items():
        if (column, across) != (GOAL_COLUMN, FASTEST_INFERENCE) or group not in table.share_goals:
            goals.append(Goal(f"{group}, {column}, {across}: nested within ±10%", "information",
                              f"{calibration.stats['loo_within_10pct']:.0%}", None))
    print_table("Goals", [{"goal": g.name, "target": g.target, "measured": g.measured, "verdict": VERDICTS[g.met]}
                          for g in goals])
    regress_session, holding = (sessions[0].name, "that session") if len(sessions) == 1 else ("all", "those only")
    notes = [f"harness runs: {' '.join(map(str, sessions))} (reuse them with --session); the {GOAL_COLUMN} figures "
             f"of the {every.fit.n} models, as regress prints them: harness import-device "
             f"{table.csv.relative_to(ROOT)} --device {table.device} --results-dir DIR && harness regress --device "
             f"{table.device} --results-dir DIR --session {regress_session}, DIR holding {holding}"]
    raw = {f"{group} / {column} / {across}": c.points.to_dict(orient="records")
           for (group, column, across), c in chosen.items()}
    write_report(table.benchmark, rows, goals, notes, raw)
