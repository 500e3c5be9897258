"""The runner's own wake-ups on a pinned workload's core: latency p50, p90, p99 with the runner on the model's core
versus on another core.

    .venv/bin/python benchmarks/runner_placement.py [--model mobilenet_v2_0.5_224] [--pairs 6] [--iterations 1500]

A CPUS=1 run is pinned to one core. The runner samples memory every SAMPLE_INTERVAL_MS (10 ms): on the same core,
each sample preempts an inference. K pairs of runs, alternating which goes first: the runner kept on the
workload's core (`shared`) and the harness's placement, the runner on another core (`apart`, where the host has
one). Each row: medians over runs, and the median of the paired ratios shared/apart, which a change of the host's
speed between pairs does not bias. Also run at a 1 ms interval, where the runner wakes ten times as often.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

from _common import Goal, api_runs, print_table, write_report, zoo_model

from harness.backends.local import LocalBackend
from harness.measure.spec import plan_cpu_limits

STATS = ("p50", "p90", "p99", "mean")


def interleaved(model: Path, directory: Path, args: argparse.Namespace, interval_ms: float) -> dict[str, list[dict]]:
    """K runs per placement, alternating which goes first."""
    plan = plan_cpu_limits(1.0, "auto", sorted(os.sched_getaffinity(0)))
    backends = {"shared": LocalBackend(runner_off_workload_cores=False), "apart": LocalBackend()}
    runs: dict[str, list[dict]] = {"shared": [], "apart": []}
    for index in range(args.pairs):
        for placement in ("shared", "apart") if index % 2 == 0 else ("apart", "shared"):
            (run,) = api_runs(directory, model, [plan], rounds=1, iterations=args.iterations, warmup=args.warmup,
                              backend=backends[placement], sample_interval_ms=interval_ms)
            runs[placement].append(run)
    return runs


def rows_for(interval_ms: float, runs: dict[str, list[dict]]) -> list[dict[str, Any]]:
    rows = []
    for stat in STATS:
        shared = [run["latency_stats_ms"][stat] for run in runs["shared"]]
        apart = [run["latency_stats_ms"][stat] for run in runs["apart"]]
        rows.append({"interval_ms": interval_ms, "stat": stat, "pairs": len(shared),
                     "runner_cores_shared": ",".join(map(str, runs["shared"][0]["runner_cores"])),
                     "runner_cores_apart": ",".join(map(str, runs["apart"][0]["runner_cores"])),
                     "shared_ms": statistics.median(shared), "apart_ms": statistics.median(apart),
                     "paired_shared_vs_apart_%": 100 * (statistics.median(s / a for s, a in zip(shared, apart,
                                                                                              strict=True)) - 1)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="mobilenet_v2_0.5_224", help="a zoo name with ~1-5 ms latency")
    parser.add_argument("--pairs", type=int, default=6, help="K")
    parser.add_argument("--iterations", type=int, default=1500)
    parser.add_argument("--warmup", type=int, default=50)
    args = parser.parse_args()
    if len(os.sched_getaffinity(0)) < 2:
        raise SystemExit("runner_placement: needs 2 cores (one for the workload, one for the runner)")
    model = zoo_model(args.model)
    load_before = os.getloadavg()[0]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-placement-") as tmp:
        for interval_ms in (10.0, 1.0):
            rows += rows_for(interval_ms, interleaved(model, Path(tmp), args, interval_ms))
    print_table(f"{args.model} at CPUS=1 (pinned): runner on the workload's core (shared) or another (apart)", rows)
    at_10 = {row["stat"]: row["paired_shared_vs_apart_%"] for row in rows if row["interval_ms"] == 10.0}
    at_1 = {row["stat"]: row["paired_shared_vs_apart_%"] for row in rows if row["interval_ms"] == 1.0}
    goals = [Goal("latency with the runner on the pinned core vs another core, 10 ms sampling (paired)", "-",
                  ", ".join(f"{stat} {value:+.1f}%" for stat, value in at_10.items()), None),
             Goal("the same at 1 ms sampling (ten times the wake-ups)", "-",
                  ", ".join(f"{stat} {value:+.1f}%" for stat, value in at_1.items()), None)]
    notes = [f"host load average {load_before:.1f} before and {os.getloadavg()[0]:.1f} after, on {os.cpu_count()} "
             "cores: other load on the runner's core slows neither side of a pair more than the other"]
    write_report("runner_placement", rows, goals, notes)


if __name__ == "__main__":
    main()
