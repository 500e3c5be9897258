"""A session: plan every run up front, run them interleaved, store each one the moment it ends.

Repeats are fresh processes. With several models (or CPUS values) every round runs each combination
once, in an order shuffled with a recorded seed, so slow drift of the machine (thermal, background load)
spreads over all models instead of biasing the one that happened to run last.
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import shlex
import shutil
import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.analysis.stats import group_key, ordered_entries, summarize_group, summary_rows
from harness.backends import Backend
from harness.core.conditions import run_conditions, run_packages
from harness.core.config import DeviceProfile, dim_sizes, host_cpu_count
from harness.core.errors import BackendError, DataError, StorageError, user_interrupt
from harness.core.interrupts import Interrupted, signal_number
from harness.core.records import Limits, RunOutcome, RunRecord, RunResult, SessionInfo
from harness.measure.provenance import collect_metadata
from harness.measure.spec import RunSpec, plan_cpu_limits
from harness.models.input_feeds import unused_dims
from harness.models.resolve import ModelInfo
from harness.run.adaptive import next_round, unmet_notes
from harness.store.results import SCHEMA_VERSION, SessionStore, load_session_info

OnRun = Callable[[RunSpec, dict[str, Any] | None], None]
SUMMARY_EVERY_S = 1.0
SUMMARY_SHARE = 0.1
"""During a session the summary is rewritten after a run at most every SUMMARY_EVERY_S, and no sooner than its last
writing took divided by SUMMARY_SHARE: it is derived from runs.jsonl (which is fsynced per run) and grows with the
session's models, and rewritten after every run a sweep of 1,900 models spent more of the host's time on it than on
the runs. The session's end, complete or interrupted, always writes it."""


@dataclass
class Plan:
    session_id: str
    seed: int
    specs: list[RunSpec]
    models: list[ModelInfo]
    cpus_values: list[float]
    notes: list[str] = field(default_factory=list)


def capped_cpus(values: Sequence[float], allowed: int, where: str = "this host's") -> tuple[list[float], list[str]]:
    """CPUS above this host's (or the board's) cores cannot be honoured: cap them, and say so."""
    capped, notes = [], []
    for value in values:
        if value > allowed:
            notes.append(f"CPUS={value:g} exceeds {where} {allowed} usable cores: measured at CPUS={allowed}")
            value = float(allowed)
        if value not in capped:
            capped.append(value)
    return capped, notes


def distinct_models(models: Sequence[ModelInfo]) -> tuple[list[ModelInfo], list[str]]:
    """A model is its name plus its content: the same file given twice is profiled once, and different files
    that share a name (a/model.onnx, b/model.onnx) get the first 8 hex digits of their sha256 appended, so
    their runs are never merged under one name."""
    unique: list[ModelInfo] = []
    notes: list[str] = []
    for model in models:
        if any(m.name == model.name and m.sha256 == model.sha256 for m in unique):
            notes.append(f"{model.path} is given more than once (same name and content): profiled once")
        else:
            unique.append(model)
    hashes: dict[str, set[str]] = {}
    for model in unique:
        hashes.setdefault(model.name, set()).add(model.sha256)
    renamed = []
    for model in unique:
        if len(hashes[model.name]) > 1:
            new_name = f"{model.name}@{model.sha256[:8]}"
            notes.append(f"{model.path} is named {new_name}: another model of this session is also "
                         f"called {model.name}")
            model = replace(model, name=new_name)
        renamed.append(model)
    return renamed, notes


def unused_dims_notes(profile: DeviceProfile, models: Sequence[ModelInfo]) -> list[str]:
    """A note naming the DIMS sizes no model of the session has (harness.models.input_feeds.unused_dims)."""
    unused = unused_dims(profile.dim_sizes, [dim_sizes(model.dims) for model in models])
    if not unused or profile.inputs:
        return []
    return [f"DIMS sets {', '.join(unused)}, which no model of this session has as a dynamic dimension (unused; "
            "check its spelling against the names of the models' input dimensions)"]


