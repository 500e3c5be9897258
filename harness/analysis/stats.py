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

import dataclasses
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from harness.core import conditions, metric_registry
from harness.core.records import RunRecord

IQR_WARN_THRESHOLD = 0.10  # IQR/median above this marks a metric unstable (torch.utils.benchmark's choice)
UNSTABLE_RULE = f"IQR/median > {IQR_WARN_THRESHOLD:.0%}"  # how warnings and reports state the rule
HEAVY_THROTTLE_RATIO = 0.10  # share of CFS periods throttled above which a run's latency tail is suspect
CONFIDENCE = 0.95
ALPHA = 0.05  # the level of the ranking's tests (harness.analysis.ranking), FDR-adjusted over neighbour pairs
# Medians closer than this tie in a ranking, however significant its test (asv's "minimum factor", 1.1 by default
# there): the same 10% above which the summary calls repeats of one model unstable.
MIN_RELATIVE_GAP = IQR_WARN_THRESHOLD

SUMMARY_METRICS: tuple[str, ...] = tuple(m.name for m in metric_registry.METRICS)
"""Every registered metric is summarised per group."""


def metric_value(run: RunRecord, metric: str) -> float | None:
    """The run's value of a registered metric, or None when it has none (the run's status is not checked)."""
    return metric_registry.get(metric).value(run.line)


