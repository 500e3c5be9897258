"""CPU-limit fidelity: runtime of a parallel CPU-bound workload at CPUS 0.5, 1 and 2, and CFS throttling
under the quota versus pinned cores.

    .venv/bin/python benchmarks/cpu_limits.py [--work 20000000] [--repeats 3]

tests/workloads/cpu_burn.py runs 2 processes with a fixed amount of work each, so with exact limits its
runtime scales as 1/CPUS up to 2 CPUS: relative to CPUS=2 the ideal ratios are 4 (0.5) and 2 (1). Two
sweeps, each interleaving its CPUS values and giving its own CPUS=2 reference: CPU_PINNING=auto (0.5 by
quota, 1 and 2 pinned to cores) and off (every value by quota).
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

from _common import TEST_WORKLOADS, Goal, farthest, pct, print_table, profile_runs, write_report

WORKLOAD = TEST_WORKLOADS / "cpu_burn.py"
PROCESSES = 2
PINNING = ("auto", "off")


def table(runs: list[dict[str, Any]], pinning: str) -> list[dict[str, Any]]:
    """One row per CPUS of one sweep: median runtime, its ratio to the same sweep's CPUS=2 against the ideal,
    and throttling."""
    by_cpus: dict[float, list[dict[str, Any]]] = {}
    for run in runs:
        by_cpus.setdefault(float(run["cpus"]), []).append(run)
    reference = statistics.median(run["runtime_s"] for run in by_cpus[2.0])
    rows = []
    for cpus, group in sorted(by_cpus.items()):
        runtime = statistics.median(run["runtime_s"] for run in group)
        ideal = min(2.0, PROCESSES) / min(cpus, PROCESSES)  # runtime ~ 1 / min(CPUS, processes)
        mode = group[0]["limits_applied"]["cpu_mode"]
        rows.append({"cpu_pinning": pinning, "cpus": cpus, "mode": mode, "runs": len(group),
                     "runtime_s": runtime, "ratio_vs_cpus_2": runtime / reference, "ideal_ratio": ideal,
                     "ratio_err_%": pct(runtime / reference, ideal),
                     "cpus_used": statistics.median(run["cpu_s"] / run["runtime_s"] for run in group),
                     "nr_throttled": statistics.median(run["cpu_nr_throttled"] for run in group),
                     "nr_periods": statistics.median(run["cpu_nr_periods"] for run in group),
                     "throttled_s": statistics.median(run["cpu_throttled_s"] for run in group)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=int, default=20_000_000, help="loop iterations per process")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-cpu-") as tmp:
        for pinning in PINNING:
            rows += table(profile_runs(Path(tmp), WORKLOAD, [str(PROCESSES), str(args.work)], backend="local",
                                       repeats=args.repeats, command="sweep",
                                       extra_flags=["--cpus", "0.5,1,2", "--cpu-pinning", pinning, "--no-report"]
                                       ).runs, pinning)
    notes = [f"host load average {load_before:.1f} before and {os.getloadavg()[0]:.1f} after, on "
             f"{os.cpu_count()} cores: CPUS above what the other load leaves cannot be had"]
    pinned = [row for row in rows if row["mode"] == "pinned"]
    quota = [row for row in rows if row["cpu_pinning"] == "off"]
    print_table(f"CPU limits: {PROCESSES} processes of fixed work; runtime ratio to the sweep's CPUS=2 vs ideal", rows)
    halves = [row["cpus_used"] for row in rows if row["cpus"] == 0.5]
    goals = [Goal("CPU seconds per wall second at CPUS=0.5 (quota), each sweep", "0.5",
                  " / ".join(f"{used:.3f}" for used in halves), None),
             Goal("runtime ratio to CPUS=2, worst error vs ideal (0.5: 4x, 1: 2x)", "-",
                  f"{farthest(row['ratio_err_%'] for row in rows):+.1f}%", None),
             Goal("CFS throttling: pinned runs are never throttled", "pinned 0",
                  "pinned " + "/".join(f"{row['nr_throttled']:g}" for row in pinned) + ", quota at "
                  + ", ".join(f"{row['cpus']:g}: {row['nr_throttled']:g}" for row in quota)
                  + " (median periods throttled)", all(row["nr_throttled"] == 0 for row in pinned))]
    write_report("cpu_limits", rows, goals, notes)


if __name__ == "__main__":
    main()
