"""Parallel slots: a CPUS=1 sweep with --parallel 2 against the same sweep serial (goal: <= 0.6x the wall time),
and the interference a co-runner on the other cores causes (latency and runtime medians, alone vs paired).

    .venv/bin/python benchmarks/parallel_interference.py [--model mobilenet_v2_0.5_224] [--pairs 2] [--repeats 6]
                                                         [--iterations 400]

One interleaved benchmark: PAIRS serial sessions and PAIRS `--parallel 2` sessions of the same sweep (one model,
CPUS=1, REPEATS runs, local backend), in mirrored order (S P P S S P ...) against drift of the host's load.
Wall time is each CLI session's whole time (start-up, every run, teardown; --no-report, since the report
after the runs is the same for both). In a serial session every run is
alone on the host; in a parallel one each run has the same model beside it on the other core (its
`concurrent_runs` is 2). Interference = median over the paired runs / median over the lone runs - 1, for the
per-run latency p50 and for runtime_s; the worse of the two is stored with this host's name and CPU model in
results/bench/parallel_interference.json, which `--parallel auto` reads: above the unstable threshold (10%)
it stays serial on this host, with a note.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

from _common import Goal, pct, print_table, profile_runs, write_report, zoo_model

from harness.measure.provenance import cpu_model
from harness.run.slots import INTERFERENCE_LIMIT

GOAL_WALL_RATIO = 0.6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="mobilenet_v2_0.5_224", help="zoo model name")
    parser.add_argument("--pairs", type=int, default=2, help="serial and parallel sessions, each")
    parser.add_argument("--repeats", type=int, default=6, help="runs per session")
    parser.add_argument("--iterations", type=int, default=400)
    args = parser.parse_args()
    if len(os.sched_getaffinity(0)) < 2:
        raise SystemExit("parallel_interference needs at least 2 allowed cores")
    model = zoo_model(args.model)
    flags = ["--cpus", "1", "--memory", "1g", "--iterations", str(args.iterations), "--warmup", "10", "--no-report"]
    walls: dict[str, list[float]] = {"serial": [], "parallel": []}
    p50: dict[str, list[float]] = {"serial": [], "parallel": []}
    runtime: dict[str, list[float]] = {"serial": [], "parallel": []}
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="bench-parallel-") as tmp:
        for index in range(args.pairs):
            for mode in ("serial", "parallel") if index % 2 == 0 else ("parallel", "serial"):
                extra = [*flags, *(["--parallel", "2"] if mode == "parallel" else [])]
                session = profile_runs(Path(tmp), None, [], backend="local", repeats=args.repeats, models=[model],
                                       extra_flags=extra, command="sweep")
                walls[mode].append(session.wall_s)
                wanted = 2 if mode == "parallel" else 1
                runs = [run for run in session.runs if run["concurrent_runs"] == wanted]
                p50[mode] += [run["latency_stats_ms"]["p50"] for run in runs]
                runtime[mode] += [run["runtime_s"] for run in runs]
                loads.append(os.getloadavg()[0])
    wall_ratio = statistics.median(walls["parallel"]) / statistics.median(walls["serial"])
    latency = pct(statistics.median(p50["parallel"]), statistics.median(p50["serial"])) / 100
    run_time = pct(statistics.median(runtime["parallel"]), statistics.median(runtime["serial"])) / 100
    worst = max(abs(latency), abs(run_time))
    rows = [{"mode": mode, "sessions": len(walls[mode]), "wall_s_median": statistics.median(walls[mode]),
             "runs_counted": len(p50[mode]), "latency_p50_ms_median": statistics.median(p50[mode]),
             "runtime_s_median": statistics.median(runtime[mode])} for mode in ("serial", "parallel")]
    print_table(f"{args.model}, CPUS=1, {args.repeats} runs per session: serial vs --parallel 2", rows)
    print(f"wall time parallel/serial: {wall_ratio:.2f}x · interference: latency p50 {latency:+.1%}, "
          f"runtime {run_time:+.1%} · host load (1 min) {min(loads):.1f}-{max(loads):.1f} on "
          f"{os.cpu_count()} cores")
    goals = [
        Goal("--parallel 2 wall time vs serial (CPUS=1 sweep)", f"<= {GOAL_WALL_RATIO}x", f"{wall_ratio:.2f}x",
             wall_ratio <= GOAL_WALL_RATIO,
             "" if wall_ratio <= GOAL_WALL_RATIO else f"host load average {max(loads):.1f} during the benchmark"),
        Goal("co-runner interference, latency p50 median", f"<= {INTERFERENCE_LIMIT:.0%} for --parallel auto",
             f"{latency:+.1%}", None),
        Goal("co-runner interference, runtime median", f"<= {INTERFERENCE_LIMIT:.0%} for --parallel auto",
             f"{run_time:+.1%}", None,
             "auto runs in parallel on this host" if worst <= INTERFERENCE_LIMIT else "auto stays serial on this host"),
    ]
    notes = [f"1-minute load average {min(loads):.1f} to {max(loads):.1f} during the benchmark "
             f"({os.cpu_count()} cores): other processes share the cores, so both modes ran beside them"]
    interference = {"hostname": platform.node(), "host_cpu_model": cpu_model(), "latency": latency,
                    "runtime": run_time, "worst": worst, "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                    "model": args.model}
    write_report("parallel_interference", rows, goals, notes,
                 raw={"interference": interference, "wall_s": walls, "latency_p50_ms": p50, "runtime_s": runtime,
                      "load_average": loads})


if __name__ == "__main__":
    main()
