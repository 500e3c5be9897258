"""Rank agreement of two paired series (Spearman's rho, Kendall's tau-b) with p-values that hold for few points.

Calibration asks whether the device orders models as the harness does, often over 5 to 10 models, where the t and
normal approximations of scipy's spearmanr and kendalltau are far off: there the p-values come from the pairings
themselves, exactly or by a seeded permutation sample.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import stats as sps

# Rank correlations of at most this many points get permutation p-values: the t and normal approximations
# spearmanr and kendalltau use are far off there (a perfect ranking of 3 points gets p = 0; exact: 1/3).
PERMUTATION_MAX_N = 10
# All n! pairings are enumerated (an exact p) while n! <= this, so up to n = 8; above, this many random ones.
PERMUTATION_RESAMPLES = 40_320  # 8!


def rank_correlations(x_values: Sequence[float] | np.ndarray, y_values: Sequence[float] | np.ndarray,
                      seed: int = 0) -> dict[str, Any]:
    """Spearman rho and Kendall tau-b with two-sided p-values, and how the p-values were found: `exact`
    (every pairing of x with y), `permutation` (PERMUTATION_RESAMPLES random pairings, seeded) or `asymptotic`
    (scipy's approximations, good above PERMUTATION_MAX_N points). Permutation p-values keep ties in place."""
    x, y = np.asarray(x_values, dtype=float), np.asarray(y_values, dtype=float)
    with warnings.catch_warnings():  # a constant series has no ranks to agree: nan, which the result carries
        warnings.simplefilter("ignore", sps.ConstantInputWarning)
        spearman, kendall = sps.spearmanr(x, y), sps.kendalltau(x, y)
    rho, tau = float(spearman.statistic), float(kendall.statistic)
    result: dict[str, Any] = {"spearman_rho": rho, "spearman_p": float(spearman.pvalue), "kendall_tau": tau,
                              "kendall_p": float(kendall.pvalue), "rank_p_method": "asymptotic"}
    n = int(x.size)
    if n > PERMUTATION_MAX_N or not (math.isfinite(rho) and math.isfinite(tau)):
        return result
    # Spearman's rho is Pearson's r of the ranks; Kendall's tau-b over pairings is its concordance count scaled
    # by a denominator that no pairing changes, so the concordance count gives the same p-value.
    i, j = np.triu_indices(n, 1)
    y_signs = np.sign(y[i] - y[j])

    def concordance(xs: np.ndarray, axis: int = -1) -> np.ndarray:
        return (np.sign(xs[..., i] - xs[..., j]) * y_signs).sum(axis=-1)

    pairings = sps.PermutationMethod(n_resamples=PERMUTATION_RESAMPLES, rng=np.random.default_rng(seed))
    result["spearman_p"] = float(sps.pearsonr(sps.rankdata(x), sps.rankdata(y), method=pairings).pvalue)
    result["kendall_p"] = float(sps.permutation_test(
        (x,), concordance, permutation_type="pairings", vectorized=True, n_resamples=PERMUTATION_RESAMPLES,
        rng=np.random.default_rng(seed)).pvalue)
    result["rank_p_method"] = "exact" if math.factorial(n) <= PERMUTATION_RESAMPLES else "permutation"
    return result
