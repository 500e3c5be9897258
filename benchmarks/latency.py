"""Latency of one model bare versus under the harness with no limit that binds (goal: within 2%).

    .venv/bin/python benchmarks/latency.py [--model mobilenet_v2_0.5_224] [--runs 10] [--iterations 500]

Bare = bench_scripts/onnx_bench.py run directly with the same flags, HARNESS_METRICS pointing at a temp
file. K bare runs interleaved with K one-run harness sessions (local backend, every host core, all host
memory), alternating which goes first; each run gives its median latency. Compared: the medians of both
sides, and the median of the paired ratios (harness run / the bare run next to it), which a change of the
host's speed between pairs (another process taking a core) does not bias; the goal is judged on it.
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
                p50["harness"].append(run["latency_stats_ms"]["p50"])
    return p50


def row_for(threads: int, p50: dict[str, list[float]]) -> dict[str, Any]:
    """Both sides' medians, and the median of the paired ratios (each harness run over the bare run next to it,
    so a change of the host's speed during the benchmark hits both sides of a pair alike)."""
    bare, harness = p50["bare"], p50["harness"]
    paired = statistics.median(h / b for h, b in zip(harness, bare, strict=True))
    return {"threads": threads, "pairs": len(bare), "bare_p50_ms": statistics.median(bare),
            "harness_p50_ms": statistics.median(harness),
            "medians_diff_%": pct(statistics.median(harness), statistics.median(bare)),
            "paired_diff_%": 100 * (paired - 1), "bare_range_ms": f"{min(bare):.3f}-{max(bare):.3f}",
            "harness_range_ms": f"{min(harness):.3f}-{max(harness):.3f}"}


def latency_goal(row: dict[str, Any], cores: int, load: float) -> Goal:
    """Judged on the paired figure; a gap between the two medians beyond the goal is named with its cause."""
    unpaired_off = abs(row["medians_diff_%"]) > GOAL_LATENCY_PCT
    return Goal(f"latency p50, harness vs bare (paired), {row['threads']} thread(s) on {cores} cores",
                f"within {GOAL_LATENCY_PCT:.0f}%", f"{row['paired_diff_%']:+.2f}%",
                abs(row["paired_diff_%"]) <= GOAL_LATENCY_PCT,
                f"the two medians differ by {row['medians_diff_%']:+.2f}%: the host's speed changed during the runs "
                f"(bare p50 {row['bare_range_ms']} ms; load average up to {load:.1f})" if unpaired_off else "")


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
    rows = [row_for(threads, p50) for threads, p50 in results.items()]
    print_table(f"Latency p50 of {args.model}: {args.runs} bare runs interleaved with {args.runs} harness runs, no "
                f"binding limits (goal: within {GOAL_LATENCY_PCT:.0f}%)", rows)
    goals = [latency_goal(row, cores, max(loads)) for row in rows]
    write_report("latency", rows, goals, [f"host load average {loads[0]:.1f} before, {loads[1]:.1f} after"],
                 {str(threads): p50 for threads, p50 in results.items()})


if __name__ == "__main__":
    main()
