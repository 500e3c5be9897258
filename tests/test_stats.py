"""The summary's CI of the median and the rank correlations' p-values hold the levels they claim."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from harness.analysis.correlation import PERMUTATION_MAX_N, rank_correlations
from harness.analysis.stats import median_ci, summarize


@pytest.mark.parametrize("values", [[1.0, 2.0, 3.0], [10.0, 10.0, 10.0, 10.0], [4.0, 1.0, 2.0, 3.0, 5.0], [7.0]])
def test_too_few_repeats_get_no_median_ci(values: list[float]) -> None:
    """[min, max] of 3 to 5 runs covers the median 75% to 93.75% of the time, one run never: no 95% CI exists."""
    summary = summarize(values)
    assert (summary.ci95_low, summary.ci95_high, summary.ci95_level) == (None, None, None)
    assert summary.median == float(np.median(values))


@pytest.mark.parametrize("n", range(6, 41))
def test_median_ci_is_scipys_order_statistic_interval_with_its_binomial_level(n: int) -> None:
    data = np.random.default_rng(n).lognormal(0.0, 0.5, n)
    low, high, level = median_ci(data)
    scipy_ci = stats.quantile_test(data, q=float(np.median(data)), p=0.5).confidence_interval(0.95)
    assert (low, high) == (scipy_ci.low, scipy_ci.high)
    # The interval is [x_(k+1), x_(n-k)]: it misses the median when k or fewer runs fall on either side of it.
    k = int(np.searchsorted(np.sort(data), low))
    assert level == pytest.approx(1 - 2 * stats.binom.cdf(k, n, 0.5)) and level >= 0.95
    assert 1 - 2 * stats.binom.cdf(k + 1, n, 0.5) < 0.95  # and it is the narrowest interval that keeps 95%


def test_median_ci_covers_as_often_as_it_claims() -> None:
    """Simulated coverage of a skewed (lognormal, median 1) run-time distribution at every n from 3 to 10."""
    rng = np.random.default_rng(0)
    draws = 40_000
    for n in range(3, 11):
        samples = rng.lognormal(0.0, 0.6, (draws, n))
        interval = median_ci(np.arange(n))  # the order statistics it picks depend on n alone
        if n < 6:
            assert interval is None
            continue
        low_index, high_index = int(interval[0]), int(interval[1])
        ordered = np.sort(samples, axis=1)
        covered = np.mean((ordered[:, low_index] <= 1.0) & (ordered[:, high_index] >= 1.0))
        tolerance = 4 * math.sqrt(interval[2] * (1 - interval[2]) / draws)
        assert covered == pytest.approx(interval[2], abs=tolerance) and covered >= 0.95 - tolerance


@pytest.mark.parametrize(("n", "exact_p"), [(3, 1 / 3), (4, 1 / 12), (5, 1 / 60)])
def test_a_perfect_ranking_of_few_points_gets_its_exact_p_value(n: int, exact_p: float) -> None:
    """spearmanr's t approximation says p = 0 here; only 2 of the n! pairings are as extreme."""
    assert stats.spearmanr(np.arange(n), np.arange(n)).pvalue < 1e-20  # the approximation this replaces
    result = rank_correlations(np.arange(n), np.arange(n) ** 2)
    assert result["spearman_rho"] == pytest.approx(1.0) and result["kendall_tau"] == pytest.approx(1.0)
    assert result["spearman_p"] == pytest.approx(exact_p) and result["kendall_p"] == pytest.approx(exact_p)
    assert result["rank_p_method"] == "exact"


def test_exact_p_values_match_a_full_enumeration_with_ties() -> None:
    x = np.array([1.0, 2.0, 2.0, 3.0, 5.0, 4.0])
    y = np.array([1.5, 1.0, 2.5, 2.5, 4.0, 6.0])
    result = rank_correlations(x, y)
    rho, tau = stats.spearmanr(x, y).statistic, stats.kendalltau(x, y).statistic
    pairings = [np.array(p) for p in itertools.permutations(x)]
    rhos = np.array([stats.spearmanr(p, y).statistic for p in pairings])
    taus = np.array([stats.kendalltau(p, y).statistic for p in pairings])
    # Two-sided: twice the smaller tail, as scipy.stats.permutation_test defines it (with a float tolerance).
    assert result["spearman_p"] == pytest.approx(min(1.0, 2 * min(np.mean(rhos >= rho - 1e-12),
                                                                  np.mean(rhos <= rho + 1e-12))))
    assert result["kendall_p"] == pytest.approx(min(1.0, 2 * min(np.mean(taus >= tau - 1e-12),
                                                                 np.mean(taus <= tau + 1e-12))))


def test_kendall_without_ties_matches_scipys_exact_distribution() -> None:
    rng = np.random.default_rng(5)
    x = rng.normal(size=7)
    y = x + rng.normal(size=7)
    assert rank_correlations(x, y)["kendall_p"] == pytest.approx(stats.kendalltau(x, y, method="exact").pvalue)


def test_larger_samples_keep_scipys_p_values() -> None:
    rng = np.random.default_rng(2)
    x = rng.normal(size=PERMUTATION_MAX_N + 1)
    y = x + rng.normal(size=x.size)
    result = rank_correlations(x, y)
    assert result["rank_p_method"] == "asymptotic"
    assert result["spearman_p"] == stats.spearmanr(x, y).pvalue and result["kendall_p"] == stats.kendalltau(x, y).pvalue


@pytest.mark.filterwarnings("error")
def test_a_constant_series_has_no_rank_agreement_and_prints_no_warning() -> None:
    """A device whose models all measured the same (one energy figure for each): nan, not scipy's warning."""
    result = rank_correlations([1.0, 2.0, 3.0], [5.0, 5.0, 5.0])
    assert math.isnan(result["spearman_rho"]) and math.isnan(result["kendall_tau"])


def test_nine_points_get_a_seeded_permutation_p_value_close_to_the_exact_one() -> None:
    rng = np.random.default_rng(4)
    x = rng.normal(size=9)
    y = x + 2 * rng.normal(size=x.size)
    result = rank_correlations(x, y)
    assert result["rank_p_method"] == "permutation" and result == rank_correlations(x, y)
    # Exact reference from all 9! pairings of the (untied) ranks: rho = 1 - 6 sum(d^2) / (n (n^2 - 1)).
    ranks_y = stats.rankdata(y) - 1
    pairings = np.array(list(itertools.permutations(range(9))), dtype=np.int8)
    rhos = 1 - 6 * ((pairings - ranks_y) ** 2).sum(axis=1) / (9 * 80)
    rho = result["spearman_rho"]
    exact = min(1.0, 2 * min(np.mean(rhos >= rho - 1e-12), np.mean(rhos <= rho + 1e-12)))
    assert result["spearman_p"] == pytest.approx(exact, abs=4 * math.sqrt(exact * (1 - exact) / 40_320) + 1e-4)
