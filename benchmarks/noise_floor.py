"""Noise floor: an A/A session (one model file copied under two names) and how often the ranking calls the two
identical models different (goal: never on the whole session, and at most alpha in sessions of a few repeats).

    .venv/bin/python benchmarks/noise_floor.py [--model mobilenet_v2_0.5_224] [--repeats 30] [--iterations 300]

One interleaved session of both copies, REPEATS rounds (each round runs both, in a shuffled order). For every metric
the ranking compares: the verdict on the whole session (harness.analysis.ranking.rank_runs), then the share of
draws of n of its rounds (n = 5, and n = 8, where the paired test can reach alpha) that
harness.analysis.ranking.compare calls different, each draw holding both copies' runs of the same rounds, as a
session of n repeats would. Beside them, why the runs of one session are not independent draws: the lag-1
autocorrelation of the per-run values in the order they ran (the host drifts), their correlation within a round,
and what the earlier design of this benchmark measured: 5 runs of each copy drawn independently (so from different
rounds, times apart), compared unpaired with Mann–Whitney; and, with copy_b's runs made 15% slower, how often 8
rounds show it to each test (the paired test's power against the unpaired one's). Every figure is conditional on
this one session: another session of the same host gives other draws.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from _common import Goal, load_note, pct, print_table, profile_runs, write_report, zoo_model

from harness.analysis.ranking import ALPHA, compare, rank_runs
from harness.core import metric_registry
from harness.core.records import RunRecord

COPIES = ("copy_a", "copy_b")
ROUND_DRAWS = (5, 8)
POWER_CHECK_GAP = 0.15  # a real difference of this size, added to one copy's runs, to compare the tests' power


def by_round(runs: list[RunRecord], metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(copy_a's values, copy_b's values) of the rounds both reported the metric in, and every value in the order
    the runs ran (runs.jsonl is written in that order by a serial session)."""
    value = metric_registry.get(metric).value
    per_copy: dict[str, dict[int, float]] = {name: {} for name in COPIES}
    sequence = []
    for run in runs:
        found = value(run.line) if run.ok else None
        if found is not None:
            per_copy[run["model_name"]][run["round"]] = found
            sequence.append(found)
    common = sorted(set(per_copy[COPIES[0]]) & set(per_copy[COPIES[1]]))
    a, b = (np.array([per_copy[name][r] for r in common]) for name in COPIES)
    return a, b, np.array(sequence)


def called_different(a: np.ndarray, b: np.ndarray, rounds: int, draws: int, rng: np.random.Generator,
                     paired: bool, same_rounds: bool | None = None) -> tuple[float, float]:
    """(share of draws called different, widest median gap among them in percent). `rounds` rounds drawn, both
    copies' runs of each, as a session of `rounds` repeats has them, unless `same_rounds` is False: then `rounds`
    runs of each copy are drawn independently of the other's (the earlier design). Compared paired (the ranking's
    test for models run side by side) or unpaired (Mann–Whitney)."""
    same_rounds = paired if same_rounds is None else same_rounds
    gaps = []
    for _ in range(draws):
        if same_rounds:
            chosen = rng.choice(a.size, rounds, replace=False)
            sub_a, sub_b = a[chosen], b[chosen]
        else:
            sub_a, sub_b = rng.choice(a, rounds, replace=False), rng.choice(b, rounds, replace=False)
        if compare(sub_a.tolist(), sub_b.tolist(), paired=paired).separated:
            gaps.append(abs(pct(float(np.median(sub_b)), float(np.median(sub_a)))))
    return len(gaps) / draws, max(gaps, default=0.0)


def correlation(x: np.ndarray, y: np.ndarray) -> float | None:
    """Pearson's r, or None where one side does not vary (memory that is the same to the byte)."""
    return float(np.corrcoef(x, y)[0, 1]) if np.std(x) > 0 and np.std(y) > 0 else None