def plan_session(profile: DeviceProfile, models: list[ModelInfo], cpus_values: Sequence[float] | None,
                 script_args: Sequence[str], session_id: str, seed: int | None = None,
                 keep_samples: bool = False, cores: Sequence[int] | None = None) -> Plan:
    """Every run of the session, in shuffled rounds; `cores`: a board's cores (TARGET) instead of this host's."""
    seed = random.SystemRandom().randrange(2**31) if seed is None else seed
    allowed = sorted(cores) if cores else sorted(os.sched_getaffinity(0))
    models, model_notes = distinct_models(models)
    cpus_list, notes = capped_cpus(cpus_values or [profile.cpus], len(allowed) if cores else host_cpu_count(),
                                   "the board's" if cores else "this host's")
    notes = model_notes + notes + unused_dims_notes(profile, models)
    rng = random.Random(seed)
    combos = [(model, cpus) for model in models for cpus in cpus_list]
    specs: list[RunSpec] = []
    for round_index in range(profile.repeats):
        order = combos[:]
        rng.shuffle(order)
        for model, cpus in order:
            specs.append(RunSpec(
                run_id=f"{session_id}-r{round_index:03d}-{len(specs):04d}", session_id=session_id,
                round=round_index, repeat=round_index, model_name=model.name, model=model.run_model,
                script=str(model.script), script_args=tuple(script_args),
                cpu=plan_cpu_limits(cpus, profile.cpu_pinning, allowed), memory_bytes=profile.memory_bytes,
                swap_bytes=profile.swap_bytes, iterations=profile.iterations, warmup=profile.warmup,
                batch_size=profile.batch_size, sample_interval_ms=profile.sample_interval_ms,
                timeout_s=profile.timeout_s, image=profile.image, keep_samples=keep_samples, per_op=profile.per_op,
                external_data=model.external_data, script_env=model.script_env, inputs_file=model.inputs_file,
                latency_statistic=profile.latency_statistic,
            ))
    return Plan(session_id, seed, specs, models, cpus_list, notes)


def refused_outcome(refusal: str) -> RunOutcome:
    """The outcome of a run not run, since its model's engine refused the model (a failed conversion): an error whose
    stderr_tail is the refusal's one line, with no limit applied."""
    return RunOutcome(result=RunResult.failure("error", 0.0, refusal),
                      applied=Limits(cpus=None, cpu_mode="none", cpuset=None, cpu_quota_us=None, cpu_period_us=None,
                                     memory_bytes=None, memory_swap_bytes=None, unenforced=("not run",)))


