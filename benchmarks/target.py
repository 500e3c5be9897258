"""TARGET against a local session: parity, overhead and the cost of setting up a board.

    .venv/bin/python benchmarks/target.py [--rounds 4] [--repeats 4] [--iterations 300]

Parity and overhead use a loopback board: this host's own sshd on 127.0.0.1 (benchmarks/_sshd.py), whose sessions find
this host's Python first, so a TARGET session runs on the same kernel, cores, cgroups and interpreter as a local one
and differs only by the SSH path and the board's agent. Each round runs one local session and one TARGET session of the
three example models under the same CPUS=1 and MEMORY=1g, in mirrored order from round to round. Parity compares each
model's median latency and mean peak memory over every round (goals: within 5% and 2%), beside the same figure between
the first and second half of the local sessions (local_a_a_pct: how far this host's own sessions move). Overhead: the
median per-run overhead_s (a run's wall time outside its script, as the backend sees it: for TARGET, from the host's
request to the board's answer) against the local one (goal: at most 0.2 s more), and per session the CLI's wall time
less its runs' runtime_s (goal: at most 5 s more, the board set up). Transfer: `harness target setup` of a container
board that has only Python and sshd (tests/boards: x86-bare; the arm64 board too where its image is built), from
nothing, with the megabytes sent and the seconds it took; skipped with a note where Docker or those images are missing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import ROOT, Goal, Session, harness, pct, print_table, profile_runs, write_report
from _sshd import loopback_board

EXAMPLES = sorted((ROOT / "examples" / "models").glob("*.onnx"))


STATISTIC = {"latency_ms": statistics.median, "peak_memory_mib": statistics.mean}
"""Latency by its median over the runs; peak memory by its mean, since it is bimodal on this host (a run's cgroup is
charged a model file's page-cache pages or not, a few MiB either way), and a median flips between the modes."""


def centre(sessions: list[Session], metric: str) -> dict[str, float]:
    values: dict[str, list[float]] = {}
    for session in sessions:
        for run in session.runs:
            value = run["latency_stats_ms"]["p50"] if metric == "latency_ms" else run[metric]
            values.setdefault(run["model_name"], []).append(value)
    return {model: STATISTIC[metric](found) for model, found in values.items()}


def outside_runs(session: Session) -> float:
    """The session's wall time less its runs' own runtime: what the session costs beyond its scripts."""
    return session.wall_s - sum(run["runtime_s"] for run in session.runs)


def parity(args: argparse.Namespace, folder: Path) -> tuple[list[dict[str, Any]], list[Goal], dict[str, Any]]:
    flags = ["--cpus", "1", "--memory", "1g", "--iterations", str(args.iterations), "--warmup", "20"]
    local: list[Session] = []
    target: list[Session] = []
    with loopback_board(folder / "sshd") as (url, config):
        os.environ["HARNESS_SSH_CONFIG"] = str(config)
        env = dict(os.environ)
        started = time.monotonic()
        harness("target", "setup", url, env=env)
        setup_s = time.monotonic() - started
        for round_index in range(args.rounds):
            order = ["local", "target"] if round_index % 2 == 0 else ["target", "local"]
            for kind in order:
                extra = ["--target", url] if kind == "target" else []
                session = profile_runs(folder / kind, None, [], backend="local", repeats=args.repeats,
                                       extra_flags=[*flags, *extra], models=EXAMPLES)
                (target if kind == "target" else local).append(session)
        harness("target", "clean", url, env=env)
    rows = []
    half = len(local) // 2
    for metric in ("latency_ms", "peak_memory_mib"):
        here, there = centre(local, metric), centre(target, metric)
        first, second = centre(local[:half], metric), centre(local[half:], metric)
        rows += [{"metric": metric, "statistic": STATISTIC[metric].__name__, "model": model, "local": here[model],
                  "target": there[model], "difference_pct": round(pct(there[model], here[model]), 2),
                  "local_a_a_pct": round(pct(second[model], first[model]), 2)} for model in sorted(here)]
    run_overhead = {kind: statistics.median(run["overhead_s"] for session in sessions for run in session.runs)
                    for kind, sessions in (("local", local), ("target", target))}
    session_overhead = {kind: statistics.median(outside_runs(session) for session in sessions)
                        for kind, sessions in (("local", local), ("target", target))}
    worst = {metric: max(abs(row["difference_pct"]) for row in rows if row["metric"] == metric)
             for metric in ("latency_ms", "peak_memory_mib")}
    per_run = run_overhead["target"] - run_overhead["local"]
    per_session = session_overhead["target"] - session_overhead["local"]
    goals = [
        Goal("parity: latency through TARGET against local, same CPUS and MEMORY", "within 5%",
             f"worst model {worst['latency_ms']:.2f}%", worst["latency_ms"] <= 5),
        Goal("parity: peak memory through TARGET against local (means)", "within 2%",
             f"worst model {worst['peak_memory_mib']:.2f}%", worst["peak_memory_mib"] <= 2),
        Goal("overhead per run above a local run (median overhead_s)", "<= 0.2 s",
             f"{per_run:+.3f} s (local {run_overhead['local']:.3f} s, target {run_overhead['target']:.3f} s)",
             per_run <= 0.2),
        Goal("overhead per session above a local one, board set up (wall time less the runs' runtime)", "<= 5 s",
             f"{per_session:+.2f} s (local {session_overhead['local']:.2f} s, target "
             f"{session_overhead['target']:.2f} s)", per_session <= 5),
    ]
    raw = {"run_overhead_s": run_overhead, "session_overhead_s": session_overhead, "loopback_setup_s": setup_s}
    return rows, goals, raw


def transfer(folder: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """`harness target setup` of fresh container boards that have only Python, timed."""
    sys.path.insert(0, str(ROOT))
    from tests.boards import board_available, start_board

    rows, notes = [], []
    for kind in ("x86-bare", "arm64"):
        usable, why = board_available(kind)
        if not usable:
            notes.append(f"transfer to a {kind} board not measured: {why}")
            continue
        board = start_board(kind, folder / kind, cpus=1, memory="1g")
        try:
            env = {**os.environ, "HARNESS_SSH_CONFIG": str(board.config)}
            started = time.monotonic()
            report = json.loads(harness("target", "setup", board.url, "--json", env=env).stdout)
            rows.append({"board": kind, "arch": board.arch, "packages": ", ".join(sorted(report["packages"])),
                         "mib_sent": round(report["bytes_sent"] / 1024**2, 1),
                         "seconds": round(time.monotonic() - started, 1),
                         "of_which_download_s": round(sum(v for k, v in report["seconds"].items()
                                                          if k.startswith("download")), 1)})
        finally:
            board.remove()
    return rows, notes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--iterations", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-target-") as tmp:
        rows, goals, raw = parity(args, Path(tmp))
        print_table("TARGET on a loopback board against a local session (medians over every round)", rows)
        setups, notes = transfer(Path(tmp))
    if setups:
        print_table("harness target setup of a board that has only Python", setups)
    goals.append(Goal("transfer: `harness target setup` of a board with only Python, from this host", "reported",
                      "; ".join(f"{r['board']}: {r['seconds']} s, {r['mib_sent']} MiB" for r in setups) or "not run",
                      None))
    for goal in goals:
        print(f"{'met' if goal.met else 'missed' if goal.met is False else 'figure'}: {goal.name}: {goal.measured} "
              f"(goal {goal.target})")
    write_report("target", rows, goals, notes=notes, raw=raw, tables={"transfer": setups})


if __name__ == "__main__":
    main()
