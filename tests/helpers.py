"""Helpers for driving the real CLI in-process and reading what it stored."""

from __future__ import annotations

import json
import os
import signal
import uuid
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main
from harness.measure.spec import RunSpec, plan_cpu_limits
from harness.store.results import list_sessions, load_runs


def ctrl_c_handled() -> None:
    """Popen's preexec_fn for a harness a test interrupts: Python turns SIGINT into KeyboardInterrupt only if it
    was not ignored at start-up, and a suite started as a background job hands its children SIGINT ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


INTERRUPTED_EXITS = (130, -signal.SIGINT)
"""How an interrupted harness ends: 130 from the CLI, or now and then by the signal itself after the CLI has
handled it (serial, parallel and cluster sessions alike; the cause is not found). A shell shows 130 for both;
the tests check that the session was kept and stopped either way."""


def profile_json(capsys: pytest.CaptureFixture[str], results: Path, *args: str) -> dict[str, Any]:
    """Run `harness profile ... --json` and return the parsed stdout (which must be JSON and nothing else)."""
    capsys.readouterr()
    code = main(["profile", "--json", "--results-dir", str(results), *args])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


def run_fields(backend: Any, spec: Any) -> dict[str, Any]:
    """One backend run as its stored fields: the RunResult, the container (Docker), the limits applied."""
    outcome = backend.run(spec)
    return {**outcome.result.to_dict(), "container": outcome.container, "limits_applied": outcome.applied.to_dict()}


def session_runs(results: Path) -> list[dict[str, Any]]:
    sessions = list_sessions(results)
    assert sessions, f"no session written under {results}"
    return load_runs(sessions[-1])


def entry(summary: dict[str, Any], model: str, cpus: float | None = None) -> dict[str, Any]:
    matches = [e for e in summary["models"] if e["model_name"] == model and (cpus is None or e["cpus"] == cpus)]
    assert len(matches) == 1, summary["models"]
    return matches[0]


def run_spec(script: Path, *args: str, model: Path, cpus: float = 1.0, memory_mib: int = 256, timeout_s: float = 60.0,
             session_id: str | None = None, image: str = "", iterations: int = 10) -> RunSpec:
    """One RunSpec for driving a backend directly, with the CPU plan the CLI would make."""
    session_id = session_id or f"test-{uuid.uuid4().hex[:8]}"
    return RunSpec(run_id=f"{session_id}-r000-0000", session_id=session_id, round=0, repeat=0, model_name="m",
                   model=str(model), script=str(script), script_args=args,
                   cpu=plan_cpu_limits(cpus, "auto", sorted(os.sched_getaffinity(0))),
                   memory_bytes=memory_mib * 1024**2, swap_bytes=0, iterations=iterations, warmup=1, batch_size=1,
                   sample_interval_ms=10, timeout_s=timeout_s, image=image)


def disguised_copy(source: Path, target: Path) -> Path:
    """`source`'s network as a user might export it: every tensor and node renamed, every weight scaled by 1.01."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(source))
    names: dict[str, str] = {}

    def rename(name: str) -> str:
        return names.setdefault(name, f"t{len(names)}") if name else name

    for tensor in model.graph.initializer:
        values = numpy_helper.to_array(tensor)
        tensor.CopyFrom(numpy_helper.from_array(values * 1.01 if values.dtype.kind == "f" else values,
                                                rename(tensor.name)))
    for value in [*model.graph.input, *model.graph.output, *model.graph.value_info]:
        value.name = rename(value.name)
    for number, node in enumerate(model.graph.node):
        node.name, node.input[:], node.output[:] = f"n{number}", map(rename, node.input), map(rename, node.output)
    onnx.save(model, str(target))
    return target