def metric_row(runs: list[RunRecord], metric: str, args: argparse.Namespace,
               rng: np.random.Generator) -> dict[str, Any]:
    (entries,) = rank_runs(runs, metric).values()
    by_name = {entry.model: entry for entry in entries}
    first, second = (by_name[name] for name in COPIES)
    decider = entries[-1]  # the worse median of the two carries their pair's test
    a, b, sequence = by_round(runs, metric)
    spread = max(100 * float(np.subtract(*np.percentile(v, [75, 25])) / np.median(v)) for v in (a, b))
    row = {"metric": metric, "median_a": first.median, "median_b": second.median,
           "b_over_a": second.median / first.median, "rank_a": first.rank, "rank_b": second.rank,
           "p_value": "-" if decider.p_value is None else f"{decider.p_value:.3f}",
           "spread_iqr_over_median_%": spread, "lag1_autocorrelation": correlation(sequence[:-1], sequence[1:]),
           "within_round_r": correlation(a, b)}
    rate, _ = called_different(a, b, 5, args.draws, rng, paired=False)
    row["earlier_design_5v5_unpaired_%"] = 100 * rate
    widest = 0.0
    for rounds in ROUND_DRAWS:
        rate, gap = called_different(a, b, rounds, args.draws, rng, paired=True)
        row[f"called_different_{rounds}v{rounds}_%"] = 100 * rate
        widest = max(widest, gap)
    row["widest_gap_called_%"] = widest
    slower = b * (1 + POWER_CHECK_GAP)  # copy_b made slower: how often 8 rounds show it, by each test
    for paired in (True, False):
        rate, _ = called_different(a, slower, 8, args.draws, rng, paired=paired, same_rounds=True)
        row[f"{POWER_CHECK_GAP:.0%}_slower_found_8v8_{'paired' if paired else 'unpaired'}_%"] = 100 * rate
    return row


def aa_goals(rows: list[dict[str, Any]], args: argparse.Namespace) -> list[Goal]:
    """Identical files must never be ranked apart on the whole session, and draws of n rounds at most alpha."""
    split = [row for row in rows if row["rank_a"] != row["rank_b"]]
    goals = [Goal(f"A/A, whole session ({args.repeats} rounds): metrics ranked apart", "none",
                  ", ".join(f"{row['metric']} ({100 * (row['b_over_a'] - 1):+.2f}%, p {row['p_value']})"
                            for row in split) or "none", not split)]
    for rounds in ROUND_DRAWS:
        column = f"called_different_{rounds}v{rounds}_%"
        worst = max(rows, key=lambda row: row[column])
        note = ("5 rounds side by side cannot give p below 2/2^5 = 0.0625: the paired test never separates them"
                if rounds == 5 else "the paired test can reach alpha from 6 rounds on")
        goals.append(Goal(f"A/A, {rounds} v {rounds} draws of rounds called different (worst metric)",
                          f"<= {100 * ALPHA:.0f}% (alpha)", f"{worst[column]:.1f}% ({worst['metric']})",
                          worst[column] <= 100 * ALPHA, note))
    worst = max(rows, key=lambda row: row["earlier_design_5v5_unpaired_%"])
    drift = max(row["lag1_autocorrelation"] or 0.0 for row in rows)
    goals.append(Goal("earlier design: 5 v 5 runs drawn apart, Mann–Whitney (worst metric)", "information",
                      f"{worst['earlier_design_5v5_unpaired_%']:.1f}% ({worst['metric']})", None,
                      f"runs far apart in time are not exchangeable on a drifting host (lag-1 autocorrelation up to "
                      f"{drift:+.2f} here)"))
    return goals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="mobilenet_v2_0.5_224")
    parser.add_argument("--repeats", type=int, default=30, help="rounds of the A/A session")
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--draws", type=int, default=1000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    notes = [load_note("before")]
    with tempfile.TemporaryDirectory(prefix="bench-aa-") as tmp:
        directory = Path(tmp)
        source = zoo_model(args.model)
        copies = [Path(shutil.copy(source, directory / f"{name}.onnx")) for name in COPIES]
        runs = profile_runs(directory, None, [], backend="local", repeats=args.repeats, models=copies,
                            extra_flags=["--cpus", "1", "--iterations", str(args.iterations)]).runs
    notes.append(load_note("after"))
    metrics = [m.name for m in metric_registry.calibrated()]
    rows = [metric_row(runs, metric, args, rng) for metric in metrics]
    raw = {metric: dict(zip(("copy_a", "copy_b", "in_run_order"), (v.tolist() for v in by_round(runs, metric)),
                            strict=True)) for metric in metrics}
    print_table(f"A/A: {args.model} twice in one session, {args.repeats} rounds (ranking at alpha {ALPHA})", rows)
    write_report("noise_floor", rows, aa_goals(rows, args), notes, raw=raw)


if __name__ == "__main__":
    main()
