"""What the harness costs in wall time: one session of K runs against K bare runs of the same script.

    .venv/bin/python benchmarks/overhead.py [--model mobilenet_v2_0.5_224] [--runs 10] [--iterations 1000]

Bare = bench_scripts/onnx_bench.py run directly with the same flags, no harness, timed from spawn to exit.
Both run one intra-op thread, so the script's own speed does not depend on whether another process holds the
host's other core (benchmarks/latency.py compares latency with every core too). K bare runs, then one harness
session of K runs per backend (every host core, all host memory: no limit that binds) timed whole, CLI
start-up included; then all again in mirrored order. The ratio depends on the run length, so the fixed costs
are reported too: per run (`overhead_s`: runner start, cgroup or container create and teardown, which
runtime_s excludes) and per session (CLI start-up, provenance, image probe), and the run length from which the
ratio would meet the goal. `vs_own_runtime` divides by the session's own runtime_s instead: the harness's cost
alone, whatever the script's speed inside the limited environment. The same runs give the runner's CPU use at
the 10 ms sampling interval.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import (
    ONNX_BENCH,
    Goal,
    Session,
    bare_run,
    docker_usable,
    print_table,
    profile_runs,
    unbound_limit_flags,
    write_report,
    zoo_model,
)

GOAL_WALL_RATIO, GOAL_RUNNER_CPU_PCT = 1.10, 2.0
ONE_THREAD = ["--threads", "1"]  # the script's own speed then does not hang on whether another process holds a core


def measure(model: Path, directory: Path, approaches: list[str], args: argparse.Namespace,
            ) -> tuple[list[float], dict[str, list[Session]]]:
    """Two rounds, the second in reverse order (bare, local, docker, docker, local, bare), so a linear drift of
    the host's load weighs on every approach alike: (bare walls, each backend's sessions of K runs)."""
    flags = unbound_limit_flags(args.iterations, args.warmup)
    bare_args = [str(model), "--iterations", str(args.iterations), "--warmup", str(args.warmup), *ONE_THREAD]
    walls: list[float] = []
    sessions: dict[str, list[Session]] = {backend: [] for backend in approaches if backend != "bare"}
    for order in (approaches, approaches[::-1]):
        for approach in order:
            if approach == "bare":
                walls += [bare_run(ONNX_BENCH, bare_args)[0] for _ in range(args.runs)]
            else:
                sessions[approach].append(profile_runs(directory, ONNX_BENCH, ONE_THREAD, backend=approach,
                                                       repeats=args.runs, models=[model], extra_flags=flags))
    return walls, sessions


def wall_row(name: str, sessions: list[Session], bare_sum_s: float, runs: int) -> dict[str, Any]:
    """Where the sessions' wall time went, and the run length at which their ratio to bare would meet the goal."""
    all_runs = [run for session in sessions for run in session.runs]
    wall = sum(session.wall_s for session in sessions)
    runtime = sum(run["runtime_s"] for run in all_runs)
    per_run = statistics.median(run["overhead_s"] for run in all_runs)
    per_session = (wall - runtime - sum(run["overhead_s"] for run in all_runs)) / len(sessions)
    return {"approach": name, "runs": len(all_runs), "total_wall_s": wall, "script_runtime_s": runtime,
            "per_run_overhead_s": per_run, "session_startup_s": per_session, "ratio_vs_bare": wall / bare_sum_s,
            "vs_own_runtime": wall / runtime,
            "goal_met_from_run_s": (per_session / runs + per_run) / (GOAL_WALL_RATIO - 1)}


def cli_start_s() -> float:
    """What the CLI alone costs before any work: `harness --help`, median of three."""
    times = []
    for _ in range(3):
        started = time.monotonic()
        subprocess.run([sys.executable, "-m", "harness.cli", "--help"], stdout=subprocess.DEVNULL, check=True)
        times.append(time.monotonic() - started)
    return statistics.median(times)


def wall_goals(wall_rows: list[dict[str, Any]], runs: int, cli_s: float) -> list[Goal]:
    return [Goal(f"wall time of {runs}-run sessions, {row['approach']} / bare", f"<= {GOAL_WALL_RATIO:.2f}x",
                 f"{row['ratio_vs_bare']:.3f}x", row["ratio_vs_bare"] <= GOAL_WALL_RATIO,
                 f"{row['per_run_overhead_s']:.2f} s per run (outside runtime_s) + {row['session_startup_s']:.1f} s "
                 f"per session (`harness --help` alone: {cli_s:.1f} s), {row['vs_own_runtime']:.3f}x its own "
                 "runtime_s; meets the goal for runs >= "
                 f"{row['goal_met_from_run_s']:.1f} s (these: {row['script_runtime_s'] / row['runs']:.1f} s)")
            for row in wall_rows if row["approach"] != "bare script"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="mobilenet_v2_0.5_224", help="a zoo name with ~1-5 ms latency")
    parser.add_argument("--runs", type=int, default=10, help="K")
    parser.add_argument("--iterations", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=20)
    args = parser.parse_args()
    model = zoo_model(args.model)
    usable, reason = docker_usable()
    with tempfile.TemporaryDirectory(prefix="bench-overhead-") as tmp:
        walls, sessions = measure(model, Path(tmp), ["bare", "local", *(["docker"] if usable else [])], args)
    bare = {"approach": "bare script", "runs": len(walls), "total_wall_s": sum(walls), "script_runtime_s": sum(walls),
            "per_run_overhead_s": 0.0, "session_startup_s": 0.0, "ratio_vs_bare": 1.0, "vs_own_runtime": 1.0,
            "goal_met_from_run_s": 0.0}
    wall_rows = [bare, *(wall_row(f"harness {name}", runs, sum(walls), args.runs) for name, runs in sessions.items())]
    cpu_pct = [100 * run["runner_cpu_s"] / run["runtime_s"] for session in sessions["local"] for run in session.runs]
    print_table(f"Wall time of {args.model} ({args.iterations} iterations): {args.runs} bare runs, a harness session "
                f"of {args.runs}, twice in mirrored order (goal <= {GOAL_WALL_RATIO:.2f}x)", wall_rows)
    goals = [*wall_goals(wall_rows, args.runs, cli_start_s()),
             Goal("runner CPU at 10 ms sampling (worst run, real model)", f"< {GOAL_RUNNER_CPU_PCT:.0f}% of one core",
                  f"{max(cpu_pct):.2f}% (median {statistics.median(cpu_pct):.2f}%)",
                  max(cpu_pct) < GOAL_RUNNER_CPU_PCT)]
    raw = {"bare_runtime_s": walls, **{name: [{"wall_s": session.wall_s, **{
        key: [run[key] for run in session.runs] for key in ("runtime_s", "overhead_s", "runner_cpu_s")}}
        for session in runs] for name, runs in sessions.items()}}
    write_report("overhead", wall_rows, goals, [f"docker {'used' if usable else 'skipped'}: {reason}"], raw)


if __name__ == "__main__":
    main()
