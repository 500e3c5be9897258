"""What makes two runs comparable, defined once (pyperf checks its metadata the same way).

Two runs may be pooled into one summary, ranking or calibration point only when every condition below is
equal: the device profile's limits, the workload's size, where and how it ran, and the exact model bytes.
Everything that groups runs takes its key from here; what differs is named with the variable a user sets.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
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
    "runtime": "RUNTIME (the engine that ran the model, with its version)",
    "conversion": "the model's conversion for its engine (tool and version)",
    "dims": "DIMS (the sizes of the model's dynamic dimensions)",
    "inputs": "INPUTS (the inputs file's sha256)",
    "latency_statistic": "LATENCY_STATISTIC (each run's headline latency: p05, or the median where unset)",
}
"""Condition -> how to name it to a user (the env.template variable where there is one)."""
MODEL_CONDITIONS = ("model_sha256", "dims")
"""The conditions that belong to a model, not to a session: two models of one session differ in them by nature (a
model with no dynamic dimension has no DIMS), so only one model's runs must agree on them."""


def run_conditions(*, model_sha256: str, cpus: float, cpu_mode: str, memory_bytes: int, swap_bytes: int,
                   iterations: int | None, warmup: int | None, batch_size: int | None, threads: int | None,
                   backend_info: dict[str, Any], host_cpu_model: str | None, runtime: str | None,
                   conversion: str | None, dims: str | None = None, inputs: str | None = None,
                   latency_statistic: str = "p50") -> dict[str, Any]:
    """The conditions of one run, in CONDITIONS order (None for a size a run stored before it was recorded lacks).
    `dims` and `inputs` are None for a model with no dynamic dimension after the batch and fed random inputs, and
    `latency_statistic` None for the median, as every run stored before they were recorded reads, so those runs pool
    with today's."""
    return {
        "model_sha256": model_sha256, "cpus": float(cpus), "cpu_mode": cpu_mode, "memory_bytes": int(memory_bytes),
        "swap_bytes": int(swap_bytes), "iterations": iterations, "warmup": warmup, "batch_size": batch_size,
        "threads": threads, "backend": backend_info.get("backend"), "isolation": backend_info.get("isolation"),
        "image_id": backend_info.get("image_id"), "host_cpu_model": host_cpu_model, "runtime": runtime,
        "conversion": conversion, "dims": dims or None, "inputs": inputs,
        "latency_statistic": None if latency_statistic == "p50" else latency_statistic,
    }


KIND_ENGINES = {"onnx": "onnxruntime", "ncnn": "ncnn", "tflite": "ai-edge-litert", "torch": "torch"}
"""A model kind -> the package of the engine its default bench script runs it with (a user's script: none known)."""


RUNTIME_ENGINES = {"onnxruntime": "onnxruntime", "ncnn": "ncnn", "litert": "ai-edge-litert"}
"""RUNTIME's values -> the package of the engine each names, as a run's `runtime` condition starts."""


def runtime_name(run: Mapping[str, Any]) -> str | None:
    """The RUNTIME value a run ran on (onnxruntime, ncnn or litert), from its `runtime` condition; None for a run
    whose engine is the user's own script."""
    engine = str((run.get("conditions") or {}).get("runtime") or "").split(" ")[0]
    return next((name for name, package in RUNTIME_ENGINES.items() if package == engine), None)


def runtime_of(kind: str, packages: dict[str, str]) -> str | None:
    """`ncnn 1.0.20261020`: the engine of a model kind with its version among `packages` (where the runs ran: the
    host's, or the Docker image's); None for a kind whose engine is the user's script."""
    engine = KIND_ENGINES.get(kind)
    if engine is None:
        return None
    version = packages.get(engine)
    return f"{engine} {version}" if version else engine


