"""Summaries of repeated runs. Pure functions; thresholds are named constants.

Why medians: run times are right-skewed (a page fault storm or a noisy neighbour only ever adds time),
so the median is the robust centre and the IQR the robust spread, as in torch.utils.benchmark and pyperf.
The 95% CI of the median is a percentile bootstrap (scipy.stats.bootstrap) over the repeats, which are
fresh processes and so independent samples of the whole run-to-run variation.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

IQR_WARN_THRESHOLD = 0.10  # IQR/median above this marks a metric unstable (torch.utils.benchmark's choice)
UNSTABLE_RULE = f"IQR/median > {IQR_WARN_THRESHOLD:.0%}"  # how warnings and reports state the rule
HEAVY_THROTTLE_RATIO = 0.10  # share of CFS periods throttled above which a run's latency tail is suspect
BOOTSTRAP_RESAMPLES = 2000
CONFIDENCE = 0.95

# summary metric name -> how to read it from a RunResult
SUMMARY_METRICS: dict[str, tuple[str, ...]] = {
    "runtime_s": ("runtime_s",),
    "load_s": ("load_s",),
    "latency_p50_ms": ("latency_ms", "p50"),
    "latency_p90_ms": ("latency_ms", "p90"),
    "latency_p99_ms": ("latency_ms", "p99"),
    "latency_mean_ms": ("latency_ms", "mean"),
    "throughput_ips": ("throughput_ips",),
    "peak_memory_mib": ("peak_memory_mib",),
    "peak_rss_mib": ("peak_rss_mib",),
    "avg_memory_mib": ("avg_memory_mib",),
    "cpu_s": ("cpu_s",),
}


def metric_value(run: dict[str, Any], metric: str) -> float | None:
    value: Any = run
    for key in SUMMARY_METRICS.get(metric, (metric,)):
        value = value.get(key) if isinstance(value, dict) else None
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def summarize(values: Sequence[float], seed: int = 0) -> dict[str, Any]:
    """median, IQR, mean, std, a bootstrap 95% CI of the median, n, and the unstable flag."""
    data = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    n = int(data.size)
    if n == 0:
        return {"n": 0, "median": None, "iqr": None, "mean": None, "std": None,
                "ci95_low": None, "ci95_high": None, "unstable": False}
    median = float(np.median(data))
    q1, q3 = np.percentile(data, [25, 75])
    low = high = None
    if n >= 3 and np.ptp(data) > 0:
        from scipy import stats as sps  # loaded on first use: every CLI command imports this module

        ci = sps.bootstrap((data,), np.median, confidence_level=CONFIDENCE, n_resamples=BOOTSTRAP_RESAMPLES,
                           method="percentile", rng=np.random.default_rng(seed)).confidence_interval
        low, high = float(ci.low), float(ci.high)
    elif np.ptp(data) == 0:
        low = high = median
    iqr = float(q3 - q1)
    return {
        "n": n, "median": median, "iqr": iqr, "mean": float(np.mean(data)),
        "std": float(np.std(data, ddof=1)) if n > 1 else 0.0, "ci95_low": low, "ci95_high": high,
        "unstable": bool(median and abs(iqr / median) > IQR_WARN_THRESHOLD),
    }


def throttled(run: dict[str, Any]) -> bool:
    periods = run.get("cpu_nr_periods") or 0
    return bool(periods) and (run.get("cpu_nr_throttled") or 0) / periods > HEAVY_THROTTLE_RATIO


def group_key(run: dict[str, Any]) -> tuple[str, float]:
    return str(run["model_name"]), float(run["cpus"])


def summarize_runs(runs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per (model, cpus): status counts and, over its ok runs, a summary of every metric."""
    groups: dict[tuple[str, float], list[dict[str, Any]]] = {}
    for run in runs:
        groups.setdefault(group_key(run), []).append(run)
    entries: list[dict[str, Any]] = []
    for (model, cpus), members in sorted(groups.items()):
        ok = [r for r in members if r.get("status") == "ok"]
        statuses: dict[str, int] = {}
        for run in members:
            statuses[run.get("status", "error")] = statuses.get(run.get("status", "error"), 0) + 1
        metrics = {name: summarize([metric_value(r, name) for r in ok]) for name in SUMMARY_METRICS}
        metrics = {name: s for name, s in metrics.items() if s["n"]}
        entries.append({
            "model_name": model, "cpus": cpus, "n_runs": len(members), "n_ok": len(ok), "statuses": statuses,
            "throttled_runs": sum(throttled(r) for r in ok),
            "unstable_metrics": [name for name, s in metrics.items() if s["unstable"]],
            "metrics": metrics,
        })
    return entries


def summary_rows(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Flat rows for CSV: <metric>_<statistic> columns, units kept in the metric names."""
    rows = []
    for entry in entries:
        row: dict[str, Any] = {k: entry[k] for k in ("model_name", "cpus", "n_runs", "n_ok", "throttled_runs")}
        row["statuses"] = ";".join(f"{k}={v}" for k, v in sorted(entry["statuses"].items()))
        row["unstable_metrics"] = ";".join(entry["unstable_metrics"])
        for name, summary in entry["metrics"].items():
            for stat in ("median", "iqr", "mean", "std", "ci95_low", "ci95_high"):
                row[f"{name}_{stat}"] = summary[stat]
        rows.append(row)
    return rows
