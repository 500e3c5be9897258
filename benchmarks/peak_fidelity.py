"""Peak and average memory of known allocation profiles: the harness versus a `docker stats` poller.

    .venv/bin/python benchmarks/peak_fidelity.py [--mib 200] [--seconds 4] [--spike-ms 30] [--repeats 3]

Workloads (benchmarks/workloads/memory_shape.py): steady MIB for SECONDS; a SPIKE_MS spike of MIB between
two idle halves; a linear ramp to MIB over SECONDS. The truth is the known allocation plus the baseline
measured by an empty run of the same script (interpreter, runner and page cache): peak = baseline + MIB;
average = the empty run's average + the allocation's time integral (which the workload reports, timed on
its own clock) divided by the run's runtime.
The harness reports the kernel's high-water mark and the time-weighted mean of its 10 ms samples; a
poller's figures are replayed from those samples (benchmarks/_polling.py) at random phase offsets.
Runs on the local backend and, when an engine and the image exist, on Docker.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from _common import WORKLOADS, Goal, Session, docker_usable, farthest, pct, print_table, profile_runs, write_report
from _polling import poller_view, typical_and_worst

WORKLOAD = WORKLOADS / "memory_shape.py"
POLL_PERIODS_S = (1.0, 3.0)


def shape_args(shape: str, mib: int, seconds: float, spike_ms: float) -> list[str]:
    return [shape, str(mib), str(seconds), *([str(spike_ms)] if shape == "spike" else [])]


def run_rows(backend: str, shape: str, runs: list[dict[str, Any]], baseline: Session, args: argparse.Namespace,
             rng: np.random.Generator) -> tuple[dict[str, Any], dict[str, Any]]:
    """(peak row, average row) of one workload: the harness's worst error over its runs; the pollers' typical
    (median) and worst error over runs x phase offsets."""
    base_peak = statistics.median(run["peak_memory_mib"] for run in baseline.runs)
    base_avg = statistics.median(run["avg_memory_mib"] for run in baseline.runs)
    true_peak = base_peak + args.mib
    true_avg = [base_avg + run["metrics"]["allocation_mib_s"] / run["runtime_s"] for run in runs]
    head = {"backend": backend, "workload": shape}
    peak_row: dict[str, Any] = {**head, "true_mib": true_peak,
                                "harness_mib": statistics.median(run["peak_memory_mib"] for run in runs),
                                "harness_worst_%": farthest(pct(run["peak_memory_mib"], true_peak) for run in runs),
                                "sampled_10ms_worst_%": farthest(pct(run["sampled_peak_mib"], true_peak)
                                                                 for run in runs)}
    avg_row: dict[str, Any] = {**head, "true_avg_mib": statistics.median(true_avg),
                               "harness_avg_mib": statistics.median(run["avg_memory_mib"] for run in runs),
                               "harness_worst_%": farthest(pct(run["avg_memory_mib"], truth)
                                                           for run, truth in zip(runs, true_avg, strict=True))}
    for period in POLL_PERIODS_S:
        views = [poller_view(run["memory_samples"], period, rng) for run in runs]
        peak_err = np.concatenate([pct(view.peaks_mib, true_peak) for view in views])
        avg_err = np.concatenate([pct(view.means_mib, truth) for view, truth in zip(views, true_avg, strict=True)])
        label = f"poll_{period:g}s"
        peak_row[f"{label}_mib"] = float(np.median(np.concatenate([view.peaks_mib for view in views])))
        peak_row[f"{label}_err_%"], peak_row[f"{label}_worst_%"] = typical_and_worst(peak_err)
        avg_row[f"{label}_err_%"], avg_row[f"{label}_worst_%"] = typical_and_worst(avg_err)
    return peak_row, avg_row


def backend_rows(backend: str, args: argparse.Namespace, rng: np.random.Generator) -> list[tuple[dict, dict]]:
    with tempfile.TemporaryDirectory(prefix="bench-peak-") as tmp:
        directory = Path(tmp)
        directory.chmod(0o755)  # the placeholder model is made here; the container's user must be able to read it

        def session(shape: str, mib: int) -> Session:
            return profile_runs(directory, WORKLOAD, shape_args(shape, mib, args.seconds, args.spike_ms),
                                backend=backend, repeats=args.repeats, extra_flags=["--keep-samples"])

        baseline = session("steady", 0)
        return [run_rows(backend, shape, session(shape, args.mib).runs, baseline, args, rng)
                for shape in ("steady", "spike", "ramp")]


def goals_from(peak_rows: list[dict[str, Any]]) -> list[Goal]:
    """Informative: the worst peak error of each approach over every workload and backend."""
    def worst(column: str) -> float:
        return farthest(row[column] for row in peak_rows)

    spike = [row for row in peak_rows if row["workload"] == "spike"]
    return [Goal("peak error, worst case: harness (kernel high-water mark)", "-", f"{worst('harness_worst_%'):+.1f}%",
                 None),
            Goal("peak error, worst case: docker stats every 1 s / 3 s", "-",
                 f"{worst('poll_1s_worst_%'):+.1f}% / {worst('poll_3s_worst_%'):+.1f}%", None),
            Goal("spike peak error, typical: docker stats every 1 s / 3 s", "-",
                 f"{farthest(r['poll_1s_err_%'] for r in spike):+.1f}% / "
                 f"{farthest(r['poll_3s_err_%'] for r in spike):+.1f}%", None)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mib", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--spike-ms", type=float, default=30.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0, help="seed of the pollers' phase offsets")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    usable, reason = docker_usable()
    notes = [f"docker {'used' if usable else 'skipped'}: {reason}"]
    backends = ["local", *(["docker"] if usable else [])]
    pairs = [pair for backend in backends for pair in backend_rows(backend, args, rng)]
    peak_rows, avg_rows = [p for p, _ in pairs], [a for _, a in pairs]
    print_table(f"Peak memory (MiB; error vs truth = baseline + {args.mib} MiB; pollers: typical and worst "
                "over random phases)", peak_rows)
    print_table("Average memory (MiB; error vs the empty run's average + the allocation's time-weighted mean)",
                avg_rows)
    write_report("peak_fidelity", [*({"table": "peak", **row} for row in peak_rows),
                                   *({"table": "average", **row} for row in avg_rows)], goals_from(peak_rows), notes)


if __name__ == "__main__":
    main()
