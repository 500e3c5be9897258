"""The typed records a run passes through, stdlib only.

    RunnerInput  what crosses into the limited environment (the runner's spec.json)
    RunResult    what the runner measured; a run whose runner never reported gets the same fields
    Limits       limits as requested by the plan, or as a backend actually applied them
    RunOutcome   what a backend returns: the result, the applied limits, and what only the outside sees
    RunRecord    one line of runs.jsonl: the spec's facts, both sets of limits, the outcome, provenance
    SessionInfo  session.json: the plan, the profile, the state, the host's provenance

On disk a record is one flat JSON object, so `jq` and pandas read it directly; field names carry units. The runner
reads RunnerInput's JSON and writes RunResult's without importing this module (dataclasses would slow every run's
start); RunResult.from_dict then refuses a key this version does not know. RunRecord.from_dict and
SessionInfo.from_dict read a stored object that the store has brought to today's schema (harness.store.migrations):
older lines lack fields added since, which they read as neutral values, and keep keys no field holds in `extra`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any

from harness.core import STDERR_TAIL_CHARS


def refuse_unknown_keys(cls: type, data: dict[str, Any], message: str) -> None:
    """A record read from the other side of the limit must be of this version: an unknown key is an error, never
    silently dropped."""
    unknown = sorted(set(data) - {f.name for f in dataclasses.fields(cls)})
    if unknown:
        raise ValueError(f"{message}: {unknown}")


@dataclass(frozen=True)
class RunnerInput:
    """Everything the runner needs; paths are as the runner sees them (inside a container, say)."""

    model: str
    script: str
    script_args: tuple[str, ...]
    threads: int
    cpus: float
    iterations: int
    warmup: int
    batch_size: int
    sample_interval_ms: float
    timeout_s: float
    cpu_mode: str = ""  # pinned | quota, as planned
    cpu_period_us: int | None = None
    keep_samples: bool = False
    per_op: bool = False  # run the per-operator profiling phase after the timed one
    isolation: str | None = None  # rlimit: no cgroup of the run's own, so memory is the process tree's
    rlimit_as_bytes: int | None = None  # rlimit fallback only: RLIMIT_AS of the script
    affinity: tuple[int, ...] | None = None  # rlimit fallback only: cores the script may run on
    runner_affinity: tuple[int, ...] | None = None  # cores for the runner, off a pinned workload's
    workload_cgroup_procs: tuple[str, ...] = ()  # cgroups only the script joins (v1 cpu and cpuset)
    external_data: tuple[tuple[str, str], ...] = ()  # (tensor, location) of the model's external-data files
    script_env: tuple[tuple[str, str], ...] = ()  # variables the script builds its inputs from (DIMS, token ids)
    inputs_file: str = ""  # INPUTS: the .npz the script feeds, as the runner sees it
    latency_statistic: str = "p50"  # LATENCY_STATISTIC: the headline where no CFS quota applies (p50 or p05)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunnerInput:
        """Refuses unknown or missing keys: the two sides of the limit must be the same version."""
        refuse_unknown_keys(cls, data, "runner input has keys this runner does not know")
        values = dict(data)
        for name in ("script_args", "workload_cgroup_procs"):
            values[name] = tuple(values.get(name, ()))
        for name in ("external_data", "script_env"):
            values[name] = tuple(map(tuple, values.get(name, ())))
        for name in ("affinity", "runner_affinity"):
            if values.get(name) is not None:
                values[name] = tuple(values[name])
        return cls(**values)


@dataclass
class RunResult:
    """The runner's measurements, units in every name. Defaults are the values of a run that never reported."""

    status: str  # ok | oom | timeout | error
    runtime_s: float | None = None  # spawn to exit of the bench script, monotonic clock
    exit_code: int | None = None
    """the script's exit code"""
    signal: int | None = None
    """the signal that ended the script"""
    stderr_tail: str = ""
    """the end of the script's stderr"""
    load_s: float | None = None
    """model load and session creation, as the script reported it"""
    energy: dict[str, Any] | None = None
    """the timed phase's RAPL package energy (energy_mj per inference, avg_power_w, energy_j, seconds, domains,
    whose, read_s), or `absent`: why the host gave none (harness.measure.rapl); None in runs that never reported"""
    latency_stats_ms: dict[str, float] | None = None  # p50, p90, p99, mean, std, min, max, n, headline of one run
    latency_headline: str | None = None  # which statistic `headline` is: p50, or mean under a CFS quota
    shorter_than_quota_window: bool = False  # inferences shorter than the quota's run window (see notes)
    latencies_ms: list[float] = field(default_factory=list)
    """per-inference latencies (at most 100,000, a uniform sample beyond)"""
    batch_size: int | None = None
    """inputs per inference"""
    throughput_ips: float | None = None
    """inferences per second: batch / mean latency"""
    peak_memory_mib: float | None = None
    """the run's cgroup high-water mark (memory.peak, v1 max_usage_in_bytes)"""
    peak_source: str | None = None  # kernel | sampled
    peak_rss_mib: float | None = None
    """the script's largest resident set (wait4's ru_maxrss)"""
    avg_memory_mib: float | None = None
    """time-weighted mean of the sampled working set"""
    avg_memory_mib_by_phase: dict[str, float] = field(default_factory=dict)
    """the same, per phase the script marked"""
    sampled_peak_mib: float | None = None
    """the largest sampled working set"""
    cpu_s: float | None = None
    """CPU time of the script (user + system)"""
    cpu_nr_periods: int = 0
    """CFS periods elapsed (cpu.stat)"""
    cpu_nr_throttled: int = 0
    """periods throttled"""
    cpu_throttled_s: float = 0.0
    """time throttled"""
    samples: int = 0
    """memory samples taken"""
    sample_rate_hz: float = 0.0
    """samples per second achieved"""
    runner_cpu_s: float | None = None
    """CPU time of the runner"""
    runner_cores: list[int] = field(default_factory=list)  # where the runner itself ran
    host_load: dict[str, Any] | None = None
    """what else the machine did during the run: other_cores (CPU time of everything but the run, in cores), steal
    (the hypervisor's share), mhz (the run's cores' clock at start and end), noisy (the reasons it counts as noisy,
    empty if none) (harness.measure.host_load)"""
    oom_kills: int = 0
    """OOM kills in the run's cgroup"""
    cgroup_version: int | None = None
    """1 or 2"""
    notes: list[str] = field(default_factory=list)  # what the reader of this run's numbers should know
    memory_samples: dict[str, list[float]] | None = None
    """the samples themselves, with KEEP_SAMPLES"""
    metrics: dict[str, Any] = field(default_factory=dict)  # the script's own reported values
    per_op_files: dict[str, str] | None = None  # PER_OP: the profiling phase's files, gzip + base64
    phases_s: list[list[Any]] | None = None  # PER_OP: (phase, seconds since spawn) marks
    clock_s: dict[str, float] = field(default_factory=dict)
    """When the runner started, spawned the script, saw it exit and had its result ready: seconds on the host's
    monotonic clock (a container shares it), so only differences mean anything; the backend adds its own steps."""

    @classmethod
    def failure(cls, status: str, runtime_s: float, detail: str, exit_code: int | None = None,
                signal: int | None = None) -> RunResult:
        """A run whose runner died or never reported (killed at the memory limit, engine gone, timeout)."""
        return cls(status=status, runtime_s=runtime_s, exit_code=exit_code, signal=signal,
                   stderr_tail=detail[-STDERR_TAIL_CHARS:])

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunResult:
        """The runner's JSON; a key this version does not know is an error, not silently dropped."""
        refuse_unknown_keys(cls, data, "run result has keys this harness does not know")
        return cls(**data)


