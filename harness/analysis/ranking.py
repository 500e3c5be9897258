"""Significance-aware ranking: models the data cannot tell apart share a rank instead of an invented order.

One rule makes every tier, so the ranking is transitive and each "ranks above" in it is a tested claim:

- Models are sorted by their median over repeats (lower is better).
- Every pair is compared by a two-sided Mann–Whitney U test on the per-run values (scipy.stats.mannwhitneyu;
  an exact permutation p when few values tie, since the normal approximation is too small there). The p-values are
  Holm-corrected over every pair whose repeat counts let the test reach ALPHA at all: a pair of 3 + 3 repeats
  never can (its smallest exact p is 0.1), so it is not tested and ties. Holm keeps the chance that any
  pair of the ranking is wrongly separated at ALPHA or less, however many models are ranked.
- A p-value reaches ALPHA when it is at most ALPHA (`reaches`): a test of level ALPHA rejects when p <= ALPHA
  (Lehmann & Romano, *Testing Statistical Hypotheses*, §3.3), which keeps the chance of a wrong rejection at
  ALPHA or less however discrete the exact p-values are. The regression gate (harness.analysis.regression_gate) asks the
  one-sided question of the same test, where 3 + 3 fully separated repeats give exactly p = 1/20.
- A pair is *separated* when its Holm-adjusted p reaches ALPHA and, as in asv, its medians also differ by at
  least MIN_RELATIVE_GAP (`material`): a test flags a consistent gap of any size, and an A/A run of one model
  under two names (benchmarks/noise_floor.py) shows gaps between identical models of about 1.5% in memory and
  latency and up to 7% in load_s, a millisecond figure decided by page-cache state. No device choice should
  hang on such gaps.
- The sorted list is cut between two neighbours only where every model above the cut is separated from every
  model below it; the pieces are the tiers, with competition ranks (1, 1, 3). So two models that are not
  separated always share a rank (A = 10, B = 10.5 and C = 11.5 with B and C tied all rank 1), and a model
  ranks above another only when that pair was separated.

Each tie names the pair that keeps the cut from being made and, where more repeats could help, about how many
per model would separate it: Noether's sample size for Mann–Whitney at the observed effect (the share of
run pairs in which the slower model's run is the slower one) with POWER at Holm's strictest threshold, and
never fewer than the count at which the test can reach that threshold at all.

A model with a failed run (oom, timeout, error) is kept out of the tiers: its ok runs are its lightest and
would flatter it. It is listed after the ranked models, as are models with no ok run, with their statuses.

Stability: the repeats of every ranked model are resampled (bootstrap) STABILITY_RESAMPLES times and the
models re-sorted; a model's stability is the share of resamples that keep its position inside its tier's
span of positions, and its 95% position interval is reported beside it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
from scipy import stats as sps

from harness.analysis.run_values import check_metric, metric_table
from harness.analysis.stats import summarize
from harness.core.errors import DataError

ALPHA = 0.05
POWER = 0.80  # the power at which `repeats_needed` is computed
STABILITY_RESAMPLES = 1000
# Medians closer than this tie, however significant the test (asv's "minimum factor", 1.1 by default there):
# the same 10% above which the summary calls repeats of one model unstable.
MIN_RELATIVE_GAP = 0.10
TIED_EXACT_MAX_RUNS = 60  # tied values get exact p-values up to this many runs of a pair; the normal p above
TWO_SIDED, GREATER = "two-sided", "greater"
"""Mann–Whitney alternatives, as scipy names them: `greater` asks whether the first sample's values tend to be the
larger (a model got slower), `two-sided` whether either does (which of two models is faster)."""

RANKED, PARTIAL, FAILED, NO_VALUE = "ranked", "partial", "failed", "no value"
"""RankEntry.status: in the tiers; kept apart for failed runs; no ok run; ok runs without this metric."""


@dataclass(frozen=True)
class PairTest:
    """Two models, `better` (the lower median) first: whether the ranking may order them, and why."""

    better: str
    worse: str
    gap: float  # (worse median - better median) / |better median|
    p_value: float | None  # Mann–Whitney; None where these repeat counts cannot reach ALPHA
    p_adjusted: float | None  # Holm over the ranking's tested pairs
    separated: bool
    reason: str
    repeats_needed: int | None  # per model, to separate them; None when separated or when no count can


@dataclass(frozen=True)
class RankEntry:
    """One model's place. `compared_with`, the p-values, `reason` and `repeats_needed` are of the pair that
    decided it: for a tier's first model the weakest separation from the tiers above, for the others the pair
    that ties it to its tier. Unranked models (status other than `ranked`) have rank None and say why."""

    model: str
    rank: int | None
    status: str
    median: float | None
    ci95_low: float | None
    ci95_high: float | None
    ci95_level: float | None
    n: int
    runs: int
    statuses: str
    unstable: bool
    compared_with: str | None
    p_value: float | None
    p_adjusted: float | None
    reason: str
    repeats_needed: int | None
    stability: float | None
    position_low: int | None
    position_high: int | None


def reaches(p: float | None, alpha: float) -> bool:
    """Whether a p-value rejects at level alpha: p <= alpha (a test of level alpha rejects at its boundary too)."""
    return p is not None and p <= alpha


def material(low: float, high: float) -> bool:
    """Whether `high` exceeds `low` by MIN_RELATIVE_GAP of it or more: a gap the noise between identical models
    does not make."""
    return high - low >= MIN_RELATIVE_GAP * abs(low)


def smallest_mannwhitney_p(n1: int, n2: int, alternative: str = TWO_SIDED) -> float:
    """The smallest exact p-value Mann–Whitney U can give for these sample sizes: 1 / C(n1+n2, n1) one-sided,
    twice that two-sided."""
    return (2.0 if alternative == TWO_SIDED else 1.0) / math.comb(n1 + n2, n1)


def repeats_to_reach(threshold: float, alternative: str = TWO_SIDED) -> int:
    """The fewest repeats per model with which Mann–Whitney can reach p <= threshold at all."""
    n = 1
    while not reaches(smallest_mannwhitney_p(n, n, alternative), threshold):
        n += 1
    return n


def repeats_needed(effect: float, threshold: float, alternative: str = TWO_SIDED) -> int | None:
    """Repeats per model for Mann–Whitney to separate two models at `threshold` with POWER, if the share of run
    pairs in which the worse model's run is the larger one (`effect`, the AUC) is what was seen (Noether 1987:
    N = (z_{1-t/2} + z_power)^2 / (3 (AUC - 1/2)^2) runs in all, split evenly; z_{1-t} one-sided). None when the
    runs show no difference (AUC = 1/2)."""
    if abs(effect - 0.5) < 1e-12:
        return None
    tail = threshold / 2 if alternative == TWO_SIDED else threshold
    z = sps.norm.ppf(1 - tail) + sps.norm.ppf(POWER)
    return max(math.ceil(z**2 / (6 * (effect - 0.5) ** 2)), repeats_to_reach(threshold, alternative))


def tied_exact_p(a: Sequence[float], b: Sequence[float], alternative: str = TWO_SIDED) -> float:
    """Exact permutation p of Mann–Whitney with tied values (midranks), as
    scipy.stats.mannwhitneyu(method=PermutationMethod()) defines it, but counted rather than enumerated: the
    number of ways to draw len(a) of the pooled midranks with each rank sum (a 0/1 knapsack over the doubled,
    so integer, midranks). scipy enumerates C(n1+n2, n1) splits in Python: 0.7 s for 8 + 8 runs, per pair.
    `greater`: the chance of a rank sum of `a` at least the one observed."""
    doubled = np.rint(2 * sps.rankdata(np.concatenate([a, b]))).astype(int)
    n1, total = len(a), int(doubled.sum())
    ways = np.zeros((n1 + 1, total + 1))
    ways[0, 0] = 1.0
    for rank in doubled:  # the right side is evaluated before the assignment: each rank is drawn at most once
        ways[1:, rank:] = ways[1:, rank:] + ways[:-1, :total + 1 - rank]
    null = ways[n1] / ways[n1].sum()
    observed = int(doubled[:n1].sum())
    if alternative == GREATER:
        return float(min(1.0, null[observed:].sum()))
    return float(min(1.0, 2 * min(null[:observed + 1].sum(), null[observed:].sum())))


def mannwhitney_p(a: Sequence[float], b: Sequence[float], alternative: str = TWO_SIDED) -> float:
    """Mann–Whitney p (`greater`: that `a` tends to be larger): scipy's (exact up to 8 runs a side, normal above)
    for untied values; for tied values the exact permutation p up to TIED_EXACT_MAX_RUNS runs in all, since
    scipy's tie-corrected normal p runs too small for few runs (0.013 for [10]*4 against [12]*4, below the 2/70
    that 4 + 4 runs can give)."""
    if len(set(a) | set(b)) < len(a) + len(b) and len(a) + len(b) <= TIED_EXACT_MAX_RUNS:
        return tied_exact_p(a, b, alternative)
    return float(sps.mannwhitneyu(a, b, alternative=alternative).pvalue)


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values: the k-th smallest of m times (m - k + 1), kept monotone, capped at 1."""
    p = np.asarray(p_values, dtype=float)
    order = np.argsort(p, kind="stable")
    adjusted = np.empty_like(p)
    adjusted[order] = np.minimum(np.maximum.accumulate(p[order] * (p.size - np.arange(p.size))), 1.0)
    return adjusted


