"""Latency of one model bare versus under the harness with no limit that binds (goal: medians within 2%).

    .venv/bin/python benchmarks/latency.py [--model mobilenet_v2_0.5_224] [--runs 10] [--iterations 500]

Bare = bench_scripts/onnx_bench.py run directly with the same flags, HARNESS_METRICS pointing at a temp
file. K bare runs interleaved with K one-run harness sessions (local backend, every host core, all host
memory), alternating which goes first; each run gives its median latency, and the medians of those compare.
Done twice: with as many intra-op threads as host cores (what the harness sets for CPUS = every core), and
with one thread, which leaves a core for the harness's own processes (CLI, runner sampling every 10 ms). The
difference between the two tells cost that comes from sharing the model's cores from a measuring bias.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

from _common import (
    ONNX_BENCH,
    Goal,
    bare_run,
    pct,
    print_table,
    profile_runs,
    unbound_limit_flags,
    write_report,
    zoo_model,
)

GOAL_LATENCY_PCT = 2.0


def interleaved(model: Path, directory: Path, threads: int, args: argparse.Namespace) -> dict[str, list[float]]:
    """Per-run median latencies (ms) of K bare runs and K one-run harness sessions, alternating."""
    script_args = ["--iterations", str(args.iterations), "--warmup", str(args.warmup), "--threads", str(threads)]
    flags = unbound_limit_flags(args.iterations, args.warmup)
    p50: dict[str, list[float]] = {"bare": [], "harness": []}
    for index in range(args.runs):
        for which in ("bare", "harness") if index % 2 == 0 else ("harness", "bare"):
            if which == "bare":
                p50["bare"].append(statistics.median(bare_run(ONNX_BENCH, [str(model), *script_args])[1]["latency_ms"]))
            else:
                (run,) = profile_runs(directory, ONNX_BENCH, script_args, backend="local", repeats=1, models=[model],
                                      extra_flags=flags).runs
                p50["harness"].append(run["latency_ms"]["p50"])
    return p50


def rows_for(threads: int, p50: dict[str, list[float]]) -> list[dict[str, Any]]:
    reference = statistics.median(p50["bare"])
    return [{"threads": threads, "approach": name, "runs": len(values), "p50_median_ms": statistics.median(values),
             "p50_min_ms": min(values), "p50_max_ms": max(values),
             "vs_bare_%": pct(statistics.median(values), reference)} for name, values in p50.items()]


def latency_goals(harness_rows: list[dict[str, Any]], cores: int, load: float) -> list[Goal]:
    """One goal per thread count; a miss names the other thread count's gap and the host's load."""
    goals = []
    for row in harness_rows:
        met = abs(row["vs_bare_%"]) <= GOAL_LATENCY_PCT
        others = "; ".join(f"with {other['threads']} thread(s): {other['vs_bare_%']:+.2f}%"
                           for other in harness_rows if other is not row)
        goals.append(Goal(f"latency p50, harness vs bare, {row['threads']} thread(s) on {cores} cores",
                          f"within {GOAL_LATENCY_PCT:.0f}%", f"{row['vs_bare_%']:+.2f}%", met,
                          "" if met else f"{others}; host load average up to {load:.1f} on {cores} cores"))
    return goals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="mobilenet_v2_0.5_224", help="a zoo name with ~1-5 ms latency")
    parser.add_argument("--runs", type=int, default=10, help="K")
    parser.add_argument("--iterations", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=20)
    args = parser.parse_args()
    model = zoo_model(args.model)
    cores = len(os.sched_getaffinity(0))
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="bench-latency-") as tmp:
        results = {threads: interleaved(model, Path(tmp), threads, args)
                   for threads in sorted({cores, 1}, reverse=True)}
    loads.append(os.getloadavg()[0])
    rows = [row for threads, p50 in results.items() for row in rows_for(threads, p50)]
    print_table(f"Latency of {args.model}, {args.runs} bare runs interleaved with {args.runs} harness runs, no binding "
                f"limits (goal: medians within {GOAL_LATENCY_PCT:.0f}%)", rows)
    goals = latency_goals([row for row in rows if row["approach"] == "harness"], cores, max(loads))
    write_report("latency", rows, goals, [f"host load average {loads[0]:.1f} before, {loads[1]:.1f} after"],
                 {str(threads): p50 for threads, p50 in results.items()})


if __name__ == "__main__":
    main()