def run_packages(provenance: dict[str, Any], backend_info: dict[str, Any]) -> dict[str, str]:
    """The package versions where a run ran: the Docker image's when it ran in one, else its host's."""
    if "image_packages" in backend_info:
        return backend_info.get("image_packages") or {}
    return provenance.get("packages") or {}


def conditions_of_v1_run(run: dict[str, Any]) -> dict[str, Any]:
    """The conditions of a run stored before they were recorded, from the fields it has."""
    provenance = run.get("provenance") or {}
    limits = run.get("limits_requested") or {}
    return run_conditions(
        model_sha256=run.get("model_sha256", ""), cpus=run["cpus"], cpu_mode=limits.get("cpu_mode", ""),
        memory_bytes=round(run.get("memory_mib", 0) * MIB), swap_bytes=round(run.get("swap_mib", 0) * MIB),
        iterations=run.get("iterations"), warmup=run.get("warmup"), batch_size=run.get("batch_size"),
        threads=run.get("threads"), backend_info=provenance.get("backend") or run,
        host_cpu_model=provenance.get("host_cpu_model"), runtime=None, conversion=None)


def with_runtime(run: dict[str, Any]) -> dict[str, Any]:
    """A run stored before its engine was a condition gets it from its model kind and recorded packages (ONNX files
    ran on onnxruntime then) and no conversion: it pools with today's runs of the same engine and version."""
    provenance = run.get("provenance") or {}
    packages = run_packages(provenance, provenance.get("backend") or {})
    conditions = {**(run.get("conditions") or {}), "runtime": runtime_of(run.get("model_kind", ""), packages),
                  "conversion": None}
    return {**run, "conditions": conditions}


def key(run: dict[str, Any]) -> tuple[Any, ...]:
    """Hashable: runs with equal keys (and equal model names) may be pooled."""
    conditions = run.get("conditions") or {}
    return tuple(conditions.get(name) for name in CONDITIONS)


def differing_keys(items: Iterable[dict[str, Any]]) -> list[str]:
    """The conditions on which runs (or summary entries) disagree, in CONDITIONS order."""
    seen: dict[str, set[Any]] = {name: set() for name in CONDITIONS}
    for item in items:
        conditions = item.get("conditions") or {}
        for name in CONDITIONS:
            seen[name].add(conditions.get(name))
    return [name for name, values in seen.items() if len(values) > 1]


def describe(conditions: dict[str, Any], names: Iterable[str]) -> str:
    """`MEMORY 512 MiB, SWAP 0 MiB`: the values of `names`, for a label beside a model's name."""
    return ", ".join(f"{CONDITIONS[name].split(' (')[0]} {_shown(name, conditions.get(name))}" for name in names)


def _shown(name: str, value: Any) -> str:
    return f"{value / MIB:g} MiB" if name in ("memory_bytes", "swap_bytes") and isinstance(value, int) else str(value)


def pooling_conflict(runs: Iterable[dict[str, Any]]) -> str | None:
    """Why `runs` may not be pooled into one ranking or calibration, in one line; None when they may.

    Runs at one CPUS value must agree on every condition but the model's own (MODEL_CONDITIONS), and the runs of one
    model name must agree on those too (a model is its name plus its content, at its sizes)."""
    first: dict[tuple[Any, ...], dict[str, Any]] = {}
    for run in runs:
        conditions = run.get("conditions") or {}
        for name in CONDITIONS:
            per_model = name in MODEL_CONDITIONS
            scope = (run.get("model_name"),) if per_model else (conditions.get("cpus"),)
            seen = first.setdefault((name, *scope), run)
            theirs = (seen.get("conditions") or {}).get(name)
            if theirs != conditions.get(name):
                where = f"model {run.get('model_name')}" if per_model else f"cpus={conditions.get('cpus')}"
                return (f"runs at {where} differ in {CONDITIONS[name]}: {_shown(name, theirs)} in session "
                        f"{seen.get('session_id')}, {_shown(name, conditions.get(name))} in session "
                        f"{run.get('session_id')}")
    return None
