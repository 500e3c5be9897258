"""Repeatability: the same models profiled in two sessions, and how far each model's median latency moves between
them (goal: at least 95% of models within ±5% at the defaults).

    .venv/bin/python benchmarks/repeatability.py [--models a b ...] [--runtimes onnxruntime ncnn] [--repeats N]
                                                 [--precision PCT] [--latency-statistic p50|p05] [--iterations N]

For each engine, two `harness profile` sessions of the same models, one after the other, at the defaults (REPEATS,
PRECISION and adaptive repeats, LATENCY_STATISTIC, ITERATIONS, CPUS=1 pinned where the host allows it) unless flags
say otherwise (`--precision 0`: REPEATS rounds only, the figures without adaptive repeats). Beside the headline's
figures, the same runs read by the other LATENCY_STATISTIC (p05 beside p50, or p50 beside p05). Per model: each
session's median of its runs' latency (the ranking's latency_ms), their relative difference, its runs, and within one
session the spread of its runs (IQR / median). Printed: the share of models within ±5% and ±10% between the sessions,
the median and worst difference, the share of models whose runs spread more than 10% in a session, the runs per model
and the minutes per session, and the machine's noise during the runs (harness.measure.host_load: the cores busy
besides the runs, the share of noisy runs). Every figure is of this host at the time it ran: another host, or a busier
hour, gives others.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path
from typing import Any

from _common import Goal, load_note, print_table, profile_runs, write_report, zoo_model

from harness.core import metric_registry
from harness.core.config import VARIABLES
from harness.core.records import RunRecord

MODELS = ("mobilenet_v1_0.25_128", "mobilenet_v2_0.35_224", "mnasnet_0.5_224", "squeezenet1_1", "shufflenet_v2_x0_5",
          "mobilenet_v3_small_0.75_224", "ghostnet_0.5_224", "kws_dscnn", "resnet8_cifar10", "efficientnet_lite0")
"""Ten models of ten families, small enough that two sessions of each engine take minutes on 2 cores."""
WITHIN = (0.05, 0.10)
GOAL_SHARE = 0.95  # of models within ±5% between sessions
SPREAD = 0.10  # a session's IQR / median above which a model's repeats spread too much (the summary's `unstable`)


def medians(runs: list[RunRecord], statistic: str | None = None) -> dict[str, tuple[float, float, int]]:
    """Per model: the median of its runs' latency (their headline, or `statistic` of latency_stats_ms), their IQR /
    median, and how many runs it took."""
    value = metric_registry.get(metric_registry.LATENCY).value
    per_model: dict[str, list[float]] = {}
    for run in runs:
        found = (value(run.line) if statistic is None else (run.result.latency_stats_ms or {}).get(statistic)
                 ) if run.ok else None
        if found is not None:
            per_model.setdefault(run.model_name.rsplit("-", 1)[0], []).append(float(found))  # the zoo name
    out = {}
    for model, values in per_model.items():
        q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
        middle = statistics.median(values)
        out[model] = (middle, (q[2] - q[0]) / middle, len(values))
    return out


def noise(runs: list[RunRecord]) -> dict[str, float]:
    """The machine during a session's runs: the mean cores busy besides them, and the share of noisy runs."""
    loads = [run.result.host_load or {} for run in runs]
    busy = [load["other_cores"] for load in loads if load.get("other_cores") is not None]
    return {"other cores": statistics.fmean(busy) if busy else float("nan"),
            "noisy runs": sum(bool(load.get("noisy")) for load in loads) / len(loads)}


def compare_sessions(first: dict[str, tuple[float, float, int]], second: dict[str, tuple[float, float, int]]
                     ) -> tuple[list[dict[str, Any]], dict[str, float]]:
    rows, differences, spreads, counts = [], [], [], []
    for model in sorted(set(first) & set(second)):
        (a, spread_a, runs_a), (b, spread_b, runs_b) = first[model], second[model]
        difference = (b - a) / a
        differences.append(abs(difference))
        spreads += [spread_a, spread_b]
        counts += [runs_a, runs_b]
        rows.append({"model": model, "session 1 ms": a, "session 2 ms": b, "difference %": 100 * difference,
                     "IQR/median 1 %": 100 * spread_a, "IQR/median 2 %": 100 * spread_b,
                     "runs 1": runs_a, "runs 2": runs_b})
    summary = {f"within ±{w:.0%}": sum(d <= w for d in differences) / len(differences) for w in WITHIN}
    summary |= {"median difference %": 100 * statistics.median(differences),
                "worst difference %": 100 * max(differences),
                "repeats spread > 10%": sum(s > SPREAD for s in spreads) / len(spreads),
                "runs per model": statistics.fmean(counts)}
    return rows, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--runtimes", nargs="+", default=["onnxruntime", "ncnn"])
    parser.add_argument("--repeats", type=int, help="REPEATS (default: the harness's default)")
    parser.add_argument("--iterations", type=int, help="ITERATIONS (default: the harness's default)")
    parser.add_argument("--precision", type=float, help="PRECISION in %% (default: the harness's default; 0: off)")
    parser.add_argument("--latency-statistic", choices=("p50", "p05"), default=VARIABLES["LATENCY_STATISTIC"][3],
                        help="LATENCY_STATISTIC (default: the harness's default); the other is printed beside it, "
                             "from the same runs")
    args = parser.parse_args()
    files = [zoo_model(name) for name in args.models]
    repeats = args.repeats or int(VARIABLES["REPEATS"][3])
    flags = ["--cpus", "1", *(["--iterations", str(args.iterations)] if args.iterations else []),
             *(["--precision", f"{args.precision:g}"] if args.precision is not None else []),
             "--latency-statistic", args.latency_statistic]
    notes, goals, summaries, tables = [load_note("at the start")], [], [], {}
    for runtime in args.runtimes:
        with tempfile.TemporaryDirectory(prefix="bench-repeatability-") as tmp:
            sessions = [profile_runs(Path(tmp), None, [], backend="local", repeats=repeats, models=files,
                                     extra_flags=[*flags, "--runtime", runtime]) for _ in range(2)]
        rows, summary = compare_sessions(*(medians(session.runs) for session in sessions))
        other = "p50" if args.latency_statistic == "p05" else "p05"  # the same runs, read by the other statistic
        _, beside = compare_sessions(*(medians(session.runs, other) for session in sessions))
        summary |= {f"{other}: within ±{w:.0%}": beside[f"within ±{w:.0%}"] for w in WITHIN}
        summary["minutes per session"] = statistics.fmean((s.ended_s - s.started_s) / 60 for s in sessions)
        for name in ("other cores", "noisy runs"):
            summary[name] = statistics.fmean(noise(session.runs)[name] for session in sessions)
        print_table(f"{runtime}: median latency in two sessions", rows)
        tables[runtime] = rows
        summaries.append({"runtime": runtime, "models": len(rows), **summary})
        share = summary["within ±5%"]
        goals.append(Goal(f"{runtime}: models within ±5% between two sessions", f">= {GOAL_SHARE:.0%}", f"{share:.0%}",
                          share >= GOAL_SHARE, "" if share >= GOAL_SHARE else
                          f"median difference {summary['median difference %']:.1f}%, worst "
                          f"{summary['worst difference %']:.1f}%"))
    notes.append(load_note("at the end"))
    print_table("repeatability between two sessions", summaries)
    write_report("repeatability", summaries, goals, notes, tables=tables)


if __name__ == "__main__":
    main()