class BaseSession(ABC):
    """What every session does with a plan, wherever its runs run: results reach disk one by one, so a crash or
    Ctrl-C loses nothing done, and the summary follows them. `backend_info` is what every run's record says of the
    backend (its describe())."""

    def __init__(self, profile: DeviceProfile, plan: Plan, backend_info: dict[str, Any], backend_reason: str,
                 metadata: dict[str, Any] | None = None) -> None:
        """`metadata`: where the runs run, when not on this host (a board's, from its agent)."""
        self.profile, self.plan, self.backend_info, self.backend_reason = profile, plan, backend_info, backend_reason
        self.store = SessionStore(Path(profile.results_dir), plan.session_id)
        self.metadata = metadata or collect_metadata()
        self.not_run: dict[str, str] = {}  # run id -> why it was not run (a cluster's run whose workers kept dying)
        self._models = {m.name: m for m in plan.models}
        # The runs on disk, read once (a resumed session has some) and then kept in step with every append,
        # so the summary after each run does not re-read a runs.jsonl that grows with the session.
        self.runs: list[RunRecord] = self.store.runs()
        # Summary entries per group; after a run only its own group is summarised again.
        self._groups: dict[tuple[Any, ...], list[RunRecord]] = {}
        for run in self.runs:
            self._groups.setdefault(group_key(run), []).append(run)
        self._entries = {key: summarize_group(members) for key, members in self._groups.items()}
        self._graph_facts: dict[str, list[dict[str, Any]] | None] = {}  # per model, for the per-op join
        self._summary_due = -math.inf  # time.monotonic() after which a run's end rewrites the summary
        self._planned = Counter((spec.model_name, spec.cpu.cpus) for spec in plan.specs)
        self._done = Counter((run["model_name"], run["cpus"]) for run in self.runs)

    @abstractmethod
    def run(self, on_start: Callable[[RunSpec], None] | None = None, on_done: OnRun | None = None) -> dict[str, Any]:
        """Run every planned run not yet kept, keep each as it ends, and return the session's summary."""

    def _session_info(self, state: str) -> dict[str, Any]:
        return {
            "session_id": self.plan.session_id, "state": state, "profile": self.profile.as_variables(),
            "profile_sources": dict(self.profile.sources), "models": [m.provenance() for m in self.plan.models],
            "cpus_values": self.plan.cpus_values, "seed": self.plan.seed, "notes": self.plan.notes,
            "backend": self.backend_info, "backend_reason": self.backend_reason, "provenance": self.metadata,
            "plan": [spec.to_dict() for spec in self.plan.specs],
        }

    def _record(self, spec: RunSpec, outcome: RunOutcome, started_at: str, concurrent_runs: int = 1,
                node: dict[str, Any] | None = None, location: dict[str, Any] | None = None) -> dict[str, Any]:
        """One runs.jsonl line. `concurrent_runs`: the most runs that were in flight on its host during it (itself
        included); `node`: where it ran, when not here ({"metadata": ..., "backend": ...} of a cluster node), and
        `location` the worker that ran it."""
        model = self._models[spec.model_name]
        info = node["backend"] if node else self.backend_info
        metadata = node["metadata"] if node else self.metadata
        return RunRecord(
            session_id=spec.session_id, run_id=spec.run_id, device_name=self.profile.device_name,
            model=model.provenance(), round=spec.round, repeat=spec.repeat, cpus=spec.cpu.cpus,
            memory_mib=spec.memory_bytes / 1024**2, swap_mib=spec.swap_bytes / 1024**2, iterations=spec.iterations,
            warmup=spec.warmup, script=spec.script, script_args=list(spec.script_args), threads=spec.threads,
            backend=info.get("backend"), isolation=info.get("isolation"), started_at=started_at,
            limits_requested=spec.limits_requested(), outcome=outcome,
            conditions=run_conditions(
                model_sha256=model.sha256, cpus=spec.cpu.cpus, cpu_mode=spec.cpu.mode,
                memory_bytes=spec.memory_bytes, swap_bytes=spec.swap_bytes, iterations=spec.iterations,
                warmup=spec.warmup, batch_size=spec.batch_size, threads=spec.threads, backend_info=info,
                host_cpu_model=metadata.get("host_cpu_model"),
                runtime=model.runtime(run_packages(metadata, info)), conversion=model.conversion,
                dims=model.dims, inputs=model.inputs_sha256, latency_statistic=spec.latency_statistic),
            provenance={**metadata, "backend": info, "seed": self.plan.seed},
            concurrent_runs=concurrent_runs, node=location,
        ).to_dict()

    def _keep_per_op(self, result: dict[str, Any]) -> None:
        """The per-op phase's raw files and table go under runs/<run_id>/; the record keeps their summary. A full disk
        removes what of them was written: the run is not kept, and its resume runs it again."""
        from harness.analysis.per_op import keep_run_profile, model_facts_for, run_dir

        name = result["model_name"]
        if name not in self._graph_facts:
            self._graph_facts[name] = model_facts_for(result["model_path"], result.get("model_dims"))
        try:
            keep_run_profile(self.store.path, result, self._graph_facts[name])
        except StorageError:
            shutil.rmtree(run_dir(self.store.path, result["run_id"]), ignore_errors=True)
            raise

    def _add(self, result: dict[str, Any]) -> None:
        run = RunRecord.from_dict({"schema_version": SCHEMA_VERSION, **result})
        self.runs.append(run)
        key = group_key(run)
        self._groups.setdefault(key, []).append(run)
        self._entries[key] = summarize_group(self._groups[key])

    def write_summary(self) -> dict[str, Any]:
        entries = ordered_entries(self._entries.values())
        summary = {
            "session_id": self.plan.session_id, "device_name": self.profile.device_name,
            "backend": self.backend_info.get("backend"), "isolation": self.backend_info.get("isolation"),
            "backend_reason": self.backend_reason, "memory_mib": self.profile.memory_mib,
            "results_dir": str(self.store.path), "models": [entry.as_dict() for entry in entries],
        }
        self.store.write_summary(summary, summary_rows(entries))
        return summary

    def _complete(self, state: str = "complete") -> dict[str, Any]:
        """Every run kept: the Chrome traces a full disk kept from being written, then the session marked `state` and
        its final summary."""
        self._write_missing_traces()
        self.store.write_session(self._session_info(state))
        return self.write_summary()

    def _write_missing_traces(self) -> None:
        """The trace of each model and CPUS value profiled per op whose runs are all kept but whose trace is not on
        disk: the session that ran its last run stopped before writing it (a full disk), and its resume runs none."""
        keys = {(spec.model_name, spec.cpu.cpus) for spec in self.plan.specs if spec.per_op}
        if not keys:
            return
        from harness.report.chrome_trace import trace_path, write_session_trace

        for model_name, cpus in sorted(keys):
            if (self._done[(model_name, cpus)] >= self._planned[(model_name, cpus)]
                    and not trace_path(self.store.path, model_name, cpus).exists()):
                write_session_trace(self.store.path, self.runs, model_name, cpus)

    def _keep(self, spec: RunSpec, record: dict[str, Any], on_done: OnRun | None) -> None:
        """A finished run reaches disk (per-op files first), then the summary, the model's Chrome trace once its last
        run is done, then the caller."""
        if record.get("per_op_files") is not None:
            self._keep_per_op(record)  # moves the files out of the record
        record.pop("per_op_files", None)
        self.store.append_run(record)
        self._add(record)
        started = time.monotonic()
        if started >= self._summary_due:
            self.write_summary()
            ended = time.monotonic()
            self._summary_due = ended + max(SUMMARY_EVERY_S, (ended - started) / SUMMARY_SHARE)
        key = (spec.model_name, spec.cpu.cpus)
        self._done[key] += 1
        if spec.per_op and self._done[key] >= self._planned[key]:  # once per model and CPUS, with all its runs
            from harness.report.chrome_trace import write_session_trace  # pandas and onnx: only with PER_OP

            write_session_trace(self.store.path, self.runs, spec.model_name, spec.cpu.cpus)
        if on_done:
            on_done(spec, record)

    def more_rounds(self) -> list[RunSpec]:
        """Once every planned run is kept: the next adaptive round (harness.run.adaptive), added to the plan and to
        session.json so a resume runs it too; empty when none is due, and then the session's notes name the models
        still short of PRECISION."""
        extra = next_round(self.profile, self.plan.specs, self.runs, self.plan.seed)
        if extra:
            self.plan.specs += extra
            self._planned.update((spec.model_name, spec.cpu.cpus) for spec in extra)
            self.store.write_session(self._session_info("running"))
        else:
            groups = list(dict.fromkeys((spec.model_name, spec.cpu.cpus) for spec in self.plan.specs))
            self.plan.notes += [note for note in unmet_notes(self.profile, self.runs, groups)
                                if note not in self.plan.notes]
        return extra

    def resume_command(self) -> str:
        """The command that runs what this session has not (its results folder as this session was given it)."""
        results_dir = shlex.quote(str(self.store.path.parent))
        return f"harness profile --resume {self.plan.session_id} --results-dir {results_dir}"

    def _interrupted(self, err: BaseException) -> None:
        """Mark the session interrupted, with the summary of every run kept; a backend fault, a full disk, Ctrl-C,
        SIGTERM or SIGHUP becomes one line saying what is kept and how to go on. Neither write may hide why the session
        stopped: on a full disk the summary may not fit (runs.jsonl holds every run it would show), and session.json
        has space held for it."""
        with contextlib.suppress(OSError, StorageError):
            self.store.write_session(self._session_info("interrupted"))
        with contextlib.suppress(OSError, StorageError):
            self.write_summary()
        kept = f"{len(self.runs)} finished run{'' if len(self.runs) == 1 else 's'} kept in {self.store.path}"
        if isinstance(err, StorageError):
            raise err.with_fix(f"{kept}; once space is freed, continue with `{self.resume_command()}`") from None
        if isinstance(err, BackendError):
            raise BackendError(f"{err} ({kept}; continue with `{self.resume_command()}`)") from None
        interrupt = user_interrupt(err)
        if interrupt is not None:
            raise Interrupted(signal_number(interrupt), f"{kept}; continue with `{self.resume_command()}`") from None


