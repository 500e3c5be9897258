"""Latency percentiles under a fractional CPUS: p50, p99, mean and throughput at CPUS 0.5, 1 and 2 for a model whose
inference (about 1.3 ms) is far shorter than the CFS quota period, and what a shorter period changes.

    .venv/bin/python benchmarks/fractional_cpus.py [--model mobilenet_v2_0.5_224] [--rounds 3] [--iterations 1500]

Under a quota the kernel lets the model run at full speed until the period's share is spent and then stalls it for
the rest of the period: at CPUS=0.5 with a 100 ms period, about 38 inferences run at the unlimited speed and one
absorbs a ~50 ms stall. The median then equals the CPUS=1 figure; the mean and throughput show the limit. Every
round runs each CPU plan once, in a shuffled order: CPUS 2 and 1 pinned to cores, CPUS 0.5 by quota over the
harness's period, and CPUS 0.5 over shorter periods (the stall is shorter, more frequent). Ratios are to the CPUS=1
runs of the same session; `tput_vs_default` compares each CPUS=0.5 period's throughput with the default period's
(below 1: a shorter period costs throughput). `cpus_used` (CPU seconds per wall second) tells a limit that binds
from a host whose other load leaves the run less than its CPUS: then the ratios show that load, not the limit.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

from _common import Goal, api_runs, print_table, write_report, zoo_model

from harness.measure.spec import CPU_PERIOD_US, CpuLimits, plan_cpu_limits

ALT_PERIODS_US = (100_000, 10_000, 5_000)


def cpu_plans() -> list[CpuLimits]:
    allowed = sorted(os.sched_getaffinity(0))
    plans = [plan_cpu_limits(cpus, "auto", allowed) for cpus in (2.0, 1.0, 0.5)]
    plans += [CpuLimits(0.5, None, period // 2, period) for period in ALT_PERIODS_US if period != CPU_PERIOD_US]
    return plans


def table(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[tuple[float, str, int], list[dict[str, Any]]] = {}
    for run in runs:
        limits = run["limits_requested"]
        groups.setdefault((float(run["cpus"]), limits["cpu_mode"], limits["cpu_period_us"]), []).append(run)

    def median(group: list[dict[str, Any]], key: str) -> float:
        return statistics.median(run["latency_stats_ms"][key] for run in group)

    one = next(group for (cpus, mode, _), group in groups.items() if cpus == 1.0 and mode == "pinned")
    default = groups[(0.5, "quota", CPU_PERIOD_US)]
    rows = []
    for (cpus, mode, period), group in sorted(groups.items(), key=lambda item: (-item[0][0], -item[0][2])):
        throughput = statistics.median(run["throughput_ips"] for run in group)
        rows.append({
            "cpus": cpus, "mode": mode, "period_ms": period / 1000 if mode == "quota" else "-", "runs": len(group),
            "p50_ms": median(group, "p50"), "p90_ms": median(group, "p90"), "p99_ms": median(group, "p99"),
            "mean_ms": median(group, "mean"), "throughput_ips": throughput,
            "p50_vs_cpus_1": median(group, "p50") / median(one, "p50"),
            "mean_vs_cpus_1": median(group, "mean") / median(one, "mean"),
            "tput_vs_default": throughput / statistics.median(r["throughput_ips"] for r in default) if cpus == 0.5
            else "-",
            "throttled_%": statistics.median(100 * r["cpu_nr_throttled"] / max(r["cpu_nr_periods"], 1) for r in group),
            "cpus_used": statistics.median(r["cpu_s"] / r["runtime_s"] for r in group),
        })
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="mobilenet_v2_0.5_224", help="a zoo name with ~1-5 ms latency")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=1500)
    parser.add_argument("--warmup", type=int, default=50)
    args = parser.parse_args()
    model = zoo_model(args.model)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-fractional-") as tmp:
        runs = api_runs(Path(tmp), model, cpu_plans(), rounds=args.rounds, iterations=args.iterations,
                        warmup=args.warmup)
    rows = table(runs)
    print_table(f"{args.model} at fractional and whole CPUS ({args.rounds} runs each, medians over runs)", rows)
    half = next(row for row in rows if row["cpus"] == 0.5 and row["period_ms"] == CPU_PERIOD_US / 1000)
    goals = [
        Goal("p50 at CPUS=0.5 (quota) relative to CPUS=1: the median hides the limit", "2 on a slower device",
             f"{half['p50_vs_cpus_1']:.2f}x", None),
        Goal("mean latency at CPUS=0.5 relative to CPUS=1 (the headline of quota runs)", "2x within 15%",
             f"{half['mean_vs_cpus_1']:.2f}x", abs(half["mean_vs_cpus_1"] / 2 - 1) <= 0.15),
        Goal("throughput at CPUS=0.5 for each shorter CFS period, relative to the default period", "-",
             ", ".join(f"{row['period_ms']:g} ms: {row['tput_vs_default']:.3f}" for row in rows
                       if row["cpus"] == 0.5 and row["period_ms"] != CPU_PERIOD_US / 1000), None),
    ]
    notes = [f"host load average {load_before:.1f} before and {os.getloadavg()[0]:.1f} after, on {os.cpu_count()} "
             "cores"]
    write_report("fractional_cpus", rows, goals, notes)


if __name__ == "__main__":
    main()
