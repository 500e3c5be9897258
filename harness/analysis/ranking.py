"""Significance-aware ranking: models the data cannot tell apart share a rank instead of an invented order.

One rule makes every tier, and each "ranks above" in it is a tested claim about two neighbours:

- Models are sorted by their median over repeats (lower is better).
- Each pair of neighbours in that order is compared by a two-sided test (harness.analysis.pair_tests): Wilcoxon's
  signed-rank test on the per-round differences when the two models ran side by side in the same rounds, as a
  session runs them (exact whatever the host's drift between rounds, since the order within a round is shuffled),
  else Mann–Whitney U on the per-run values (runs pooled from sessions the two did not share); exact permutation
  p-values either way. Only the k - 1 neighbour pairs are tested, not all k(k-1)/2 pairs: a model's place is
  decided against the one just above it.
- The neighbour pairs' p-values are adjusted for the false-discovery rate (Benjamini–Hochberg) over the pairs whose
  repeat counts let their test reach ALPHA at all: 5 rounds never can (the paired test's smallest p is 2/2^5 =
  0.0625), nor can 3 + 3 unpaired repeats (0.1), so such a pair is not tested and ties. Where no model differs
  from its neighbour, the chance of any wrong separation stays at ALPHA or less; where some do, the expected share
  of wrong separations among those made does, and the power to separate does not fall with every model added (Holm
  over every pair needed 2/2^n <= 0.05/21 for seven models: no repeat count a user runs).
- A pair separates by itself, with no adjustment, when every round of the slower model was slower (paired), or
  every run of it slower than every run of the other (unpaired), and that event is rare enough if the two were the
  same: its chance is the test's smallest p, 2/2^n over n rounds, 2/C(n+m, n) over n + m runs, at most ALPHA.
- A p-value reaches ALPHA when it is at most ALPHA (pair_tests.reaches). The regression gate
  (harness.analysis.regression_gate) asks the one-sided question of the unpaired test.
- A pair is *separated* when either rule above holds and, as in asv, its medians also differ by at least
  MIN_RELATIVE_GAP (`material`): a test flags a consistent gap of any size, and an A/A run of one model under two
  names (benchmarks/noise_floor.py) shows gaps between identical models of about 1.5% in memory and latency and up
  to 7% in load_s, a millisecond figure decided by page-cache state. No device choice should hang on such gaps.
- The sorted list is cut between two neighbours where their pair is separated; the pieces are the tiers, with
  competition ranks (1, 1, 3). Two neighbours that are not separated share a rank, so a chain of models each less
  than MIN_RELATIVE_GAP from the next shares one rank however far its ends are apart.

Each tie names the neighbour pair that keeps the cut from being made and, where more repeats could help, about how
many per model would separate it: Noether's sample size for the pair's test at the observed effect with POWER at the
adjustment's strictest threshold (ALPHA over the neighbour pairs), and never fewer than the count at which the test
can reach that threshold at all.

A model with a failed run (oom, timeout, error) is kept out of the tiers: its ok runs are its lightest and
would flatter it. It is listed after the ranked models, as are models with no ok run, with their statuses.

Stability: the repeats of every ranked model are resampled (bootstrap) STABILITY_RESAMPLES times and the
models re-sorted; a model's stability is the share of resamples that keep its position inside its tier's
span of positions, and its 95% position interval is reported beside it.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Iterable
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
from scipy import stats as sps

from harness.analysis.pair_tests import (
    benjamini_hochberg,
    mannwhitney_effect,
    mannwhitney_p,
    positive_share,
    reaches,
    repeats_needed,
    signed_rank_p,
    smallest_mannwhitney_p,
    smallest_signed_rank_p,
)
from harness.analysis.run_values import check_metric, metric_table
from harness.analysis.stats import summarize
from harness.core import metric_registry
from harness.core.errors import DataError
from harness.core.records import RunRecord

ALPHA = 0.05
STABILITY_RESAMPLES = 1000
# Medians closer than this tie, however significant the test (asv's "minimum factor", 1.1 by default there):
# the same 10% above which the summary calls repeats of one model unstable.
MIN_RELATIVE_GAP = 0.10

MANN_WHITNEY, SIGNED_RANK = "Mann–Whitney", "Wilcoxon signed-rank"
"""PairTest.test: the unpaired test over the runs, the paired one over the rounds both models ran in."""

RANKED, PARTIAL, FAILED, NO_VALUE = "ranked", "partial", "failed", "no value"
"""RankEntry.status: in the tiers; kept apart for failed runs; no ok run; ok runs without this metric."""


@dataclass(frozen=True)
class PairTest:
    """Two models, `better` (the lower median) first: whether the ranking may order them, and why."""

    better: str
    worse: str
    gap: float  # (worse median - better median) / |better median|
    p_value: float | None  # of `test`; None where these repeat counts cannot reach ALPHA
    p_adjusted: float | None  # Benjamini–Hochberg over the ranking's tested neighbour pairs
    separated: bool
    reason: str
    repeats_needed: int | None  # per model, to separate them; None when separated or when no count can
    test: str = MANN_WHITNEY  # SIGNED_RANK when the two ran in the same rounds


@dataclass(frozen=True)
class RankEntry:
    """One model's place. `compared_with`, the p-values, `reason` and `repeats_needed` are of the pair that
    decided it, the model and its neighbour above: separated for a tier's first model, tied for the others.
    Unranked models (status other than `ranked`) have rank None and say why."""

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


Rounds = dict[str, list[Hashable]]
"""Per model, the round each of its values comes from (aligned with its values), for the paired test."""


def material(low: float, high: float) -> bool:
    """Whether `high` exceeds `low` by MIN_RELATIVE_GAP of it or more: a gap the noise between identical models
    does not make."""
    return high - low >= MIN_RELATIVE_GAP * abs(low)


def paired_rounds(rounds: Rounds | None, better: str, worse: str) -> list[Hashable] | None:
    """The rounds two models were both measured in (one value a round each): adaptive repeats give a noisier model
    more rounds, a failed run leaves one out, and the rounds they shared are still side by side. None when they
    shared none (runs of different sessions): then they are compared unpaired, over all their runs."""
    if rounds is None or better not in rounds or worse not in rounds:
        return None
    mine, theirs = rounds[better], rounds[worse]
    if len(set(mine)) != len(mine) or len(set(theirs)) != len(theirs):
        return None
    common = set(mine) & set(theirs)
    return sorted(common, key=str) if common else None


def _pair_values(samples: dict[str, list[float]], rounds: Rounds | None, better: str, worse: str,
                 ) -> tuple[str, np.ndarray, np.ndarray]:
    """(test, better's values, worse's values), aligned round by round when the pair is paired."""
    common = paired_rounds(rounds, better, worse)
    if common is None or rounds is None:
        return MANN_WHITNEY, np.asarray(samples[better], dtype=float), np.asarray(samples[worse], dtype=float)
    better_by_round, worse_by_round = (dict(zip(rounds[m], samples[m], strict=True)) for m in (better, worse))
    return (SIGNED_RANK, np.asarray([better_by_round[r] for r in common], dtype=float),
            np.asarray([worse_by_round[r] for r in common], dtype=float))


def _smallest_p(test: str, a: np.ndarray, b: np.ndarray) -> float:
    return smallest_signed_rank_p(a.size) if test == SIGNED_RANK else smallest_mannwhitney_p(a.size, b.size)


def _p_value(test: str, a: np.ndarray, b: np.ndarray) -> float:
    return signed_rank_p(b - a) if test == SIGNED_RANK else mannwhitney_p(a, b)


def _sizes(test: str, a: np.ndarray, b: np.ndarray) -> str:
    return f"{a.size} rounds side by side" if test == SIGNED_RANK else f"{a.size} + {b.size} repeats"


def _dominates(test: str, better: np.ndarray, worse: np.ndarray) -> bool:
    """Whether `worse` was slower in every round (paired), or every run of it slower than every run of `better`."""
    return bool(np.all(worse > better)) if test == SIGNED_RANK else bool(worse.min() > better.max())


def pairwise_tests(samples: dict[str, list[float]], order: list[str], alpha: float = ALPHA,
                   rounds: Rounds | None = None, every_pair: bool = False) -> dict[tuple[str, str], PairTest]:
    """The neighbour pairs (better, worse) of `order` (sorted by median) tested, FDR-adjusted (Benjamini–Hochberg) over
    the testable ones (`every_pair`: every pair, adjusted over all): paired over their rounds where `rounds` shows
    them measured side by side, else unpaired. A pair whose every round (or run) points one way, an event as rare
    as the test's smallest p if they were the same, separates at that p unadjusted."""
    pairs = ([(a, b) for i, a in enumerate(order) for b in order[i + 1:]] if every_pair
             else list(zip(order, order[1:], strict=False)))
    values = {pair: _pair_values(samples, rounds, *pair) for pair in pairs}
    raw = {pair: _p_value(*values[pair]) for pair in pairs if reaches(_smallest_p(*values[pair]), alpha)}
    adjusted = dict(zip(raw, benjamini_hochberg(list(raw.values())), strict=True))
    # The adjustment's first step: what a pair must beat to be sure of separation once the repeats let every pair
    # reach alpha.
    strictest = alpha / max(len(pairs), 1)
    tests = {}
    for better, worse in pairs:
        test, a, b = values[better, worse]
        low, high = float(np.median(samples[better])), float(np.median(samples[worse]))
        gap = (high - low) / abs(low) if low else (math.inf if high > low else 0.0)
        paired = test == SIGNED_RANK
        effect = positive_share(b - a) if paired else mannwhitney_effect(a, b)
        p, p_adj = raw.get((better, worse)), adjusted.get((better, worse))
        alone = p is not None and reaches(p, alpha) and _dominates(test, a, b)
        if p is None:
            reason = (f"with {_sizes(test, a, b)} {test} cannot reach p ≤ {alpha:g} "
                      f"(its smallest p is {_smallest_p(test, a, b):.2g})")
        elif alone:
            every = "round side by side" if paired else f"run of it against each of {better}'s"
            reason = (f"slower in every {every} ({_sizes(test, a, b)}): a chance of {p:.2g} if the two were the "
                      f"same ({test}), which separates them by itself")
        else:
            reason = (f"{test} p = {p:.2g} over {_sizes(test, a, b)}, FDR-adjusted over {len(raw)} neighbour pairs "
                      f"{p_adj:.2g}")
        significant = alone or reaches(p_adj, alpha)
        needed = None
        if not material(low, high):
            reason += f"; medians {gap:.1%} apart, under {MIN_RELATIVE_GAP:.0%}: no number of repeats separates them"
        elif significant:
            reason += f"{'' if alone else f' ≤ {alpha:g}'}; medians {gap:.0%} apart"
        else:
            needed = repeats_needed(effect, strictest, paired)
            reason += "" if p is None else f" > {alpha:g}"
            reason += (f"; about {needed} repeats per model would separate them" if needed
                       else "; the runs show no difference")
        tests[better, worse] = PairTest(better, worse, gap, p, p_adj, significant and material(low, high), reason,
                                        needed, test)
    return tests


