"""RunSpec: what one run is, frozen and complete before the first run starts (pyperf/torch TaskSpec habit)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from harness.core.external_data import ExternalData, confine, data_files
from harness.core.records import Limits, RunnerInput

CPU_PERIOD_US = 100_000


@dataclass(frozen=True)
class CpuLimits:
    """How CPUS is enforced: dedicated cores (cpuset) for whole CPUS when allowed, the CFS quota otherwise."""

    cpus: float
    cpuset: str | None  # e.g. "1" or "0-1"; None = every allowed core
    quota_us: int | None  # None = no quota (pinned)
    period_us: int = CPU_PERIOD_US

    @property
    def mode(self) -> str:
        return "pinned" if self.cpuset and self.quota_us is None else "quota"


def plan_cpu_limits(cpus: float, pinning: str, allowed_cores: list[int]) -> CpuLimits:
    """Pin whole CPUS to the highest-numbered allowed cores (core 0 takes most interrupts).

    `pinning`: auto pins whole CPUS when enough cores are allowed; on also pins fractional CPUS to
    ceil(CPUS) cores, adding the quota; off always uses the quota alone.
    """
    whole = float(cpus).is_integer()
    needed = math.ceil(cpus)
    can_pin = needed <= len(allowed_cores)
    pin = can_pin and (pinning == "on" or (pinning == "auto" and whole))
    cpuset = cpu_list(sorted(allowed_cores)[-needed:]) if pin else None
    quota = None if pin and whole else int(round(cpus * CPU_PERIOD_US))
    return CpuLimits(cpus=cpus, cpuset=cpuset, quota_us=quota)


def cpu_list(cores: list[int]) -> str:
    """[0, 1, 3] -> '0-1,3' (the kernel's and Docker's cpuset syntax)."""
    ranges: list[str] = []
    start = prev = cores[0]
    for core in [*cores[1:], None]:
        if core is not None and core == prev + 1:
            prev = core
            continue
        ranges.append(f"{start}-{prev}" if prev > start else str(start))
        if core is not None:
            start = prev = core
    return ",".join(ranges)


def parse_cpu_list(cpuset: str) -> tuple[int, ...]:
    """'0-1,3' -> (0, 1, 3): the inverse of the cpuset syntax above."""
    cores: list[int] = []
    for part in cpuset.split(","):
        lo, _, hi = part.partition("-")
        cores.extend(range(int(lo), int(hi or lo) + 1))
    return tuple(cores)


@dataclass(frozen=True)
class RunSpec:
    """One run: one fresh process of one script on one model under one set of limits."""

    run_id: str
    session_id: str
    round: int
    repeat: int
    model_name: str
    model: str  # absolute path on the host
    script: str  # absolute path on the host
    script_args: tuple[str, ...]
    cpu: CpuLimits
    memory_bytes: int
    swap_bytes: int
    iterations: int
    warmup: int
    batch_size: int
    sample_interval_ms: float
    timeout_s: float
    image: str = ""
    keep_samples: bool = False  # store the raw memory time series in the result (for fidelity benchmarks)
    per_op: bool = False  # PER_OP: a per-op profiling phase after the timed one (harness.analysis.per_op)
    external_data: ExternalData = ()  # (tensor, location) per file beside the model holding its tensors' data
    script_env: tuple[tuple[str, str], ...] = ()  # variables the bench script builds its inputs from (input_feeds)
    inputs_file: str = ""  # INPUTS: the .npz fed to the model instead of random inputs (absolute path on the host)
    latency_statistic: str = "p50"  # LATENCY_STATISTIC: each run's headline latency where no CFS quota applies

    @property
    def model_files(self) -> list[str]:
        """The files a run reads as its model: the model, then its external-data files, each checked to be a file in
        the model's folder (ModelError otherwise); none for a script profiled as a whole."""
        return [self.model, *data_files(self.model, confine(self.model, self.external_data))] if self.model else []

    @property
    def threads(self) -> int:
        return max(1, math.ceil(self.cpu.cpus))

    def runner_input(self, model: str | None = None, script: str | None = None, inputs_file: str | None = None,
                     **fallback: Any) -> RunnerInput:
        """What the runner reads; backends pass the paths as the runner will see them, and what only they
        decide (the rlimit fallback's `rlimit_as_bytes` and `affinity`, the runner's own cores)."""
        return RunnerInput(
            model=model or self.model, script=script or self.script, script_args=self.script_args,
            threads=self.threads, cpus=self.cpu.cpus, cpu_mode=self.cpu.mode, cpu_period_us=self.cpu.period_us,
            iterations=self.iterations, warmup=self.warmup, batch_size=self.batch_size,
            sample_interval_ms=self.sample_interval_ms, timeout_s=self.timeout_s, keep_samples=self.keep_samples,
            per_op=self.per_op, external_data=self.external_data, script_env=self.script_env,
            inputs_file=self.inputs_file if inputs_file is None else inputs_file,
            latency_statistic=self.latency_statistic, **fallback,
        )

    def limits_requested(self) -> Limits:
        """The limits the plan asks for; a backend reports what it applied beside them."""
        return Limits(cpus=self.cpu.cpus, cpu_mode=self.cpu.mode, cpuset=self.cpu.cpuset,
                      cpu_quota_us=self.cpu.quota_us, cpu_period_us=self.cpu.period_us,
                      memory_bytes=self.memory_bytes, memory_swap_bytes=self.memory_bytes + self.swap_bytes)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunSpec:
        values = dict(data)
        values["cpu"] = CpuLimits(**values["cpu"])
        values["script_args"] = tuple(values["script_args"])
        values["external_data"] = tuple(map(tuple, values.get("external_data", ())))
        values["script_env"] = tuple(map(tuple, values.get("script_env", ())))
        return cls(**values)
