"""The two tests the ranking compares a pair of models with, their exact p-values, and how many repeats they need.

- **Paired: Wilcoxon's signed-rank test on the per-round differences**, for two models measured side by side in
  the same rounds (a session runs every model once per round, in an order shuffled per round). Under "the two
  models are the same", swapping the two runs of a round is as likely as what was measured, since which one ran
  first was a coin toss: so the exact null distribution is the 2^n sign patterns of the n differences, whatever the
  host did between rounds (drift, other load) and whatever one run does to the next. That is why it is exact where
  the unpaired test is not: the runs of one session are not independent draws (a shared host drifts, so runs close
  in time are alike; benchmarks/noise_floor.py measures it), and pairing also takes that drift out of the
  comparison. Its cost: n rounds cannot give a two-sided p below 2/2^n, so 5 rounds never reach 0.05.
- **Unpaired: Mann–Whitney U** on the per-run values, for models that were not measured in the same rounds (runs
  pooled from different sessions, one model's repeats resumed or lost), which treats every run as an independent
  draw.

Both p-values are exact permutation p-values where ties would make scipy's normal approximation too small. A
p-value reaches the level alpha when it is at most alpha (`reaches`): a test of level alpha rejects at its boundary
too (Lehmann & Romano, *Testing Statistical Hypotheses*, §3.3), which keeps the chance of a wrong rejection at alpha
or less however discrete the exact p-values are. The regression gate (harness.analysis.regression_gate) asks
Mann–Whitney's one-sided question (`GREATER`: did a model get slower), where 3 + 3 fully separated repeats give
exactly p = 1/20.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Final, Literal

import numpy as np
from scipy import stats as sps

POWER = 0.80  # the power at which the repeats needed are computed
TIED_EXACT_MAX_RUNS = 60  # tied values get exact Mann–Whitney p-values up to this many runs of a pair; normal above
EXACT_POWER_MAX_ROUNDS = 100  # the paired repeats needed are counted exactly up to this many rounds
Alternative = Literal["two-sided", "greater"]
"""Mann–Whitney alternatives, as scipy names them: `greater` asks whether the first sample's values tend to be the
larger (a model got slower), `two-sided` whether either does (which of two models is faster)."""
TWO_SIDED: Final = "two-sided"
GREATER: Final = "greater"
Sample = Sequence[float] | np.ndarray
"""One model's values: a list of runs' values, or the array the ranking aligns them in."""


def reaches(p: float | None, alpha: float) -> bool:
    """Whether a p-value rejects at level alpha: p <= alpha (a test of level alpha rejects at its boundary too)."""
    return p is not None and p <= alpha


def smallest_mannwhitney_p(n1: int, n2: int, alternative: Alternative = TWO_SIDED) -> float:
    """The smallest exact p-value Mann–Whitney U can give for these sample sizes: 1 / C(n1+n2, n1) one-sided,
    twice that two-sided."""
    return (2.0 if alternative == TWO_SIDED else 1.0) / math.comb(n1 + n2, n1)


def smallest_signed_rank_p(rounds: int) -> float:
    """The smallest two-sided exact p-value the signed-rank test can give over this many rounds: 2 / 2^n."""
    return 2.0 / 2**rounds


def repeats_to_reach(threshold: float, paired: bool = False, alternative: Alternative = TWO_SIDED) -> int:
    """The fewest repeats per model (rounds, when paired) with which the test can give p <= threshold at all."""
    n = 1
    while not reaches(smallest_signed_rank_p(n) if paired else smallest_mannwhitney_p(n, n, alternative), threshold):
        n += 1
    return n


@functools.lru_cache(maxsize=4096)  # effects are shares of few runs: the same few values come back in every ranking
def repeats_needed(effect: float, threshold: float, paired: bool = False,
                   alternative: Alternative = TWO_SIDED) -> int | None:
    """Repeats per model (rounds, when paired) for the test to separate two models at `threshold` with POWER, if
    the effect seen is the true one; never fewer than the count at which the test can reach `threshold` at all, and
    None when the runs show no difference (an effect of 1/2).

    Unpaired, `effect` is the share of run pairs in which the worse model's run is the larger (the AUC): Noether's
    (1987) N = (z_{1-t/2} + z_power)^2 / (3 (AUC - 1/2)^2) runs in all, split evenly. Paired, it is the share of
    rounds in which the worse model's run is the slower: the rounds at which a sign test on that share reaches
    POWER, counted exactly from the binomial (Noether's approximation, 11 rounds where every round points one way,
    overstates what 6 such rounds already do; the signed-rank test is at least as strong as the sign test there),
    or by Noether's sign-test formula where that count runs past EXACT_POWER_MAX_ROUNDS. `alternative` is the
    unpaired test's (z_{1-t} one-sided)."""
    if abs(effect - 0.5) < 1e-12:
        return None
    tail = threshold / 2 if paired or alternative == TWO_SIDED else threshold
    z = sps.norm.ppf(1 - tail) + sps.norm.ppf(POWER)
    fewest = repeats_to_reach(threshold, paired, alternative)
    if not paired:
        return max(math.ceil(z**2 / (6 * (effect - 0.5) ** 2)), fewest)
    share = max(effect, 1 - effect)
    approximate = math.ceil(z**2 / (4 * (share - 0.5) ** 2))
    for rounds in range(fewest, min(approximate, EXACT_POWER_MAX_ROUNDS) + 1):
        if sign_test_power(rounds, share, threshold) >= POWER:
            return rounds
    return max(approximate, fewest)


