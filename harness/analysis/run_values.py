"""One number per run for each metric that ranking and calibration compare.

Latency is summarised per run by its headline (`latency_ms`): repeats are the independent units, so a run
contributes one value. The headline is the run's median, which resists the odd scheduler hiccup inside a run,
except under a CFS quota (fractional CPUS), where it is the mean: there the median shows the unlimited speed of
the inferences between the quota's stalls (see harness.measure.runner.headline_statistic). The metrics themselves are
defined in harness.core.metric_registry.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from harness.analysis.stats import metric_value
from harness.core import conditions, metric_registry
from harness.core.errors import ConfigError, DataError
from harness.core.records import RunRecord
from harness.core.targets import is_target_run
from harness.store.results import ALL_SESSIONS, iter_all_runs, list_sessions, load_runs, resolve_session

if TYPE_CHECKING:
    from harness.device.data import DeviceData


def check_metric(metric: str, accept: Callable[[metric_registry.Metric], bool] = lambda m: m.lower_is_better) -> str:
    """The registered name of `metric` (family members such as op_time_ms.Conv accepted) when `accept` takes it
    (default: what a ranking can order, lower first); else one line naming the choices."""
    found = metric_registry.lookup(metric)
    if found is None or not accept(found):
        raise ConfigError(f"unknown metric {metric!r}; choose one of: {', '.join(metric_registry.names(accept))}")
    return found.name


def run_value(run: RunRecord, metric: str, across: str | None = None) -> float | None:
    """The run's value of `metric` (what the repeats rule `across` takes from it, when given), or None when the
    run failed or did not report it."""
    if not run.ok:
        return None
    return metric_value(run, metric) if across is None else metric_registry.get(metric).repeat_value(run.line, across)


def metric_table(runs: Iterable[RunRecord], metric: str, across: str | None = None) -> pd.DataFrame:
    """Long table (model_name, cpus, run_id, value, over) of the ok runs that reported `metric`; `over` counts the
    values `value` is the smallest of (the run's inferences when it is the run's fastest inference, else 1)."""
    entry = metric_registry.get(metric)
    rows = [
        {"model_name": run.model_name, "cpus": float(run.cpus), "run_id": run.run_id, "value": value,
         "over": entry.repeat_count(run.line, across)}
        for run in runs
        if (value := run_value(run, metric, across)) is not None
    ]
    return pd.DataFrame(rows, columns=["model_name", "cpus", "run_id", "value", "over"])


def harness_values(runs: Iterable[RunRecord], metric: str, across: str | None = None) -> pd.DataFrame:
    """Per (model_name, cpus): `metric` over the repeats, as `across` says (metric_registry.ACROSS_REPEATS;
    default: the registry's rule for the metric), with the number of repeats `n`, the rule in `across`, and for
    the fastest rules `over`, how many values the minimum was taken over (a minimum falls as they grow)."""
    how = across or metric_registry.get(metric).across_repeats
    grouped = metric_table(runs, metric, how).groupby(["model_name", "cpus"])
    if how == metric_registry.MEDIAN:
        values = grouped["value"].agg(value="median", n="count").reset_index().assign(over=math.nan)
    else:
        values = grouped.agg(value=("value", "min"), n=("value", "count"), over=("over", "sum")).reset_index()
    return values.assign(across=how)


def select_runs(results_dir: Path, session: str | None, runtime: str | None = None,
                device: DeviceData | None = None) -> tuple[list[RunRecord], str]:
    """Runs of one session (default: the newest), or of every session pooled when session == "all", only those of
    the engine `runtime` names, else of the engine `device`'s data says it ran (a device's data pairs with the runs of
    the engine it ran); refused in one line when they hold runs under different conditions
    (harness.core.conditions), which must not be pooled. Against a device, only this host's runs count: a board's
    (TARGET) are that device's measurements, not the harness's."""
    runs, name = _session_runs(results_dir, session, host_only=device is not None)
    if runtime is not None:
        runs = _on_runtime(runs, runtime, name, f"--runtime {runtime}")
    elif device is not None and device.runtime is not None:
        runs = _on_runtime(runs, device.runtime, name, f"device {device.name} (its data ran on {device.runtime})",
                           "; or pass --runtime ENGINE to pair it with another engine's runs")
    return _poolable(runs, name), name


def split_by_engine(runs: Iterable[RunRecord]) -> dict[str, list[RunRecord]]:
    """The runs by the engine they ran on (RUNTIME values, in RUNTIME_ENGINES's order); runs of a user's script,
    which names no engine, are left out."""
    split: dict[str, list[RunRecord]] = {}
    for run in runs:
        engine = conditions.runtime_name(run)
        if engine is not None:
            split.setdefault(engine, []).append(run)
    return {engine: split[engine] for engine in conditions.RUNTIME_ENGINES if engine in split}


def runs_by_engine(results_dir: Path, session: str | None) -> tuple[dict[str, list[RunRecord]], str]:
    """The runs of select_runs's session(s) split by engine (split_by_engine), each engine's checked for pooling as
    select_runs checks them."""
    runs, name = _session_runs(results_dir, session, host_only=True)
    return {engine: _poolable(engine_runs, name) for engine, engine_runs in split_by_engine(runs).items()}, name


def _session_runs(results_dir: Path, session: str | None, host_only: bool = False) -> tuple[list[RunRecord], str]:
    """The runs of `session` (None: the newest; with `host_only`, the newest that ran on this host), or of all."""
    if session == ALL_SESSIONS:
        runs = [run for run in iter_all_runs(results_dir) if not (host_only and is_target_run(run))]
        if not runs:
            raise DataError(f"no runs under {results_dir}; run `make profile MODEL=...` first")
        return runs, ALL_SESSIONS
    if session is None and host_only:
        for session_dir in reversed(list_sessions(results_dir)):
            runs = load_runs(session_dir)
            if any(not is_target_run(run) for run in runs):
                return runs, session_dir.name
        raise DataError(f"no session under {results_dir} ran on this host; profile the models here first "
                        "(`make profile MODEL=...` without TARGET)")
    session_dir = resolve_session(results_dir, session)
    return load_runs(session_dir), session_dir.name


def _poolable(runs: list[RunRecord], session: str) -> list[RunRecord]:
    conflict = conditions.pooling_conflict(run.line for run in runs)
    if conflict:
        raise DataError(f"--session {session}: {conflict}; such runs are not comparable: pick one session "
                        "(--session ID, make: SESSION=ID) or profile the models again under one profile")
    return runs


def _on_runtime(runs: list[RunRecord], runtime: str, session: str, said_by: str, other: str = "") -> list[RunRecord]:
    """The runs that ran on `runtime` (which `said_by` names); one line naming the engines the session holds when
    none did."""
    if runtime not in conditions.RUNTIME_ENGINES:
        raise ConfigError(f"{said_by}: not an engine; choose one of: {', '.join(conditions.RUNTIME_ENGINES)}")
    kept = [run for run in runs if conditions.runtime_name(run) == runtime]
    if not kept:
        held = sorted({conditions.runtime_name(run) or "the user's script" for run in runs})
        raise DataError(f"{said_by}: no run of session {session} ran on {runtime} (its runs ran on "
                        f"{', '.join(held) or 'nothing'}); profile the models with RUNTIME={runtime} first{other}")
    return kept
