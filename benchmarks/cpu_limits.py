"""CPU-limit fidelity: runtime of a parallel CPU-bound workload at CPUS 0.5, 1 and 2, and CFS throttling
under the quota versus pinned cores.

    .venv/bin/python benchmarks/cpu_limits.py [--work 20000000] [--repeats 3]

tests/workloads/cpu_burn.py runs 2 processes with a fixed amount of work each, so with exact limits its
runtime scales as 1/CPUS up to 2 CPUS: relative to CPUS=2 the ideal ratios are 4 (0.5) and 2 (1). Two
interleaved sweeps: CPU_PINNING=auto (0.5 by quota, 1 and 2 pinned to cores) and off (every value by quota).
`cpus_used` (CPU seconds per wall second) tells a limit that binds from cores taken by other load: a limit
is a ceiling, and on a busy host the runs with more CPUS get less than they may use.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

from _common import TEST_WORKLOADS, Goal, pct, print_table, profile_runs, write_report

WORKLOAD = TEST_WORKLOADS / "cpu_burn.py"
PROCESSES = 2
SWEEPS = (("auto", "0.5,1,2"), ("off", "1,2"))


def rows_by_limit(runs: list[dict[str, Any]]) -> dict[tuple[float, str], list[dict[str, Any]]]:
    grouped: dict[tuple[float, str], list[dict[str, Any]]] = {}
    for run in runs:
        grouped.setdefault((float(run["cpus"]), run["limits"]["cpu_mode"]), []).append(run)
    return grouped


def table(grouped: dict[tuple[float, str], list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One row per (CPUS, mode): median runtime, its ratio to pinned CPUS=2 against the ideal, throttling."""
    reference = statistics.median(run["runtime_s"] for run in grouped[(2.0, "pinned")])
    rows = []
    for (cpus, mode), runs in sorted(grouped.items()):
        runtime = statistics.median(run["runtime_s"] for run in runs)
        ideal = min(2.0, PROCESSES) / min(cpus, PROCESSES)  # runtime ~ 1 / min(CPUS, processes)
        rows.append({"cpus": cpus, "mode": mode, "runs": len(runs), "runtime_s": runtime,
                     "ratio_vs_cpus_2": runtime / reference, "ideal_ratio": ideal,
                     "ratio_err_%": pct(runtime / reference, ideal),
                     "cpus_used": statistics.median(run["cpu_s"] / run["runtime_s"] for run in runs),
                     "nr_throttled": statistics.median(run["cpu_nr_throttled"] for run in runs),
                     "nr_periods": statistics.median(run["cpu_nr_periods"] for run in runs),
                     "throttled_s": statistics.median(run["cpu_throttled_s"] for run in runs)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=int, default=20_000_000, help="loop iterations per process")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-cpu-") as tmp:
        for pinning, cpus in SWEEPS:
            runs += profile_runs(Path(tmp), WORKLOAD, [str(PROCESSES), str(args.work)], backend="local",
                                 repeats=args.repeats, command="sweep",
                                 extra_flags=["--cpus", cpus, "--cpu-pinning", pinning, "--no-report"]).runs
    rows = table(rows_by_limit(runs))
    notes = [f"host load average {load_before:.1f} before and {os.getloadavg()[0]:.1f} after, on "
             f"{os.cpu_count()} cores: CPUS above what the other load leaves cannot be had"]
    pinned = [row for row in rows if row["mode"] == "pinned"]
    quota = [row for row in rows if row["mode"] == "quota"]
    print_table(f"CPU limits: {PROCESSES} processes of fixed work; runtime ratio to CPUS=2 (pinned) vs ideal", rows)
    half = next(row for row in rows if row["cpus"] == 0.5)
    goals = [Goal("CPU seconds per wall second at CPUS=0.5 (quota)", "0.5", f"{half['cpus_used']:.3f}", None),
             Goal("runtime ratio to CPUS=2, worst error vs ideal (0.5: 4x, 1: 2x)", "-",
                  f"{max((row['ratio_err_%'] for row in rows), key=abs):+.1f}%", None),
             Goal("CFS throttling: pinned runs are never throttled", "pinned 0",
                  "pinned " + "/".join(f"{row['nr_throttled']:g}" for row in pinned) + ", quota at "
                  + ", ".join(f"{row['cpus']:g}: {row['nr_throttled']:g}" for row in quota)
                  + " (median periods throttled)", all(row["nr_throttled"] == 0 for row in pinned))]
    write_report("cpu_limits", rows, goals, notes)


if __name__ == "__main__":
    main()
