"""Every metric the harness reports, defined once: name, unit, where it sits in a run record, how to show it.

Summaries, ranking, calibration, the console and report tables, `compare`, device data and docs/metrics.md
all take their metric lists from here, so a new metric (a per-operator time, energy) is added in one place.
Stdlib only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

MEDIAN, FASTEST, FASTEST_INFERENCE = "median", "fastest", "fastest-inference"
ACROSS_REPEATS = (FASTEST_INFERENCE, FASTEST, MEDIAN)
"""How calibration turns a model's repeats into one harness value. Other load on the host only ever lengthens
times, in bursts of seconds that slow whole runs by up to 1.8x, so times take the least disturbed value
(timeit's rationale): `fastest-inference`, the fastest single inference of all repeats, for per-inference
latencies (one quiet moment in any repeat suffices, where `fastest` needs a whole quiet run); `fastest`, the
smallest run value, for whole-run times, and for runs under a CFS quota, whose headline latency is the mean with
its stalls. `median` for memory, which such load leaves alone."""
FASTEST_INFERENCE_PATH = ("latency_stats_ms", "min")
INFERENCE_COUNT_PATH = ("latency_stats_ms", "n")


@dataclass(frozen=True)
class Metric:
    """One number per run. `path` leads from the top of a run record to the value."""

    name: str
    unit: str
    path: tuple[str, ...]
    label: str
    digits: int
    description: str
    lower_is_better: bool = True
    ranked: bool = False  # the report ranks models by it
    calibrated: bool = False  # device data may hold it, so it can be calibrated and predicted
    across_repeats: str = "median"  # how calibration summarises a model's repeats (ACROSS_REPEATS)
    per_inference: bool = False  # a statistic of the run's inferences: `fastest-inference` applies to it
    calibrated_from: str | None = None  # the harness metric a device's values are fitted against, when not itself

    @property
    def harness_side(self) -> str:
        """The metric whose harness values calibrate this one: energy ≈ power × time, and a device's power varies
        less between models than its time does, so device energy is fitted against the harness's latency (and a
        model's work, as every fit may use it), which every run has, where RAPL energy is on few hosts."""
        return self.calibrated_from or self.name

    @property
    def label_with_unit(self) -> str:
        """How tables head its column: `latency p50 (ms)`."""
        return f"{self.label} ({self.unit})"

    def value(self, run: Mapping[str, Any]) -> float | None:
        """The run's value, or None when absent or not a finite number (the run's status is not checked)."""
        return _number_at(run, self.path)

    def absent_reason(self, runs: Iterable[Mapping[str, Any]]) -> str:
        """`: why` the runs hold no value, where one says (`energy.absent`: no readable RAPL counter), else ''."""
        for run in runs:
            holder: Any = run
            for key in self.path[:-1]:
                holder = holder.get(key) if isinstance(holder, Mapping) else None
            if isinstance(holder, Mapping) and holder.get("absent"):
                return f": {holder['absent']}"
        return ""

    def takes_fastest_inference(self, run: Mapping[str, Any], across: str | None) -> bool:
        """Whether `across` takes this run's fastest inference: under `fastest-inference`, for a per-inference
        latency of a run without a CFS quota that recorded it."""
        return (across == FASTEST_INFERENCE and self.per_inference and run.get("latency_headline") != "mean"
                and _number_at(run, FASTEST_INFERENCE_PATH) is not None)

    def repeat_value(self, run: Mapping[str, Any], across: str | None) -> float | None:
        """What `across` takes from this run: its fastest inference (takes_fastest_inference), else its value."""
        return _number_at(run, FASTEST_INFERENCE_PATH) if self.takes_fastest_inference(run, across) else self.value(run)

    def repeat_count(self, run: Mapping[str, Any], across: str | None) -> int:
        """How many values repeat_value is the fastest of: the run's inferences when it is its fastest inference,
        else 1 (the run's own value)."""
        if not self.takes_fastest_inference(run, across):
            return 1
        return int(_number_at(run, INFERENCE_COUNT_PATH) or 1)


def _number_at(run: Mapping[str, Any], path: tuple[str, ...]) -> float | None:
    value: Any = run
    for key in path:
        value = value.get(key) if isinstance(value, Mapping) else None
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


METRICS: tuple[Metric, ...] = (
    Metric("latency_ms", "ms", ("latency_stats_ms", "headline"), "latency", 3,
           "the run's headline latency: its 5th-percentile inference (its median with LATENCY_STATISTIC=p50), or "
           "under a CFS quota (fractional CPUS) its mean, since there the median shows the unlimited speed between "
           "the quota's stalls (`latency_headline` says which)", ranked=True, calibrated=True,
           across_repeats=FASTEST_INFERENCE, per_inference=True),
    Metric("latency_p50_ms", "ms", ("latency_stats_ms", "p50"), "latency p50", 3,
           "median per-inference latency within the run", calibrated=True, across_repeats=FASTEST_INFERENCE,
           per_inference=True),
    Metric("latency_p90_ms", "ms", ("latency_stats_ms", "p90"), "latency p90", 3,
           "90th percentile of per-inference latency within the run"),
    Metric("latency_p99_ms", "ms", ("latency_stats_ms", "p99"), "latency p99", 3,
           "99th percentile of per-inference latency within the run"),
    Metric("latency_mean_ms", "ms", ("latency_stats_ms", "mean"), "latency mean", 3,
           "mean per-inference latency within the run (shows CFS quota stalls that the p50 hides)",
           calibrated=True, across_repeats=FASTEST),
    Metric("throughput_ips", "1/s", ("throughput_ips",), "throughput", 1,
           "inferences per second: batch size / mean latency", lower_is_better=False),
    Metric("runtime_s", "s", ("runtime_s",), "runtime", 3, "bench script spawn to exit, monotonic clock",
           ranked=True, calibrated=True, across_repeats=FASTEST),
    Metric("load_s", "s", ("load_s",), "load", 3, "model load and session creation, as the script reports it",
           calibrated=True, across_repeats=FASTEST),
    Metric("peak_memory_mib", "MiB", ("peak_memory_mib",), "peak memory", 1,
           "high-water mark of the run's memory (kernel's when a cgroup is the run's own, else sampled)",
           ranked=True, calibrated=True),
    Metric("peak_rss_mib", "MiB", ("peak_rss_mib",), "peak RSS", 1,
           "largest resident set of a single process of the run (ru_maxrss)", calibrated=True),
    Metric("avg_memory_mib", "MiB", ("avg_memory_mib",), "avg memory", 1,
           "time-weighted mean of the sampled working set over the run", calibrated=True),
    Metric("cpu_s", "s", ("cpu_s",), "CPU time", 3, "user + system CPU time of the bench script's process tree"),
    Metric("energy_mj", "mJ", ("energy", "energy_mj"), "energy", 3,
           "energy per inference: on a device, its input rail's or meter's energy over the timed phase per inference "
           "(docs/energy.md); on the host, RAPL's package energy over the timed phase per inference, where readable "
           "(`energy.absent` says why not)", calibrated=True, calibrated_from="latency_ms"),
    Metric("avg_power_w", "W", ("energy", "avg_power_w"), "avg power", 3,
           "mean power over the timed phase: the device's input rail or meter, or the host's RAPL packages",
           calibrated=True, calibrated_from="latency_ms"),
    Metric("dynamic_energy_mj", "mJ", ("energy", "dynamic_energy_mj"), "dynamic energy", 3,
           "energy per inference above the device's idle power (an idle log given to import-device --idle)",
           calibrated=True, calibrated_from="latency_ms"),
)



@dataclass(frozen=True)
class MetricFamily:
    """Metrics named `<family>.<key>` whose keys a run brings (op_time_ms.Conv); each member is one number per run."""

    name: str
    unit: str
    label: str
    digits: int
    description: str
    lower_is_better: bool = True

    def member(self, key: str) -> Metric:
        return Metric(f"{self.name}.{key}", self.unit, (self.name, key), f"{self.label} {key}", self.digits,
                      self.description, self.lower_is_better)


OP_TIME = "op_time_ms"
"""The per-operator family; a run record holds its members as a dict under this name (PER_OP=1)."""
FAMILIES: tuple[MetricFamily, ...] = (
    MetricFamily(OP_TIME, "ms", "op time", 3,
                 "mean ms per inference spent in nodes of one operator type, from the PER_OP=1 profiling phase"),
)

BY_NAME: dict[str, Metric] = {m.name: m for m in METRICS}
LATENCY, LATENCY_MEAN, RUNTIME, PEAK_MEMORY = "latency_ms", "latency_mean_ms", "runtime_s", "peak_memory_mib"
"""The headline metrics, for code that names one (the answer: latency, or runtime without latencies; memory)."""
LATENCY_P50, LATENCY_P90, LATENCY_P99 = "latency_p50_ms", "latency_p90_ms", "latency_p99_ms"
LOAD, PEAK_RSS, AVG_MEMORY = "load_s", "peak_rss_mib", "avg_memory_mib"
ENERGY, AVG_POWER, DYNAMIC_ENERGY = "energy_mj", "avg_power_w", "dynamic_energy_mj"
"""Metrics that device tools report too, for the readers of their logs (harness.device)."""
DEFAULT_METRIC = LATENCY
"""What `rank` ranks by when no --metric is given."""

CONSOLE_METRICS = ("runtime_s", "latency_ms", "latency_p99_ms", "throughput_ips", "peak_memory_mib",
                   "peak_rss_mib", "avg_memory_mib", "load_s")
"""The columns of the summary table printed after a session, in order."""
COMPARE_METRICS = ("latency_ms", "latency_p50_ms", "latency_p99_ms", "throughput_ips", "runtime_s", "load_s",
                   "peak_memory_mib", "peak_rss_mib", "avg_memory_mib")
"""The measured rows of `compare`, in order."""
REPORT_SUMMARY_METRICS = ("latency_p50_ms", "runtime_s", "load_s", "peak_memory_mib", "peak_rss_mib",
                          "avg_memory_mib")
"""The columns of the report's summary table; the first also gets its confidence interval."""
SCALING_METRICS = ("latency_p50_ms", "peak_memory_mib")
"""Plotted against CPUS when a session has several CPU counts."""


def lookup(name: str) -> Metric | None:
    """The metric called `name`, or a family member (op_time_ms.Conv); None if none."""
    found = BY_NAME.get(name)
    if found is not None:
        return found
    family_name, _, key = name.partition(".")
    family = next((f for f in FAMILIES if f.name == family_name), None)
    return family.member(key) if family is not None and key else None


def get(name: str) -> Metric:
    """As lookup(), but a name that is no metric is a KeyError (a bug, not a user's typo)."""
    found = lookup(name)
    if found is None:
        raise KeyError(name)
    return found


def names(accept: Callable[[Metric], bool]) -> list[str]:
    """The names `accept` takes, families as `<family>.<key>`: for error messages and help texts."""
    return [m.name for m in METRICS if accept(m)] + [f"{f.name}.<key>" for f in FAMILIES if accept(f.member("key"))]


def ranked() -> tuple[Metric, ...]:
    return tuple(m for m in METRICS if m.ranked)


def calibrated() -> tuple[Metric, ...]:
    return tuple(m for m in METRICS if m.calibrated)