def pairwise_tests(samples: dict[str, list[float]], order: list[str],
                   alpha: float = ALPHA) -> dict[tuple[str, str], PairTest]:
    """Every pair (better, worse) of `order` (sorted by median) tested, Holm-corrected over the testable pairs."""
    pairs = [(a, b) for i, a in enumerate(order) for b in order[i + 1:]]
    raw = {pair: mannwhitney_p(samples[pair[0]], samples[pair[1]]) for pair in pairs
           if reaches(smallest_mannwhitney_p(len(samples[pair[0]]), len(samples[pair[1]])), alpha)}
    adjusted = dict(zip(raw, holm(list(raw.values())), strict=True))
    # Holm's first step with every pair tested: what a pair must beat to be sure of separation once the repeats
    # let every pair reach alpha.
    strictest = alpha / max(len(pairs), 1)
    tests = {}
    for better, worse in pairs:
        a, b = np.asarray(samples[better]), np.asarray(samples[worse])
        low, high = float(np.median(a)), float(np.median(b))
        gap = (high - low) / abs(low) if low else (math.inf if high > low else 0.0)
        effect = float(np.mean(np.sign(np.subtract.outer(b, a)))) / 2 + 0.5  # P(worse run > better run)
        p, p_adj = raw.get((better, worse)), adjusted.get((better, worse))
        if p is None:
            reason = (f"with {a.size} + {b.size} repeats Mann–Whitney cannot reach p ≤ {alpha:g} "
                      f"(its smallest p is {smallest_mannwhitney_p(a.size, b.size):.2g})")
        else:
            reason = f"Mann–Whitney p = {p:.2g}, Holm-adjusted over {len(raw)} pairs {p_adj:.2g}"
        significant = reaches(p_adj, alpha)
        needed = None
        if not material(low, high):
            reason += f"; medians {gap:.1%} apart, under {MIN_RELATIVE_GAP:.0%}: no number of repeats separates them"
        elif significant:
            reason += f" ≤ {alpha:g}; medians {gap:.0%} apart"
        else:
            needed = repeats_needed(effect, strictest)
            reason += "" if p is None else f" > {alpha:g}"
            reason += (f"; about {needed} repeats per model would separate them" if needed
                       else "; the runs show no difference")
        separated = significant and material(low, high)
        tests[better, worse] = PairTest(better, worse, gap, p, p_adj, separated, reason, needed)
    return tests


