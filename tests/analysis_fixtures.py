"""Sessions written through the real store, with numbers the tests choose and check against."""

from __future__ import annotations

from pathlib import Path

from harness.store.results import SessionStore


def write_session(
    results_dir: Path, latencies: dict[str, list[float]], cpus: float = 2.0, session_id: str | None = None,
    runtime_s: dict[str, list[float]] | None = None, facts: dict[str, dict[str, float]] | None = None,
    depthwise_share: dict[str, float] | None = None, fastest: dict[str, list[float]] | None = None,
    peak_memory: dict[str, list[float]] | None = None, files: dict[str, Path] | None = None,
) -> Path:
    """One ok run per value: the run's headline latency `latency_ms` (and its p50) = value (and `runtime_s` from the
    second map, if given; the model's static facts, such as macs and params, from `facts`; its per-op profile's
    depthwise share from `depthwise_share`). Each run's 10 inferences all take `value`, except the first, which
    takes the run's value in `fastest` when given. A run's peak memory is 100 + value, or its value in `peak_memory`.
    A model in `files` was run from that ONNX file."""
    store = SessionStore(results_dir, session_id)
    store.write_session({"session_id": store.session_id, "profile": {"DEVICE_NAME": "test", "CPUS": str(cpus)},
                         "models": sorted(latencies), "cpus_values": [cpus], "seed": 0, "provenance": {}})
    for model, values in latencies.items():
        for repeat, value in enumerate(values):
            runtime = (runtime_s or {}).get(model, [None] * len(values))[repeat]
            inferences = [(fastest or {}).get(model, values)[repeat]] + [value] * 9
            store.append_run({
                "session_id": store.session_id, "run_id": f"{model}-{cpus:g}-{repeat}", "model_name": model,
                "round": repeat, "repeat": repeat, "cpus": cpus, "memory_mib": 2048.0, "backend": "local",
                "status": "ok", "runtime_s": runtime,
                "peak_memory_mib": (peak_memory or {}).get(model, [100.0 + v for v in values])[repeat],
                "latency_stats_ms": {"p50": value, "mean": sum(inferences) / 10, "headline": value,
                                     "min": min(inferences), "max": max(inferences), "n": 10},
                "latency_headline": "p50", "latencies_ms": inferences,
                **({"model_facts": facts[model]} if facts and model in facts else {}),
                **({"model_path": str(files[model]), "model_kind": "onnx"} if files and model in files else {}),
                **({"per_op": {"depthwise_share": depthwise_share[model]}}
                   if depthwise_share and model in depthwise_share else {}),
            })
    return store.path