@dataclass(frozen=True)
class Limits:
    """CPU and memory limits of one run, as requested or as applied. None means "not limited".

    `cpu_mode`: pinned (cpuset only), quota (CFS quota, maybe on a cpuset too), affinity (sched_setaffinity
    without a quota) or none. `unenforced` says, one line each, which requested limit could not be applied.
    """

    cpus: float | None
    """cores"""
    cpu_mode: str
    """pinned, quota, affinity or none"""
    cpuset: str | None
    """the cores it was pinned to"""
    cpu_quota_us: int | None
    """CFS quota per period"""
    cpu_period_us: int | None
    """CFS period"""
    memory_bytes: int | None
    """memory limit"""
    memory_swap_bytes: int | None
    """memory + swap limit"""
    address_space_bytes: int | None = None  # RLIMIT_AS: reserved address space, not resident memory
    unenforced: tuple[str, ...] = ()
    """one line for each requested limit that could not be applied"""

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["unenforced"] = list(self.unenforced)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Limits:
        """Stored limits; a key an older version did not record reads as None (not limited, or not known)."""
        values: dict[str, Any] = {f.name: data.get(f.name) for f in dataclasses.fields(cls)}
        return cls(**{**values, "cpu_mode": values["cpu_mode"] or "", "unenforced": tuple(values["unenforced"] or ())})