def compare(a: list[float], b: list[float], alpha: float = ALPHA) -> PairTest:
    """Two models' per-run values (named "a" and "b") tested as the ranking tests a pair of models."""
    order = ["a", "b"] if np.median(a) <= np.median(b) else ["b", "a"]
    return pairwise_tests({"a": a, "b": b}, order, alpha)[order[0], order[1]]


def _tiers(order: list[str], tests: dict[tuple[str, str], PairTest]) -> list[list[str]]:
    """Cut `order` wherever every model above is separated from every model below."""
    tiers = [[order[0]]]
    for i in range(1, len(order)):
        if all(tests[a, b].separated for a in order[:i] for b in order[i:]):
            tiers.append([order[i]])
        else:
            tiers[-1].append(order[i])
    return tiers


def _decider(model: str, order: list[str], tests: dict[tuple[str, str], PairTest], opens_tier: bool) -> PairTest:
    """The pair behind a model's place: the weakest separation across the cut above a tier's first model, or
    the pair that blocks that cut (this model's own pair with its neighbour first)."""
    i = order.index(model)
    crossing = [tests[a, b] for a in order[:i] for b in order[i:]]
    if opens_tier:
        return max(crossing, key=lambda t: (t.p_adjusted or 0.0, t.worse == model, t.better == order[i - 1]))
    blocking = [t for t in crossing if not t.separated]
    return min(blocking, key=lambda t: (t.worse != model, t.better != order[i - 1]))