def sign_test_power(rounds: int, share: float, threshold: float) -> float:
    """The chance that a two-sided exact sign test at level `threshold` rejects over `rounds` rounds when each round
    points one way with probability `share`: it rejects when at least `cut` rounds point the same way, `cut` the
    smallest count whose two-sided null probability is at most the threshold."""
    counts = np.arange(rounds + 1)
    at_least = np.cumsum(sps.binom.pmf(counts, rounds, 0.5)[::-1])[::-1]  # P(at least k of n) under the null
    allowed = np.flatnonzero(2 * at_least <= threshold)
    if not allowed.size:
        return 0.0
    cut = int(allowed[0])
    chance = sps.binom.pmf(counts, rounds, share)
    return float(chance[cut:].sum() + chance[:rounds - cut + 1].sum())


def mannwhitney_effect(better: Sample, worse: Sample) -> float:
    """P(a run of `worse` is larger than a run of `better`), ties counted half: the AUC."""
    return float(np.mean(np.sign(np.subtract.outer(np.asarray(worse), np.asarray(better))))) / 2 + 0.5


def positive_share(differences: Sequence[float]) -> float:
    """The share of rounds in which the difference is positive, zero differences counted half."""
    return float(np.mean(np.sign(np.asarray(differences, dtype=float)))) / 2 + 0.5


def tied_exact_p(a: Sample, b: Sample, alternative: Alternative = TWO_SIDED) -> float:
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


def mannwhitney_p(a: Sample, b: Sample, alternative: Alternative = TWO_SIDED) -> float:
    """Mann–Whitney p (`greater`: that `a` tends to be larger): scipy's (exact up to 8 runs a side, normal above)
    for untied values; for tied values the exact permutation p up to TIED_EXACT_MAX_RUNS runs in all, since
    scipy's tie-corrected normal p runs too small for few runs (0.013 for [10]*4 against [12]*4, below the 2/70
    that 4 + 4 runs can give)."""
    if len(set(a) | set(b)) < len(a) + len(b) and len(a) + len(b) <= TIED_EXACT_MAX_RUNS:
        return tied_exact_p(a, b, alternative)
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(sps.mannwhitneyu(x, y, alternative=alternative).pvalue)


def signed_rank_p(differences: Sequence[float]) -> float:
    """Exact two-sided p of Wilcoxon's signed-rank test: zero differences dropped (Wilcoxon's rule), tied |d| given
    midranks, and the null distribution of the positive ranks' sum counted over every sign pattern (a knapsack over
    the doubled midranks, as tied_exact_p does), so it is exact for any number of rounds, ties or not."""
    d = np.asarray(differences, dtype=float)
    d = d[d != 0]
    if not d.size:
        return 1.0
    doubled = np.rint(2 * sps.rankdata(np.abs(d))).astype(int)
    total = int(doubled.sum())
    ways = np.zeros(total + 1)
    ways[0] = 1.0
    for rank in doubled:
        ways[rank:] = ways[rank:] + ways[:total + 1 - rank]
    null = ways / ways.sum()
    observed = int(doubled[d > 0].sum())
    return float(min(1.0, 2 * min(null[:observed + 1].sum(), null[observed:].sum())))


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values: the k-th smallest of m times (m - k + 1), kept monotone, capped at 1."""
    p = np.asarray(p_values, dtype=float)
    order = np.argsort(p, kind="stable")
    adjusted = np.empty_like(p)
    adjusted[order] = np.minimum(np.maximum.accumulate(p[order] * (p.size - np.arange(p.size))), 1.0)
    return adjusted


def benjamini_hochberg(p_values: Sequence[float]) -> np.ndarray:
    """Benjamini–Hochberg's step-up adjusted p-values (the false-discovery rate): the k-th smallest of m times m / k,
    kept monotone from the largest down, capped at 1. Under "no difference anywhere" rejecting where the adjusted p
    reaches alpha wrongly separates anything with chance alpha at most, as Holm's does; where some differences are
    real it keeps the expected share of wrong separations among those made at alpha (Benjamini & Hochberg 1995), so
    its power does not fall with every model added, as Holm's does."""
    p = np.asarray(p_values, dtype=float)
    order = np.argsort(p, kind="stable")
    scaled = p[order] * p.size / np.arange(1, p.size + 1)
    adjusted = np.empty_like(p)
    adjusted[order] = np.minimum(np.minimum.accumulate(scaled[::-1])[::-1], 1.0)
    return adjusted