@dataclass
class RunOutcome:
    """What a backend returns for one run: the result and what only the outside sees."""

    result: RunResult
    applied: Limits | None  # None only in runs stored before schema version 2, which did not record them
    overhead_s: float = 0.0  # wall time of the run outside the script: environment set-up and tear-down
    container: dict[str, Any] | None = None  # Docker only: name, id, the engine's OOM flag and exit code
    clock_s: dict[str, float] = field(default_factory=dict)  # the backend's steps, on the clock of RunResult.clock_s
    board: dict[str, Any] | None = None  # TARGET only: the board that ran it, its temperatures and clocks around it


class StoredFields(Mapping[str, Any]):
    """Reads of a stored object's fields by their names on disk (`record["cpus"]`, as jq names them), for code that
    goes by names: the metric registry's paths, the conditions' keys, a test's look at a line. Typed code reads the
    attributes. A Mapping, so that code walking a line by names (`isinstance(value, Mapping)`) walks a record the
    same, instead of taking it for a missing value."""

    @cached_property
    def line(self) -> dict[str, Any]:
        """The object as stored: kept as read when it was read from disk, else as it will be written."""
        return self.to_dict()

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def __getitem__(self, name: str) -> Any:
        return self.line[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.line)

    def __len__(self) -> int:
        return len(self.line)


_RECORD_PARTS = ("model", "limits_requested", "outcome", "conditions", "provenance", "node", "extra")
"""RunRecord's fields that are not written under their own name (flattened, split in two, or merged)."""
_OUTCOME_KEYS = ("limits_applied", "overhead_s", "clock_s", "container", "board")
MODEL_PREFIX = "model_"  # the model's fields on a line: model_name, model_path, model_sha256, ...


