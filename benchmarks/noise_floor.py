"""Noise floor: an A/A session (one model file copied under two names) and how often the ranking calls the
two identical models different (goal: never).

    .venv/bin/python benchmarks/noise_floor.py [--model mobilenet_v2_0.5_224] [--repeats 10] [--subset 5]

One interleaved session of both copies, REPEATS runs each. For every metric the ranking compares: the
verdict on the whole session (harness.analysis.ranking.rank_runs), and the share of random SUBSET-vs-SUBSET draws
of those runs (SUBSET = the default REPEATS) that harness.analysis.ranking.compare calls significantly different.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from _common import Goal, pct, print_table, profile_runs, write_report, zoo_model

from harness.analysis.ranking import ALPHA, MIN_RELATIVE_GAP, compare, rank_runs
from harness.analysis.run_values import metric_table
from harness.core import metric_registry

COPIES = ("copy_a", "copy_b")


def false_calls(a: list[float], b: list[float], subset: int, draws: int,
                rng: np.random.Generator) -> tuple[float, float]:
    """Random subset-vs-subset draws (without replacement): (share that compare() calls different, the widest
    gap between the two medians among those calls, in percent; 0 without calls)."""
    gaps = []
    for _ in range(draws):
        sub_a, sub_b = rng.choice(a, subset, replace=False), rng.choice(b, subset, replace=False)
        if compare(list(sub_a), list(sub_b)).separated:
            gaps.append(abs(pct(float(np.median(sub_b)), float(np.median(sub_a)))))
    return len(gaps) / draws, max(gaps, default=0.0)


def metric_row(runs: list[dict[str, Any]], metric: str, args: argparse.Namespace,
               rng: np.random.Generator) -> dict[str, Any]:
    (entries,) = rank_runs(runs, metric).values()
    by_name = {entry.model: entry for entry in entries}
    first, second = (by_name[name] for name in COPIES)
    table = metric_table(runs, metric)
    values = [table.loc[table["model_name"] == name, "value"].tolist() for name in COPIES]
    decider = entries[-1]  # the worse median of the two carries their pair's test
    rate, gap = false_calls(*values, args.subset, args.draws, rng)
    spread = max(100 * float(np.subtract(*np.percentile(v, [75, 25])) / np.median(v)) for v in values)
    return {"metric": metric, "median_a": first.median, "median_b": second.median,
            "b_over_a": second.median / first.median, "rank_a": first.rank, "rank_b": second.rank,
            "p_value": "-" if decider.p_value is None else f"{decider.p_value:.3f}",
            "spread_iqr_over_median_%": spread,
            f"called_different_{args.subset}v{args.subset}_%": 100 * rate, "widest_gap_called_%": gap}


def aa_goals(rows: list[dict[str, Any]], args: argparse.Namespace) -> list[Goal]:
    """Identical files must never be ranked apart: on the whole session, and on REPEATS-sized draws of it."""
    rate_column = f"called_different_{args.subset}v{args.subset}_%"
    worst = max(rows, key=lambda row: row[rate_column])
    why = (f"the copies' runs spread by up to {worst['spread_iqr_over_median_%']:.0f}% (IQR/median) on this host, "
           f"so medians of {args.subset} runs drift past the {MIN_RELATIVE_GAP:.0%} minimum factor by chance, and "
           f"Mann-Whitney at alpha {ALPHA} calls such a chance gap in up to {ALPHA:.0%} of draws; on a quiet host "
           "the spread, and so the gaps, stay small")
    split = [row for row in rows if row["rank_a"] != row["rank_b"]]
    return [Goal(f"A/A, whole session ({args.repeats} v {args.repeats}): metrics ranked apart", "none",
                 ", ".join(f"{row['metric']} ({100 * (row['b_over_a'] - 1):+.2f}%, p {row['p_value']})"
                           for row in split) or "none", not split, f"median gaps this small: {why}" if split else ""),
            Goal(f"A/A, {args.subset} v {args.subset} draws called different (worst metric)", "never",
                 f"{worst[rate_column]:.1f}% ({worst['metric']})", worst[rate_column] == 0,
                 f"over median gaps of at most {worst['widest_gap_called_%']:.2g}%: {why}"
                 if worst[rate_column] else "")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="mobilenet_v2_0.5_224")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--subset", type=int, default=5, help="runs per model in each draw (default REPEATS)")
    parser.add_argument("--draws", type=int, default=1000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(prefix="bench-aa-") as tmp:
        directory = Path(tmp)
        source = zoo_model(args.model)
        copies = [Path(shutil.copy(source, directory / f"{name}.onnx")) for name in COPIES]
        runs = profile_runs(directory, None, [], backend="local", repeats=args.repeats, models=copies,
                            extra_flags=["--cpus", "1", "--iterations", str(args.iterations)]).runs
    metrics = [m.name for m in metric_registry.calibrated()]
    rows = [metric_row(runs, metric, args, rng) for metric in metrics]
    raw = {metric: {name: metric_table(runs, metric).query("model_name == @name")["value"].tolist()
                    for name in COPIES} for metric in metrics}
    print_table(f"A/A: {args.model} twice in one session, {args.repeats} runs each (ranking at alpha {ALPHA})", rows)
    goals = aa_goals(rows, args)
    write_report("noise_floor", rows, goals, raw=raw)


if __name__ == "__main__":
    main()