def compare(a: list[float], b: list[float], alpha: float = ALPHA, *, paired: bool = False) -> PairTest:
    """Two models' values (named "a" and "b") tested as the ranking tests a pair of models: unpaired runs (two
    sessions, a baseline and a new one), or `paired`, where a[i] and b[i] are the two models' runs of round i of
    one interleaved session."""
    order = ["a", "b"] if np.median(a) <= np.median(b) else ["b", "a"]
    if paired and len(a) != len(b):
        raise ValueError(f"paired values come in rounds: {len(a)} values of a against {len(b)} of b")
    rounds: Rounds | None = {"a": list(range(len(a))), "b": list(range(len(b)))} if paired else None
    return pairwise_tests({"a": a, "b": b}, order, alpha, rounds)[order[0], order[1]]


def _tiers(order: list[str], tests: dict[tuple[str, str], PairTest]) -> list[list[str]]:
    """Cut `order` between every two neighbours whose pair is separated."""
    tiers = [[order[0]]]
    for better, worse in zip(order, order[1:], strict=False):
        if tests[better, worse].separated:
            tiers.append([worse])
        else:
            tiers[-1].append(worse)
    return tiers


def _decider(model: str, order: list[str], tests: dict[tuple[str, str], PairTest]) -> PairTest:
    """The pair behind a model's place: the model and its neighbour above (separated where it opens a tier)."""
    return tests[order[order.index(model) - 1], model]


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


