"""Summaries of repeated runs. Pure functions; thresholds are named constants.

Why medians: run times are right-skewed (a page fault storm or a noisy neighbour only ever adds time),
so the median is the robust centre and the IQR the robust spread, as in torch.utils.benchmark and pyperf.

The 95% CI of the median is the distribution-free order-statistic interval: for n independent repeats
(fresh processes), the number of runs below the true median is Binomial(n, 1/2) whatever the metric's
distribution, so [x_(j), x_(n+1-j)] covers it with probability 1 - 2 P(B <= j-1). The widest j that keeps
that at 95% or more is used and the level it achieves is reported; below 6 repeats even [min, max] covers
less than 95% (75% at n = 3, 93.75% at n = 5), so there is no interval. A bootstrap cannot do better: for
n = 3 to 5 its percentile interval is [min, max] and claims 95% where it has 75 to 94%.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from harness.core import conditions, metric_registry

IQR_WARN_THRESHOLD = 0.10  # IQR/median above this marks a metric unstable (torch.utils.benchmark's choice)
UNSTABLE_RULE = f"IQR/median > {IQR_WARN_THRESHOLD:.0%}"  # how warnings and reports state the rule
HEAVY_THROTTLE_RATIO = 0.10  # share of CFS periods throttled above which a run's latency tail is suspect
CONFIDENCE = 0.95
# Rank correlations of at most this many points get permutation p-values: the t and normal approximations
# spearmanr and kendalltau use are far off there (a perfect ranking of 3 points gets p = 0; exact: 1/3).
PERMUTATION_MAX_N = 10
# All n! pairings are enumerated (an exact p) while n! <= this, so up to n = 8; above, this many random ones.
PERMUTATION_RESAMPLES = 40_320  # 8!

SUMMARY_METRICS: tuple[str, ...] = tuple(m.name for m in metric_registry.METRICS)
"""Every registered metric is summarised per group."""


def metric_value(run: dict[str, Any], metric: str) -> float | None:
    """The run's value of a registered metric, or None when it has none (the run's status is not checked)."""
    return metric_registry.get(metric).value(run)


def median_ci(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float, float] | None:
    """(low, high, achieved level) of the distribution-free order-statistic CI of the median, or None when even
    [min, max] falls short of `confidence` (n < 6 at 95%). The level is exact for continuous data, a lower
    bound with ties."""
    from scipy.stats import binom  # loaded on first use: every CLI command imports this module

    data = np.sort(np.asarray(values, dtype=float))
    n = int(data.size)
    # levels[k]: coverage of [x_(k+1), x_(n-k)] (0-based k), falling as the interval narrows.
    levels = 1.0 - 2.0 * binom.cdf(np.arange((n + 1) // 2), n, 0.5)
    reaching = np.flatnonzero(levels >= confidence)
    if not reaching.size:
        return None
    k = int(reaching[-1])
    return float(data[k]), float(data[n - 1 - k]), float(levels[k])


def summarize(values: Sequence[float]) -> dict[str, Any]:
    """median, IQR, mean, std, the 95% CI of the median with the level it achieves, n, and the unstable flag."""
    data = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    n = int(data.size)
    if n == 0:
        return {"n": 0, "median": None, "iqr": None, "mean": None, "std": None,
                "ci95_low": None, "ci95_high": None, "ci95_level": None, "unstable": False}
    median = float(np.median(data))
    q1, q3 = np.percentile(data, [25, 75])
    low, high, level = median_ci(data) or (None, None, None)
    iqr = float(q3 - q1)
    return {
        "n": n, "median": median, "iqr": iqr, "mean": float(np.mean(data)),
        "std": float(np.std(data, ddof=1)) if n > 1 else 0.0, "ci95_low": low, "ci95_high": high,
        "ci95_level": level, "unstable": bool(median and abs(iqr / median) > IQR_WARN_THRESHOLD),
    }


def rank_correlations(x: Sequence[float], y: Sequence[float], seed: int = 0) -> dict[str, Any]:
    """Spearman rho and Kendall tau-b with two-sided p-values, and how the p-values were found: `exact`
    (every pairing of x with y), `permutation` (PERMUTATION_RESAMPLES random pairings, seeded) or `asymptotic`
    (scipy's approximations, good above PERMUTATION_MAX_N points). Permutation p-values keep ties in place."""
    from scipy import stats as sps

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    spearman, kendall = sps.spearmanr(x, y), sps.kendalltau(x, y)
    result = {"spearman_rho": float(spearman.statistic), "spearman_p": float(spearman.pvalue),
              "kendall_tau": float(kendall.statistic), "kendall_p": float(kendall.pvalue),
              "rank_p_method": "asymptotic"}
    n = int(x.size)
    if n > PERMUTATION_MAX_N or not (math.isfinite(result["spearman_rho"]) and math.isfinite(result["kendall_tau"])):
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


def throttled(run: dict[str, Any]) -> bool:
    periods = run.get("cpu_nr_periods") or 0
    return bool(periods) and (run.get("cpu_nr_throttled") or 0) / periods > HEAVY_THROTTLE_RATIO


def group_key(run: dict[str, Any]) -> tuple[Any, ...]:
    """Runs pool into one summary only under equal conditions (harness.core.conditions): model, CPUS and the rest."""
    return str(run["model_name"]), float(run["cpus"]), conditions.key(run)


def summarize_group(members: list[dict[str, Any]]) -> dict[str, Any]:
    """The entry of one group (runs with one group_key): status counts and, over its ok runs, every metric."""
    ok = [r for r in members if r.get("status") == "ok"]
    statuses: dict[str, int] = {}
    for run in members:
        statuses[run.get("status", "error")] = statuses.get(run.get("status", "error"), 0) + 1
    metrics = {name: summarize([metric_value(r, name) for r in ok]) for name in SUMMARY_METRICS}
    metrics = {name: s for name, s in metrics.items() if s["n"]}
    return {
        "model_name": str(members[0]["model_name"]), "cpus": float(members[0]["cpus"]), "n_runs": len(members),
        "n_ok": len(ok), "statuses": statuses, "throttled_runs": sum(throttled(r) for r in ok),
        "shorter_than_quota_window_runs": sum(bool(r.get("shorter_than_quota_window")) for r in ok),
        "latency_headline": next((r["latency_headline"] for r in ok if r.get("latency_headline")), "p50"),
        "unstable_metrics": [name for name, s in metrics.items() if s["unstable"]], "metrics": metrics,
        "conditions": members[0].get("conditions") or {},
    }


def ordered_entries(entries: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Entries by model and CPUS; where one model and CPUS has several (runs under different conditions),
    each says in `differs_in` which conditions set them apart and in `condition_label` its own values."""
    ordered = sorted(entries, key=lambda e: (e["model_name"], e["cpus"], str(conditions.key(e))))
    by_model: dict[tuple[str, float], list[dict[str, Any]]] = {}
    for entry in ordered:
        by_model.setdefault((entry["model_name"], entry["cpus"]), []).append(entry)
    for siblings in by_model.values():
        keys = conditions.differing_keys(siblings) if len(siblings) > 1 else []
        for entry in siblings:
            entry["differs_in"] = [conditions.CONDITIONS[k] for k in keys]
            entry["condition_label"] = conditions.describe(entry["conditions"], keys)
    return ordered


def summarize_runs(runs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per model, CPUS and conditions: runs under different conditions are never pooled."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for run in runs:
        groups.setdefault(group_key(run), []).append(run)
    return ordered_entries(summarize_group(members) for members in groups.values())


def summary_rows(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Flat rows for CSV: <metric>_<statistic> columns, units kept in the metric names."""
    rows = []
    for entry in entries:
        row: dict[str, Any] = {k: entry[k] for k in ("model_name", "cpus", "n_runs", "n_ok", "throttled_runs")}
        row["conditions"] = entry.get("condition_label", "")
        row["statuses"] = ";".join(f"{k}={v}" for k, v in sorted(entry["statuses"].items()))
        row["unstable_metrics"] = ";".join(entry["unstable_metrics"])
        for name, summary in entry["metrics"].items():
            for stat in ("median", "iqr", "mean", "std", "ci95_low", "ci95_high", "ci95_level"):
                row[f"{name}_{stat}"] = summary[stat]
        rows.append(row)
    return rows