class Session(BaseSession):
    """Runs a plan on a backend of this host, one run at a time."""

    def __init__(self, profile: DeviceProfile, plan: Plan, backend: Backend, backend_reason: str) -> None:
        self.backend = backend
        elsewhere = backend.elsewhere
        super().__init__(profile, plan, backend.describe(), backend_reason,
                         elsewhere.metadata if elsewhere is not None else None)

    def outcome(self, spec: RunSpec) -> RunOutcome:
        """The run's outcome from the backend; a model its engine refused is not run (refused_outcome)."""
        refused = self._models[spec.model_name].refused
        return refused_outcome(refused) if refused else self.backend.run(spec)

    def run(self, on_start: Callable[[RunSpec], None] | None = None, on_done: OnRun | None = None) -> dict[str, Any]:
        done = {run["run_id"] for run in self.runs}
        self.backend.check(self.plan.models)  # what would fail every run fails once, before the first
        self.store.write_session(self._session_info("running"))
        todo = [spec for spec in self.plan.specs if spec.run_id not in done]
        try:
            while todo:
                for spec in todo:
                    if on_start:
                        on_start(spec)
                    started_at = time.strftime("%Y-%m-%dT%H:%M:%S%z")
                    self._keep(spec, self._record(spec, self.outcome(spec), started_at), on_done)
                todo = self.more_rounds()
        except BaseException as err:
            self._interrupted(err)
            raise
        finally:
            self.backend.close()
        return self._complete()


def load_plan(session_dir: Path) -> tuple[SessionInfo, list[RunSpec]]:
    """The stored plan of an earlier session, for --resume."""
    info = load_session_info(session_dir)
    if "plan" not in info:
        raise DataError(f"{session_dir}: session.json holds no plan; it cannot be resumed")
    return info, [RunSpec.from_dict(item) for item in info["plan"]]