def _decided_by(model: str, decider: PairTest | None) -> dict[str, Any]:
    """RankEntry's fields from the pair behind its place (none for the best model)."""
    if decider is None:
        return {"compared_with": None, "p_value": None, "p_adjusted": None, "reason": "", "repeats_needed": None}
    involved = model in (decider.better, decider.worse)
    return {
        "compared_with": (decider.worse if decider.better == model else decider.better) if involved else None,
        "p_value": decider.p_value, "p_adjusted": decider.p_adjusted,
        "reason": decider.reason if involved else
        f"its median lies between {decider.better} and {decider.worse}, which tie: {decider.reason}",
        "repeats_needed": None if decider.separated else decider.repeats_needed,
    }


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
    tests = pairwise_tests(samples, order, alpha)
    positions = _positions(samples, order, seed)
    entries, start = [], 1
    for tier in _tiers(order, tests):
        end = start + len(tier) - 1
        for model in tier:
            summary = summarize(samples[model])
            decider = None if model == order[0] else _decider(model, order, tests, opens_tier=model == tier[0])
            column = positions[:, order.index(model)]
            low, high = np.percentile(column, [2.5, 97.5])
            entries.append(RankEntry(
                model=model, rank=start, status=RANKED, median=summary["median"], ci95_low=summary["ci95_low"],
                ci95_high=summary["ci95_high"], ci95_level=summary["ci95_level"], n=summary["n"],
                runs=summary["n"], statuses=f"ok={summary['n']}", unstable=summary["unstable"],
                **_decided_by(model, decider),
                stability=float(np.mean((column >= start) & (column <= end))),
                position_low=int(low), position_high=int(math.ceil(high)),
            ))
        start = end + 1
    return entries


def _statuses_text(counts: Counter[str]) -> str:
    return ";".join(f"{status}={count}" for status, count in sorted(counts.items()))


def _unranked(model: str, values: list[float], counts: Counter[str], metric: str) -> RankEntry:
    """A model kept out of the tiers, with its figures over whatever ok runs it has and the reason."""
    runs, ok = sum(counts.values()), counts.get("ok", 0)
    failures = _statuses_text(Counter({s: c for s, c in counts.items() if s != "ok"}))
    if not ok:
        status, reason = FAILED, f"no ok run ({failures})"
    elif not values:
        status, reason = NO_VALUE, f"its ok runs did not report {metric}"
    else:
        status = PARTIAL
        reason = f"{ok} of {runs} runs ok ({failures}): not ranked, as its ok runs may be its lightest"
    summary = summarize(values)
    return RankEntry(
        model=model, rank=None, status=status, median=summary["median"], ci95_low=summary["ci95_low"],
        ci95_high=summary["ci95_high"], ci95_level=summary["ci95_level"], n=summary["n"], runs=runs,
        statuses=_statuses_text(counts), unstable=summary["unstable"], compared_with=None, p_value=None,
        p_adjusted=None, reason=reason, repeats_needed=None, stability=None, position_low=None, position_high=None,
    )


def rank_runs(runs: Iterable[dict[str, Any]], metric: str, alpha: float = ALPHA) -> dict[float, list[RankEntry]]:
    """One ranking per CPU count of the session (models only compare under the same limits): the ranked models,
    then those kept apart (a failed run) or with no value."""
    runs = list(runs)
    table = metric_table(runs, check_metric(metric))
    if table.empty:
        raise DataError(f"no ok run reported {metric}; pick another --metric or check the runs' status")
    counts: dict[float, dict[str, Counter[str]]] = {}
    for run in runs:
        by_model = counts.setdefault(float(run["cpus"]), {})
        by_model.setdefault(str(run["model_name"]), Counter())[run.get("status", "error")] += 1
    rankings = {}
    for cpus, by_model in sorted(counts.items()):
        values = table.loc[table["cpus"] == cpus].groupby("model_name")["value"].apply(list).to_dict()
        complete = {m: values[m] for m, c in by_model.items() if m in values and set(c) == {"ok"}}
        ranked = rank_samples(complete, alpha) if complete else []
        ranked = [replace(e, runs=sum(by_model[e.model].values()), statuses=_statuses_text(by_model[e.model]))
                  for e in ranked]
        rankings[cpus] = ranked + [_unranked(m, values.get(m, []), by_model[m], metric)
                                   for m in sorted(by_model) if m not in complete]
    return rankings


def ranking_rows(rankings: dict[float, list[RankEntry]], metric: str) -> list[dict[str, Any]]:
    """Flat rows (one per model and CPU count) for tables, CSV and JSON."""
    return [{"metric": metric, "cpus": cpus, **asdict(e)} for cpus, entries in rankings.items() for e in entries]
