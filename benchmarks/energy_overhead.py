"""What reading the host's RAPL counters costs each run: the reader's own time (its counter reads around the timed
phase, `energy.read_s`) per run and as a share of that phase, where RAPL is readable; "not measured here" with the
reason the runs recorded where it is not.

    .venv/bin/python benchmarks/energy_overhead.py [--runs 5] [--iterations 500]

Real runs of ~1 ms CPU-bound inferences through `harness profile` (local backend); the reads happen outside every
timed call, so they cost the run's wall time, never a latency.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from _common import TEST_WORKLOADS, Goal, print_table, profile_runs, write_report

WORKLOAD = TEST_WORKLOADS / "short_inference.py"
NOT_MEASURED = "not measured here"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        session = profile_runs(Path(tmp), WORKLOAD, [str(args.iterations)], backend="local", repeats=args.runs)
    rows, absent = [], []
    for run in session.runs:
        energy = run.get("energy") or {}
        if "read_s" in energy:
            rows.append({"run": run["run_id"], "domains": ",".join(energy["domains"]),
                         "timed_phase_s": round(energy["seconds"], 4), "reader_us": round(energy["read_s"] * 1e6, 1),
                         "reader_share_pct": round(100 * energy["read_s"] / energy["seconds"], 5),
                         "energy_mj": round(energy["energy_mj"], 4), "avg_power_w": round(energy["avg_power_w"], 3)})
        else:
            absent.append(str(energy.get("absent", "the run recorded no energy")))
    if rows:
        worst = max(rows, key=lambda row: row["reader_us"])
        measured = f"worst run {worst['reader_us']} µs, {worst['reader_share_pct']}% of its timed phase"
        goal = Goal("RAPL reader's own time per run (counter reads around the timed phase)", "reported", measured,
                    None)
        print_table("RAPL energy reader's overhead per run", rows)
    else:
        goal = Goal("RAPL reader's own time per run (counter reads around the timed phase)", "reported",
                    NOT_MEASURED, None, note=absent[0] if absent else "")
        print(f"RAPL energy reader's overhead: {NOT_MEASURED} ({goal.note})")
    write_report("energy_overhead", rows, [goal], notes=sorted(set(absent)))


if __name__ == "__main__":
    main()