def median_ci(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float, float] | None:
    """(low, high, achieved level) of the distribution-free order-statistic CI of the median, or None when even
    [min, max] falls short of `confidence` (n < 6 at 95%). The level is exact for continuous data, a lower
    bound with ties."""
    data = sorted(float(v) for v in values)
    n = len(data)
    below, level = 0, None  # below: P(Binomial(n, 1/2) <= k), summed exactly over k
    for k in range((n + 1) // 2):
        below += math.comb(n, k)
        coverage = 1.0 - 2.0 * below / 2**n  # of [x_(k+1), x_(n-k)] (0-based k), falling as the interval narrows
        if coverage < confidence:
            break
        level = (data[k], data[n - 1 - k], coverage)
    return level


@dataclass(frozen=True)
class Summary:
    """One metric over repeats: the figures summarize() names; None where there are no values (and no CI below 6)."""

    n: int
    median: float | None = None
    iqr: float | None = None
    mean: float | None = None
    std: float | None = None
    ci95_low: float | None = None
    ci95_high: float | None = None
    ci95_level: float | None = None
    unstable: bool = False  # IQR/median above IQR_WARN_THRESHOLD

    def as_dict(self) -> dict[str, Any]:
        """The figures by name, as summary.json, `compare --json` and the report's tables hold them."""
        return dataclasses.asdict(self)


NO_VALUES = Summary(n=0)
"""The summary of no values: every figure None."""


def summarize(values: Sequence[float | None]) -> Summary:
    """median, IQR, mean, std, the 95% CI of the median with the level it achieves, n, and the unstable flag, over
    the finite values (None and NaN left out). Quartiles interpolate linearly between order statistics (numpy's
    default percentile method)."""
    data = sorted(float(v) for v in values if v is not None and math.isfinite(v))
    n = len(data)
    if n == 0:
        return NO_VALUES
    median = statistics.median(data)
    q1, _, q3 = statistics.quantiles(data, n=4, method="inclusive") if n > 1 else (data[0],) * 3
    low, high, level = median_ci(data) or (None, None, None)
    iqr = q3 - q1
    return Summary(
        n=n, median=median, iqr=iqr, mean=statistics.fmean(data), std=statistics.stdev(data) if n > 1 else 0.0,
        ci95_low=low, ci95_high=high, ci95_level=level,
        unstable=bool(median and abs(iqr / median) > IQR_WARN_THRESHOLD),
    )


def throttled(run: RunRecord) -> bool:
    periods = run.result.cpu_nr_periods or 0
    return bool(periods) and (run.result.cpu_nr_throttled or 0) / periods > HEAVY_THROTTLE_RATIO


def noisy(run: RunRecord) -> bool:
    """Whether the machine did enough else during the run to move its timing (harness.measure.host_load)."""
    return bool((run.result.host_load or {}).get("noisy"))


def group_key(run: RunRecord) -> tuple[Any, ...]:
    """Runs pool into one summary only under equal conditions (harness.core.conditions): model, CPUS and the rest."""
    return run.model_name, float(run.cpus), conditions.key(run.line)


@dataclass(frozen=True)
class GroupSummary:
    """The summary of one group of runs (one group_key): status counts and, over its ok runs, every metric that
    any of them reported. `differs_in` and `condition_label` are set by ordered_entries, beside other groups."""

    model_name: str
    cpus: float
    n_runs: int
    n_ok: int
    statuses: dict[str, int]
    throttled_runs: int
    shorter_than_quota_window_runs: int
    noisy_runs: int  # runs that shared the machine (harness.measure.host_load): their timing is the machine's too
    latency_headline: str
    unstable_metrics: list[str]
    metrics: dict[str, Summary]
    conditions: dict[str, Any]
    differs_in: list[str] | None = None  # the labels of the conditions that set it apart from its siblings
    condition_label: str | None = None  # its own values of those

    @property
    def conditions_key(self) -> tuple[Any, ...]:
        return conditions.key({"conditions": self.conditions})

    def as_dict(self) -> dict[str, Any]:
        """The entry of summary.json's `models`, keys in their stored order."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name not in ("metrics", "conditions", "differs_in", "condition_label")}
        labels = {"differs_in": self.differs_in, "condition_label": self.condition_label}
        metrics = {name: summary.as_dict() for name, summary in self.metrics.items()}
        return {**data, "metrics": metrics, "conditions": self.conditions,
                **{k: v for k, v in labels.items() if v is not None}}


def summarize_group(members: Sequence[RunRecord]) -> GroupSummary:
    """The entry of one group (runs with one group_key): status counts and, over its ok runs, every metric."""
    ok = [r for r in members if r.ok]
    statuses: dict[str, int] = {}
    for run in members:
        statuses[run.result.status] = statuses.get(run.result.status, 0) + 1
    every = {name: summarize([metric_value(r, name) for r in ok]) for name in SUMMARY_METRICS}
    metrics = {name: s for name, s in every.items() if s.n}
    return GroupSummary(
        model_name=members[0].model_name, cpus=float(members[0].cpus), n_runs=len(members), n_ok=len(ok),
        statuses=statuses, throttled_runs=sum(throttled(r) for r in ok),
        shorter_than_quota_window_runs=sum(r.result.shorter_than_quota_window for r in ok),
        noisy_runs=sum(noisy(r) for r in ok),
        latency_headline=next((r.result.latency_headline for r in ok if r.result.latency_headline), "p50"),
        unstable_metrics=[name for name, s in metrics.items() if s.unstable], metrics=metrics,
        conditions=members[0].conditions,
    )


def ordered_entries(entries: Iterable[GroupSummary]) -> list[GroupSummary]:
    """Entries by model and CPUS; where one model and CPUS has several (runs under different conditions),
    each says in `differs_in` which conditions set them apart and in `condition_label` its own values."""
    ordered = sorted(entries, key=lambda e: (e.model_name, e.cpus, str(e.conditions_key)))
    by_model: dict[tuple[str, float], list[GroupSummary]] = {}
    for entry in ordered:
        by_model.setdefault((entry.model_name, entry.cpus), []).append(entry)
    labelled = []
    for siblings in by_model.values():
        keys = conditions.differing_keys({"conditions": e.conditions} for e in siblings) if len(siblings) > 1 else []
        labelled += [dataclasses.replace(entry, differs_in=[conditions.CONDITIONS[k] for k in keys],
                                         condition_label=conditions.describe(entry.conditions, keys))
                     for entry in siblings]
    return labelled


def summarize_runs(runs: Iterable[RunRecord]) -> list[GroupSummary]:
    """One entry per model, CPUS and conditions: runs under different conditions are never pooled."""
    groups: dict[tuple[Any, ...], list[RunRecord]] = {}
    for run in runs:
        groups.setdefault(group_key(run), []).append(run)
    return ordered_entries(summarize_group(members) for members in groups.values())


def summary_rows(entries: Iterable[GroupSummary]) -> list[dict[str, Any]]:
    """Flat rows for CSV: <metric>_<statistic> columns, units kept in the metric names."""
    rows = []
    for entry in entries:
        row: dict[str, Any] = {"model_name": entry.model_name, "cpus": entry.cpus,
                               "n_runs": entry.n_runs, "n_ok": entry.n_ok, "throttled_runs": entry.throttled_runs,
                               "noisy_runs": entry.noisy_runs}
        row["conditions"] = entry.condition_label or ""
        row["statuses"] = ";".join(f"{k}={v}" for k, v in sorted(entry.statuses.items()))
        row["unstable_metrics"] = ";".join(entry.unstable_metrics)
        for name, summary in entry.metrics.items():
            for stat in ("median", "iqr", "mean", "std", "ci95_low", "ci95_high", "ci95_level"):
                row[f"{name}_{stat}"] = getattr(summary, stat)
        rows.append(row)
    return rows
