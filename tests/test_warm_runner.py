"""A run's runner started ahead (during the run before's teardown) measures as a runner started with its run: charged
to the run's cgroup from its first page, limited as the run asks, and gone with its cgroup once nobody will take it.
Real cgroups, real processes."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from harness.backends.local import LocalBackend
from harness.measure import cgroups
from harness.run.parallel import confine_runners
from tests.helpers import run_fields, run_spec

pytestmark = pytest.mark.skipif(cgroups.discover().version == 0, reason="needs a writable cgroup hierarchy")
MIB = 1024**2


def leftovers(session_id: str) -> list[Path]:
    """The session's cgroups still on disk (runs' and runners' started ahead alike)."""
    return [p for d in set(cgroups.discover().dirs.values()) for p in d.glob(f"harness-{session_id}*")]


def memory_usage(group: cgroups.RunCgroup) -> int:
    memory = group.dirs["memory"]
    return int((memory / ("memory.current" if group.version == 2 else "memory.usage_in_bytes")).read_text())


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def second_run(backend: LocalBackend, tiny_onnx: Path, workloads: Path, alloc_mib: str, *, first_memory_mib: int,
               memory_mib: int) -> tuple[dict, str]:
    """A session's second run (alloc.py allocating `alloc_mib` under `memory_mib`), whose runner the first run
    (allocating nothing, under `first_memory_mib`) started ahead, then the backend closed: its fields and the
    session's id."""
    first = run_spec(workloads / "alloc.py", "0", "0", model=tiny_onnx, memory_mib=first_memory_mib)
    try:
        backend.run(first)
        second = run_fields(backend, run_spec(workloads / "alloc.py", alloc_mib, model=tiny_onnx, memory_mib=memory_mib,
                                              session_id=first.session_id))
    finally:
        backend.close()
    return second, first.session_id


def test_the_next_runner_starts_ahead_and_is_charged_to_its_run(tiny_onnx: Path, workloads: Path) -> None:
    """From the second run on, the runner was spawned before the backend was called, inside the run's cgroup: what
    its start used is in that cgroup before the spec arrives, and the run's peak holds it, as the cold first run's
    peak holds its runner's start."""
    backend = LocalBackend()
    if backend.isolation == "rlimit":
        pytest.skip(backend.reason)
    spec = run_spec(workloads / "alloc.py", "0", "0", model=tiny_onnx)
    try:
        cold = backend.run(spec)
        (waiting,) = backend._warm.values()
        time.sleep(1.0)  # its start done: it waits for its spec
        usage = memory_usage(waiting.cgroup)
        warm = backend.run(spec)
    finally:
        backend.close()
    assert cold.clock_s["runner_spawned"] >= cold.clock_s["backend_called"]
    assert warm.clock_s["runner_spawned"] < warm.clock_s["backend_called"] <= warm.clock_s["spec_handed"]
    assert warm.result.clock_s["spec_read"] >= warm.clock_s["spec_handed"]
    assert cold.result.status == warm.result.status == "ok"
    assert usage > 2 * MIB and warm.result.peak_memory_mib >= usage / MIB
    assert abs(warm.result.peak_memory_mib - cold.result.peak_memory_mib) < 2, (cold.result, warm.result)
    assert not leftovers(spec.session_id)


def test_a_memory_limit_still_kills_the_script_at_the_limit(tiny_onnx: Path, workloads: Path) -> None:
    backend = LocalBackend()
    if backend.isolation == "rlimit":
        pytest.skip(backend.reason)
    limited, session_id = second_run(backend, tiny_onnx, workloads, "300", first_memory_mib=100, memory_mib=100)
    assert limited["status"] == "oom" and limited["peak_memory_mib"] <= 100.5, limited
    assert not leftovers(session_id)


def test_a_limit_below_the_waiting_runner_falls_back_to_a_cold_start(tiny_onnx: Path, workloads: Path) -> None:
    """A limit the waiting runner already exceeds is not forced on it: the run starts its runner itself, which the
    OOM killer then takes at its start, as without a runner started ahead."""
    backend = LocalBackend()
    if backend.isolation != "cgroup-v1":
        pytest.skip("v1 refuses a memory limit below the usage; v2 would reclaim and kill")
    tiny, session_id = second_run(backend, tiny_onnx, workloads, "0", first_memory_mib=256, memory_mib=2)
    assert tiny["status"] == "error" and "runner was killed at the memory limit" in tiny["stderr_tail"], tiny
    assert not leftovers(session_id)


@pytest.mark.parametrize("end", ["close", "cancel"])
def test_the_waiting_runner_is_killed_and_its_cgroup_removed(tiny_onnx: Path, workloads: Path, end: str) -> None:
    backend = LocalBackend()
    if backend.isolation == "rlimit":
        pytest.skip(backend.reason)
    spec = run_spec(workloads / "alloc.py", "0", "0", model=tiny_onnx)
    backend.run(spec)
    (waiting,) = backend._warm.values()
    assert alive(waiting.process.pid) and leftovers(spec.session_id)
    {"close": backend.close, "cancel": backend.cancel}[end]()
    assert not alive(waiting.process.pid) and not waiting.workdir.exists()
    assert not leftovers(spec.session_id)


def test_parallel_slots_start_no_runner_ahead() -> None:
    backend = LocalBackend()
    confine_runners(backend)
    assert backend.warm_runners is False and backend.runner_off_workload_cores is False
