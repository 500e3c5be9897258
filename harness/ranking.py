"""Significance-aware ranking: models the data cannot tell apart share a rank instead of an invented order.

Models are sorted by their median over repeats (lower is better). Walking down that order, a model
joins the tier of the tier's best model unless it differs significantly from it, in which case it opens
a new tier; tiers take competition ranks (1, 1, 3, ...). "Differs significantly" is:

- the two-sided Mann–Whitney U test (scipy.stats.mannwhitneyu) on the per-run values at ALPHA, when the
  repeat counts allow a p-value below ALPHA at all (3 + 3 repeats never can: the smallest exact p is 0.1);
- otherwise, non-overlapping 95% bootstrap confidence intervals of the medians (harness.stats.summarize);
- with fewer than 2 repeats on either side, never: one run per model cannot support an order;
- and, as in asv, only when the medians also differ by at least MIN_RELATIVE_GAP: a test at ALPHA flags
  a consistent gap of any size, and an A/A run of one model under two names (benchmarks/noise_floor.py)
  shows gaps between identical models of about 1.5% in memory and latency and up to 7% in load_s, a
  millisecond figure decided by page-cache state. No device choice should hang on such gaps.

Stability: the repeats of every model are resampled (bootstrap) STABILITY_RESAMPLES times and the
models re-sorted; a model's stability is the share of resamples that keep its position inside its
tier's span of positions, and its 95% position interval is reported beside it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import stats as sps

from harness.errors import DataError
from harness.run_values import check_metric, metric_table
from harness.stats import summarize

ALPHA = 0.05
STABILITY_RESAMPLES = 1000
MIN_REPEATS = 2
# Medians closer than this tie, however significant the test (asv's "minimum factor", 1.1 by default there):
# the same 10% below which the summary calls repeats of one model unstable.
MIN_RELATIVE_GAP = 0.10


@dataclass(frozen=True)
class RankEntry:
    """One model's place. `p_value`/`method` are of the test that decided its tier (vs `compared_with`)."""

    model: str
    rank: int
    median: float
    ci95_low: float | None
    ci95_high: float | None
    n: int
    unstable: bool
    compared_with: str | None
    method: str | None
    p_value: float | None
    stability: float
    position_low: int
    position_high: int


def smallest_mannwhitney_p(n1: int, n2: int) -> float:
    """The smallest two-sided exact p-value Mann–Whitney U can give for these sample sizes: 2 / C(n1+n2, n1)."""
    return 2.0 / math.comb(n1 + n2, n1)


def compare(a: list[float], b: list[float], alpha: float = ALPHA) -> tuple[bool, str, float | None]:
    """(significantly and materially different?, method, p-value or None) for two models' per-run values."""
    if min(len(a), len(b)) < MIN_REPEATS:
        return False, f"fewer than {MIN_REPEATS} repeats", None
    if smallest_mannwhitney_p(len(a), len(b)) < alpha:
        p: float | None = float(sps.mannwhitneyu(a, b, alternative="two-sided").pvalue)
        significant, method = p < alpha, "mann-whitney"
    else:
        sa, sb = summarize(a), summarize(b)
        if None in (sa["ci95_low"], sa["ci95_high"], sb["ci95_low"], sb["ci95_high"]):
            return False, "bootstrap-ci unavailable", None
        significant = sa["ci95_high"] < sb["ci95_low"] or sb["ci95_high"] < sa["ci95_low"]
        method, p = "bootstrap-ci", None
    low, high = sorted((float(np.median(a)), float(np.median(b))))
    if significant and high - low < MIN_RELATIVE_GAP * abs(low):
        return False, f"{method}; medians within {MIN_RELATIVE_GAP:.0%}", p
    return significant, method, p


def _positions(samples: dict[str, list[float]], order: list[str], seed: int) -> np.ndarray:
    """(resamples, models) positions (1 = best, ties share the lower) of bootstrap-resampled medians."""
    rng = np.random.default_rng(seed)
    medians = np.column_stack([
        np.median(rng.choice(np.asarray(samples[m]), size=(STABILITY_RESAMPLES, len(samples[m]))), axis=1)
        for m in order
    ])
    return sps.rankdata(medians, method="min", axis=1)


def rank_samples(samples: dict[str, list[float]], alpha: float = ALPHA, seed: int = 0) -> list[RankEntry]:
    """Rank models by their per-run values (lower is better); see the module docstring for the rules."""
    samples = {model: list(values) for model, values in samples.items() if len(values)}
    if not samples:
        raise DataError("nothing to rank: no model has an ok run with this metric")
    order = sorted(samples, key=lambda m: (float(np.median(samples[m])), m))
    tiers = [[order[0]]]
    decided: dict[str, tuple[str | None, str | None, float | None]] = {order[0]: (None, None, None)}
    for model in order[1:]:
        leader = tiers[-1][0]
        different, method, p = compare(samples[leader], samples[model], alpha)
        decided[model] = (leader, method, p)
        if different:
            tiers.append([model])
        else:
            tiers[-1].append(model)
    positions = _positions(samples, order, seed)
    entries, start = [], 1
    for tier in tiers:
        end = start + len(tier) - 1
        for model in tier:
            column = positions[:, order.index(model)]
            summary = summarize(samples[model])
            low, high = np.percentile(column, [2.5, 97.5])
            entries.append(RankEntry(
                model=model, rank=start, median=summary["median"], ci95_low=summary["ci95_low"],
                ci95_high=summary["ci95_high"], n=summary["n"], unstable=summary["unstable"],
                compared_with=decided[model][0], method=decided[model][1], p_value=decided[model][2],
                stability=float(np.mean((column >= start) & (column <= end))),
                position_low=int(low), position_high=int(math.ceil(high)),
            ))
        start = end + 1
    return entries


def rank_runs(runs: Iterable[dict[str, Any]], metric: str, alpha: float = ALPHA) -> dict[float, list[RankEntry]]:
    """One ranking per CPU count of the session: models only compare under the same limits."""
    table = metric_table(runs, check_metric(metric))
    if table.empty:
        raise DataError(f"no ok run reported {metric}; pick another --metric or check the runs' status")
    return {
        float(cpus): rank_samples(group.groupby("model_name")["value"].apply(list).to_dict(), alpha)
        for cpus, group in table.groupby("cpus", sort=True)
    }


def ranking_rows(rankings: dict[float, list[RankEntry]], metric: str) -> list[dict[str, Any]]:
    """Flat rows (one per model and CPU count) for tables, CSV and JSON."""
    return [{"metric": metric, "cpus": cpus, **asdict(e)} for cpus, entries in rankings.items() for e in entries]
