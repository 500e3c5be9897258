"""How often a published table's calibration goals hold when a model's repeats come from k sessions pooled: every
combination of k of the given sessions, each calibrated as one (the fastest inference of all their repeats).

    .venv/bin/python benchmarks/calibration_pooled.py DIR DIR ... [--k 1 2 3] [--table pixel-3|pixel-1]

The sessions are directories that `benchmarks/calibration_pixel3.py` or `calibration_pixel1.py` (or `harness
profile` of the same models, PER_OP=1, CPUS=1, equal ITERATIONS and REPEATS) left. Pooling k sessions profiled
at different times is what `harness regress --session all` does with a user's own sessions; k = 1 is each session
alone.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

from _calibration import goal_calibrations, table_goals
from _common import Goal, print_table, write_report
from calibration_pixel1 import PIXEL1
from calibration_pixel3 import PIXEL3

from harness.store.results import load_runs

TABLES = {table.device: table for table in (PIXEL3, PIXEL1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sessions", nargs="+", type=Path, help="session directories")
    parser.add_argument("--k", nargs="+", type=int, default=[1, 2, 3], help="how many sessions to pool")
    parser.add_argument("--table", choices=list(TABLES), default=PIXEL3.device, help="the published table")
    args = parser.parse_args()
    table = TABLES[args.table]
    device = table.device_data()
    runs = {session: load_runs(session) for session in args.sessions}
    rows, raw = [], {}
    for k in args.k:
        verdicts: dict[str, list[bool]] = {}
        for combination in itertools.combinations(args.sessions, k):
            goals = table_goals(table, goal_calibrations(table, device, [run for s in combination for run in runs[s]]))
            raw[" + ".join(s.name for s in combination)] = {goal.name: goal.measured for goal in goals}
            for goal in goals:
                verdicts.setdefault(goal.name, []).append(bool(goal.met))
        rows += [{"sessions pooled": k, "goal": name, "met in": f"{sum(met)} of {len(met)}",
                  "share": sum(met) / len(met)} for name, met in verdicts.items()]
    print_table(f"Calibration goals on {len(args.sessions)} sessions pooled k at a time", rows)
    goals = [Goal(f"k = {row['sessions pooled']}: {row['goal']}", "information", row["met in"], None)
             for row in rows]
    write_report("calibration_pooled", rows, goals, [f"sessions: {' '.join(map(str, args.sessions))}"], raw)


if __name__ == "__main__":
    sys.exit(main())