def rank_samples(samples: dict[str, list[float]], alpha: float = ALPHA, seed: int = 0,
                 rounds: Rounds | None = None) -> list[RankEntry]:
    """Rank models by their per-run values (lower is better); see the module docstring for the rules. `rounds`
    says which round each value comes from; without it every pair is compared unpaired."""
    samples = {model: list(values) for model, values in samples.items() if len(values)}
    if not samples:
        raise DataError("nothing to rank: no model has an ok run with this metric")
    order = sorted(samples, key=lambda m: (float(np.median(samples[m])), m))
    tests = pairwise_tests(samples, order, alpha, rounds)
    positions = _positions(samples, order, seed)
    entries, start = [], 1
    for tier in _tiers(order, tests):
        end = start + len(tier) - 1
        for model in tier:
            summary = summarize(samples[model])
            decider = None if model == order[0] else _decider(model, order, tests)
            column = positions[:, order.index(model)]
            low, high = np.percentile(column, [2.5, 97.5])
            entries.append(RankEntry(
                model=model, rank=start, status=RANKED, median=summary.median, ci95_low=summary.ci95_low,
                ci95_high=summary.ci95_high, ci95_level=summary.ci95_level, n=summary.n,
                runs=summary.n, statuses=f"ok={summary.n}", unstable=summary.unstable,
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
        model=model, rank=None, status=status, median=summary.median, ci95_low=summary.ci95_low,
        ci95_high=summary.ci95_high, ci95_level=summary.ci95_level, n=summary.n, runs=runs,
        statuses=_statuses_text(counts), unstable=summary.unstable, compared_with=None, p_value=None,
        p_adjusted=None, reason=reason, repeats_needed=None, stability=None, position_low=None, position_high=None,
    )


def rank_runs(runs: Iterable[RunRecord], metric: str, alpha: float = ALPHA) -> dict[float, list[RankEntry]]:
    """One ranking per CPU count of the session (models only compare under the same limits): the ranked models,
    then those kept apart (a failed run) or with no value."""
    runs = list(runs)
    table = metric_table(runs, check_metric(metric))
    if table.empty:
        why = metric_registry.get(check_metric(metric)).absent_reason(runs)
        raise DataError(f"no ok run reported {metric}{why}; pick another --metric or check the runs' status")
    counts: dict[float, dict[str, Counter[str]]] = {}
    for run in runs:
        by_model = counts.setdefault(float(run.cpus), {})
        by_model.setdefault(run.model_name, Counter())[run.result.status] += 1
    round_of = {run.run_id: (run.session_id, run.get("round")) for run in runs}  # a line may predate rounds
    rankings = {}
    for cpus, by_model in sorted(counts.items()):
        at_cpus = table.loc[table["cpus"] == cpus]
        values = at_cpus.groupby("model_name")["value"].apply(list).to_dict()
        run_ids = at_cpus.groupby("model_name")["run_id"].apply(list).to_dict()
        complete = {m: values[m] for m, c in by_model.items() if m in values and set(c) == {"ok"}}
        rounds: Rounds = {m: [round_of[run_id] for run_id in run_ids[m]] for m in complete
                          if all(round_of[run_id][1] is not None for run_id in run_ids[m])}
        ranked = rank_samples(complete, alpha, rounds=rounds) if complete else []
        ranked = [replace(e, runs=sum(by_model[e.model].values()), statuses=_statuses_text(by_model[e.model]))
                  for e in ranked]
        rankings[cpus] = ranked + [_unranked(m, values.get(m, []), by_model[m], metric)
                                   for m in sorted(by_model) if m not in complete]
    return rankings


def ranking_rows(rankings: dict[float, list[RankEntry]], metric: str) -> list[dict[str, Any]]:
    """Flat rows (one per model and CPU count) for tables, CSV and JSON."""
    return [{"metric": metric, "cpus": cpus, **asdict(e)} for cpus, entries in rankings.items() for e in entries]