@dataclass
class RunRecord(StoredFields):
    """One run as stored: the planned facts, the requested and applied limits, the outcome, and provenance."""

    session_id: str
    """the session the run belongs to (its folder's name)"""
    run_id: str
    """the run's id, unique across sessions"""
    device_name: str
    """DEVICE_NAME of the profile"""
    model: dict[str, Any]  # model_name, model_path, model_kind, model_sha256, model_size_mib, model_facts
    round: int
    """the round it ran in: every model runs once per round, in a shuffled order"""
    repeat: int
    """its model's repeat number at its CPU count"""
    cpus: float
    """CPUS: the CPU limit in cores (fractional: a CFS quota)"""
    memory_mib: float
    """MEMORY"""
    swap_mib: float
    """SWAP, on top of MEMORY"""
    iterations: int
    """ITERATIONS: timed inferences"""
    warmup: int
    """WARMUP: untimed inferences first"""
    script: str
    """the bench script that ran"""
    script_args: list[str]
    """its arguments after the model"""
    threads: int
    """intra-op threads the script was given: ceil(CPUS)"""
    backend: str | None
    """BACKEND: local or docker"""
    isolation: str | None
    """cgroup-v1, cgroup-v2, container or rlimit"""
    started_at: str
    """when the run started, ISO 8601 with the host's offset"""
    limits_requested: Limits
    outcome: RunOutcome
    conditions: dict[str, Any]
    """what the run may be pooled on (below)"""
    provenance: dict[str, Any]
    """where and with what it ran (below)"""
    concurrent_runs: int = 1  # the most runs in flight on its host during it, itself included
    node: dict[str, Any] | None = None  # the cluster worker that ran it (hostname, worker, worker_name)
    extra: dict[str, Any] = field(default_factory=dict)  # keys of a stored line that no field holds

    @property
    def model_name(self) -> str:
        return str(self.model.get("model_name", ""))

    @property
    def result(self) -> RunResult:
        return self.outcome.result

    @property
    def ok(self) -> bool:
        return self.outcome.result.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        """The flat runs.jsonl line (without schema_version, which the store adds)."""
        head = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in _RECORD_PARTS}
        outcome = self.outcome
        return {
            **{k: head[k] for k in ("session_id", "run_id", "device_name")}, **self.model,
            **{k: v for k, v in head.items() if k not in ("session_id", "run_id", "device_name")},
            "limits_requested": self.limits_requested.to_dict(),
            "limits_applied": outcome.applied.to_dict() if outcome.applied is not None else None,
            **outcome.result.to_dict(), "overhead_s": outcome.overhead_s,
            "clock_s": {**outcome.result.clock_s, **outcome.clock_s},
            **({"container": outcome.container} if outcome.container is not None else {}),
            **({"board": outcome.board} if outcome.board is not None else {}),
            **({"node": self.node} if self.node is not None else {}),
            "conditions": self.conditions, "provenance": self.provenance, **self.extra,
        }

    @classmethod
    def from_dict(cls, line: dict[str, Any]) -> RunRecord:
        """A stored line, of today's schema (the store migrates older ones first); `line` stays its stored view."""
        result_keys = {f.name for f in dataclasses.fields(RunResult)}
        own = {f.name for f in dataclasses.fields(cls)} - set(_RECORD_PARTS)
        known = result_keys | own | {*_OUTCOME_KEYS, *_RECORD_PARTS, "schema_version"}
        applied = line.get("limits_applied")
        record = cls(
            **{name: line.get(name, default) for name, default in _NEUTRAL.items()},
            model={k: v for k, v in line.items() if k.startswith(MODEL_PREFIX)},
            limits_requested=Limits.from_dict(line.get("limits_requested") or {}),
            outcome=RunOutcome(
                result=RunResult(**{"status": "error", **{k: v for k, v in line.items() if k in result_keys}}),
                applied=Limits.from_dict(applied) if applied is not None else None,
                overhead_s=line.get("overhead_s") or 0.0, container=line.get("container"),
                board=line.get("board")),
            conditions=line.get("conditions") or {}, provenance=line.get("provenance") or {}, node=line.get("node"),
            extra={k: v for k, v in line.items() if k not in known and not k.startswith(MODEL_PREFIX)},
        )
        record.__dict__["line"] = line  # seeds the cached `line`: the stored object, not a rebuilt copy
        return record


_NEUTRAL: dict[str, Any] = {
    "session_id": "", "run_id": "", "device_name": "", "round": 0, "repeat": 0, "cpus": 0.0, "memory_mib": 0.0,
    "swap_mib": 0.0, "iterations": 0, "warmup": 0, "script": "", "script_args": [], "threads": 0, "backend": None,
    "isolation": None, "started_at": "", "concurrent_runs": 1,
}
"""What a field reads as in a line stored before it was recorded (or written by a test with only what it needs)."""


@dataclass
class SessionInfo(StoredFields):
    """session.json: what a session planned and where it stands (`state`: running, complete or interrupted)."""

    session_id: str
    state: str = ""
    profile: dict[str, Any] = field(default_factory=dict)  # the profile's variables, typed (MEMORY in bytes)
    profile_sources: dict[str, str] = field(default_factory=dict)  # where each variable's value came from
    models: list[dict[str, Any]] = field(default_factory=list)  # each model's provenance (RunRecord.model)
    cpus_values: list[float] = field(default_factory=list)
    seed: int | None = None
    notes: list[str] = field(default_factory=list)
    backend: dict[str, Any] = field(default_factory=dict)
    backend_reason: str = ""
    provenance: dict[str, Any] = field(default_factory=dict)  # the host's, at the session's start
    plan: list[dict[str, Any]] | None = None  # every RunSpec, for --resume; absent in sessions that predate it
    extra: dict[str, Any] = field(default_factory=dict)  # keys no field holds (a cluster session's own)

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        return {**data, **self.extra}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SessionInfo:
        names = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        info = cls(**{k: v for k, v in data.items() if k in names and v is not None},
                   extra={k: v for k, v in data.items() if k not in names and k != "schema_version"})
        info.__dict__["line"] = data
        return info
