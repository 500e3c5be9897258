"""What makes two runs comparable, defined once (pyperf checks its metadata the same way).

Two runs may be pooled into one summary, ranking or calibration point only when every condition below is
equal: the device profile's limits, the workload's size, where and how it ran, and the exact model bytes.
Everything that groups runs takes its key from here; what differs is named with the variable a user sets.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

MIB = 1024**2

CONDITIONS: dict[str, str] = {
    "model_sha256": "the model file's content (sha256)",
    "cpus": "CPUS",
    "cpu_mode": "CPU_PINNING (pinned cores or CFS quota)",
    "memory_bytes": "MEMORY",
    "swap_bytes": "SWAP",
    "iterations": "ITERATIONS",
    "warmup": "WARMUP",
    "batch_size": "BATCH_SIZE",
    "threads": "threads",
    "backend": "BACKEND",
    "isolation": "isolation (cgroup, container or rlimit)",
    "image_id": "IMAGE (the Docker image id)",
    "host_cpu_model": "host CPU model",
}
"""Condition -> how to name it to a user (the env.template variable where there is one)."""


def run_conditions(*, model_sha256: str, cpus: float, cpu_mode: str, memory_bytes: int, swap_bytes: int,
                   iterations: int, warmup: int, batch_size: int, threads: int, backend_info: dict[str, Any],
                   host_cpu_model: str | None) -> dict[str, Any]:
    """The conditions of one run, in CONDITIONS order."""
    return {
        "model_sha256": model_sha256, "cpus": float(cpus), "cpu_mode": cpu_mode, "memory_bytes": int(memory_bytes),
        "swap_bytes": int(swap_bytes), "iterations": iterations, "warmup": warmup, "batch_size": batch_size,
        "threads": threads, "backend": backend_info.get("backend"), "isolation": backend_info.get("isolation"),
        "image_id": backend_info.get("image_id"), "host_cpu_model": host_cpu_model,
    }


def conditions_of_v1_run(run: dict[str, Any]) -> dict[str, Any]:
    """The conditions of a run stored before they were recorded, from the fields it has."""
    provenance = run.get("provenance") or {}
    limits = run.get("limits_requested") or {}
    return run_conditions(
        model_sha256=run.get("model_sha256", ""), cpus=run["cpus"], cpu_mode=limits.get("cpu_mode", ""),
        memory_bytes=round(run.get("memory_mib", 0) * MIB), swap_bytes=round(run.get("swap_mib", 0) * MIB),
        iterations=run.get("iterations"), warmup=run.get("warmup"), batch_size=run.get("batch_size"),
        threads=run.get("threads"), backend_info=provenance.get("backend") or run,
        host_cpu_model=provenance.get("host_cpu_model"))


def key(run: dict[str, Any]) -> tuple[Any, ...]:
    """Hashable: runs with equal keys (and equal model names) may be pooled."""
    conditions = run.get("conditions") or {}
    return tuple(conditions.get(name) for name in CONDITIONS)


def differing(runs: Iterable[dict[str, Any]]) -> list[str]:
    """The conditions on which `runs` disagree, named for a user, in CONDITIONS order."""
    seen: dict[str, set[Any]] = {name: set() for name in CONDITIONS}
    for run in runs:
        conditions = run.get("conditions") or {}
        for name in CONDITIONS:
            seen[name].add(conditions.get(name))
    return [CONDITIONS[name] for name, values in seen.items() if len(values) > 1]
