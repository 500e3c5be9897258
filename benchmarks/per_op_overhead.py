"""What PER_OP costs: the headline latency of --per-op sessions against sessions without it (goal: within 2%),
the profiler's own overhead inside each run, the coverage of the per-op sum, and the extra wall time per run.

    .venv/bin/python benchmarks/per_op_overhead.py [--model mobilenet_v2_1.0_224] [--runs 6] [--cpus 1]

K one-run sessions with --per-op interleaved with K without (local backend, CPUS pinned), alternating which
goes first. The headline is each run's steady-phase p50; it is judged on the median of the paired ratios
(per-op run / the plain run next to it), which a change of the host's speed between pairs does not bias.
The profiler's overhead is measured inside each per-op run: median latency of its profiled inferences against
the median of its own steady phase (same process, same limits). Coverage = per-op sum / steady mean latency.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

from _common import ONNX_BENCH, Goal, print_table, profile_runs, write_report, zoo_model

GOAL_HEADLINE_PCT = 2.0
GOAL_COVERAGE = 0.8


def interleaved(model: Path, directory: Path, args: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    flags = ["--cpus", args.cpus, "--iterations", str(args.iterations), "--warmup", str(args.warmup)]
    runs: dict[str, list[dict[str, Any]]] = {"plain": [], "per_op": []}
    for index in range(args.runs):
        for which in ("plain", "per_op") if index % 2 == 0 else ("per_op", "plain"):
            extra = [*flags, "--per-op"] if which == "per_op" else flags
            (run,) = profile_runs(directory, ONNX_BENCH, [], backend="local", repeats=1, models=[model],
                                  extra_flags=extra).runs
            runs[which].append(run)
    return runs


def summary_row(runs: dict[str, list[dict[str, Any]]], cpus: str) -> dict[str, Any]:
    plain = [run["latency_stats_ms"]["p50"] for run in runs["plain"]]
    per_op = [run["latency_stats_ms"]["p50"] for run in runs["per_op"]]
    paired = statistics.median(p / b for p, b in zip(per_op, plain, strict=True))
    coverage = [run["per_op"]["coverage"] for run in runs["per_op"]]
    wall = statistics.median(r["runtime_s"] for r in runs["per_op"]) - statistics.median(
        r["runtime_s"] for r in runs["plain"])
    return {"cpus": cpus, "pairs": len(plain), "plain_p50_ms": statistics.median(plain),
            "per_op_p50_ms": statistics.median(per_op), "headline_paired_diff_%": 100 * (paired - 1),
            "profiler_overhead_%": 100 * statistics.median(c["profiling_overhead"] for c in coverage),
            "coverage_%": 100 * statistics.median(c["coverage"] for c in coverage),
            "between_ops_ms": statistics.median(c["between_ops_ms"] for c in coverage),
            "outside_run_ms": statistics.median(c["outside_run_ms"] for c in coverage),
            "extra_runtime_s": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="mobilenet_v2_1.0_224")
    parser.add_argument("--runs", type=int, default=6, help="K pairs")
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--cpus", default="1")
    args = parser.parse_args()
    model = zoo_model(args.model)
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="bench-per-op-") as tmp:
        runs = interleaved(model, Path(tmp), args)
    loads.append(os.getloadavg()[0])
    row = summary_row(runs, args.cpus)
    print_table(f"PER_OP cost on {args.model}, CPUS={args.cpus}: {args.runs} --per-op sessions interleaved with "
                f"{args.runs} without (goal: headline within {GOAL_HEADLINE_PCT:.0f}%)", [row])
    goals = [
        Goal(f"headline latency p50 of --per-op runs vs plain runs (paired), CPUS={args.cpus}",
             f"within {GOAL_HEADLINE_PCT:.0f}%", f"{row['headline_paired_diff_%']:+.2f}%",
             abs(row["headline_paired_diff_%"]) <= GOAL_HEADLINE_PCT),
        Goal(f"per-op sum / steady mean latency, CPUS={args.cpus}", f">= {GOAL_COVERAGE:.0%}",
             f"{row['coverage_%']:.1f}%", row["coverage_%"] >= 100 * GOAL_COVERAGE),
        Goal("profiler overhead inside a run (profiled vs steady median latency)", "reported",
             f"{row['profiler_overhead_%']:+.2f}%", None),
    ]
    write_report("per_op_overhead", [row], goals, [f"host load average {loads[0]:.1f} before, {loads[1]:.1f} after"],
                 {which: [r["latency_stats_ms"]["p50"] for r in items] for which, items in runs.items()})


if __name__ == "__main__":
    main()
