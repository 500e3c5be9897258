"""The session's core with a fake backend (canned results, no processes): interleaving, resume, interrupt,
checks before the first run and the live summary; and table tests of the pure pieces the runner and the plan
rest on. The real backends are tested for real in test_local_limits.py and test_docker.py."""

from __future__ import annotations

import resource
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from harness.analysis.stats import summarize_runs
from harness.backends.base import killed_at_the_limit
from harness.backends.local import cgroup_applied
from harness.core.config import load_profile
from harness.core.errors import BackendError
from harness.core.records import RunnerInput, RunOutcome, RunResult
from harness.measure.runner import assemble_result, time_weighted_mean
from harness.measure.spec import RunSpec, plan_cpu_limits
from harness.models.resolve import ModelInfo
from harness.run.session import Session, capped_cpus, plan_session
from harness.store.results import load_runs, load_session_info


class FakeBackend:
    """Canned results: each model's runtime is its value; `fail_at` interrupts the n-th run like Ctrl-C."""

    name = "fake"
    warm_runners = False
    runner_off_workload_cores = False
    elsewhere = None  # its runs run on this host

    def __init__(self, runtimes: dict[str, float], fail_at: int | None = None, refuse: str | None = None) -> None:
        self.runtimes, self.fail_at, self.refuse, self.ran = runtimes, fail_at, refuse, []

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "isolation": "none"}

    def check(self, models: Sequence[ModelInfo]) -> None:
        if self.refuse and any(m.name == self.refuse for m in models):
            raise BackendError(f"{self.refuse} cannot run here")

    def run(self, spec: RunSpec) -> RunOutcome:
        if self.fail_at is not None and len(self.ran) == self.fail_at:
            raise KeyboardInterrupt
        self.ran.append(spec)
        value = self.runtimes[spec.model_name]
        result = RunResult("ok", runtime_s=value, latency_stats_ms={"p50": value, "mean": value, "headline": value})
        return RunOutcome(result, cgroup_applied(spec, swap_capped=True))

    def cancel(self) -> None:
        """Nothing in flight: runs return at once."""

    def close(self) -> None:
        """Nothing to release."""


def models(tmp_path: Path, names: Sequence[str]) -> list[ModelInfo]:
    found = []
    for index, name in enumerate(names):
        path = tmp_path / f"{name}.onnx"
        path.write_bytes(bytes([index]))
        found.append(ModelInfo(name, path, "onnx", path, f"{index:064x}", 0.0))
    return found


def session(tmp_path: Path, backend: FakeBackend, repeats: int = 3, cpus: list[float] | None = None) -> Session:
    profile = load_profile(None, {"REPEATS": str(repeats), "RESULTS_DIR": str(tmp_path / "results")}, {})
    plan = plan_session(profile, models(tmp_path, ["a", "b"]), cpus, (), "s1", seed=7)
    return Session(profile, plan, backend, "fake")


def test_every_round_runs_each_combination_once(tmp_path: Path) -> None:
    backend = FakeBackend({"a": 1.0, "b": 2.0})
    session(tmp_path, backend, repeats=3, cpus=[1.0, 0.5]).run()
    rounds: dict[int, list[tuple[str, float]]] = {}
    for spec in backend.ran:
        rounds.setdefault(spec.round, []).append((spec.model_name, spec.cpu.cpus))
    assert [sorted(r) for r in rounds.values()] == [sorted([("a", 0.5), ("a", 1.0), ("b", 0.5), ("b", 1.0)])] * 3
    assert len({tuple(r) for r in rounds.values()}) > 1  # the order is shuffled per round


def test_an_interrupted_session_keeps_its_runs_and_resumes_the_rest(tmp_path: Path) -> None:
    with pytest.raises(KeyboardInterrupt):
        session(tmp_path, FakeBackend({"a": 1.0, "b": 2.0}, fail_at=4)).run()
    directory = tmp_path / "results" / "s1"
    assert len(load_runs(directory)) == 4 and load_session_info(directory)["state"] == "interrupted"
    backend = FakeBackend({"a": 1.0, "b": 2.0})
    summary = session(tmp_path, backend).run()
    assert len(backend.ran) == 2 and len(load_runs(directory)) == 6
    assert [e["n_runs"] for e in summary["models"]] == [3, 3]


def test_a_backend_check_stops_the_session_before_the_first_run(tmp_path: Path) -> None:
    backend = FakeBackend({"a": 1.0, "b": 2.0}, refuse="b")
    with pytest.raises(BackendError, match="b cannot run here"):
        session(tmp_path, backend).run()
    assert backend.ran == [] and load_runs(tmp_path / "results" / "s1") == []


def test_the_live_summary_equals_one_computed_from_all_runs(tmp_path: Path) -> None:
    summary = session(tmp_path, FakeBackend({"a": 1.0, "b": 2.0}), cpus=[1.0, 2.0]).run()
    again = summarize_runs(load_runs(tmp_path / "results" / "s1"))
    assert summary["models"] == [entry.as_dict() for entry in again]
    assert [(e.model_name, e.cpus, e.metrics["runtime_s"].median) for e in again] == [
        ("a", 1.0, 1.0), ("a", 2.0, 1.0), ("b", 1.0, 2.0), ("b", 2.0, 2.0)]


@pytest.mark.parametrize(("times", "values", "start", "end", "mean"), [
    ([0.0, 1.0, 2.0], [10.0, 20.0, 30.0], 0.0, 3.0, 20.0),  # each sample holds until the next, the last until end
    ([0.0, 1.0], [10.0, 30.0], 0.5, 1.5, 20.0),  # a window across one change
    ([0.0, 1.0], [10.0, 30.0], 0.0, 0.5, 10.0),  # a window before the second sample
    ([], [], 0.0, 1.0, None),  # no samples
    ([5.0], [1.0], 0.0, 2.0, None),  # nothing sampled inside the window
])
def test_time_weighted_mean(times: list[float], values: list[float], start: float, end: float,
                            mean: float | None) -> None:
    from array import array

    assert time_weighted_mean(array("d", times), array("d", values), start, end) == mean


@pytest.mark.parametrize(("cpus", "pinning", "cores", "cpuset", "quota"), [
    (1.0, "auto", [0, 1], "1", None),  # whole CPUS pinned to the highest core
    (2.0, "auto", [0, 1, 2, 3], "2-3", None),
    (0.5, "auto", [0, 1], None, 50_000),  # fractional: the quota alone
    (1.5, "on", [0, 1, 2], "1-2", 150_000),  # pinned to ceil(CPUS) cores, plus the quota
    (2.0, "off", [0, 1], None, 200_000),
    (3.0, "auto", [0, 1], None, 300_000),  # more than the cores: no pinning possible
])
def test_cpu_planning(cpus: float, pinning: str, cores: list[int], cpuset: str | None, quota: int | None) -> None:
    plan = plan_cpu_limits(cpus, pinning, cores)
    assert (plan.cpuset, plan.quota_us) == (cpuset, quota)
    assert plan.mode == ("pinned" if quota is None else "quota")


@pytest.mark.parametrize(("asked", "allowed", "measured", "notes"), [
    ([1.0, 2.0], 2, [1.0, 2.0], 0),
    ([1.0, 4.0], 2, [1.0, 2.0], 1),  # capped, with a note
    ([4.0, 8.0], 2, [2.0], 2),  # both capped to one value
])
def test_the_core_cap(asked: list[float], allowed: int, measured: list[float], notes: int) -> None:
    values, said = capped_cpus(asked, allowed)
    assert values == measured and len(said) == notes


def _rusage(maxrss_kib: int, user_s: float) -> resource.struct_rusage:
    return resource.struct_rusage((user_s, 0.0, maxrss_kib, *([0] * 13)))


@pytest.mark.parametrize(("returncode", "timed_out", "oom_kills", "status", "signal"), [
    (0, False, 0, "ok", None),
    (-9, False, 1, "oom", 9),
    (3, False, 0, "error", None),
    (-9, True, 0, "timeout", 9),
])
def test_assemble_result(returncode: int, timed_out: bool, oom_kills: int, status: str, signal: int | None) -> None:
    from array import array

    spec = RunnerInput(model="m", script="s.py", script_args=(), threads=1, cpus=1.0, iterations=4, warmup=0,
                       batch_size=2, sample_interval_ms=10.0, timeout_s=5.0, cpu_mode="pinned")
    result = RunResult.from_dict(assemble_result(  # the runner writes this JSON form; the harness reads it so
        spec=spec, t0=100.0, t_exit=102.0, times=array("d", [100.0, 101.0]), values=array("d", [2**20, 3 * 2**20]),
        phases=[("steady", 101.0)], reported={"load_s": 0.25}, latencies=array("d", [1.0, 2.0, 3.0, 4.0]),
        reported_count=4, notes=[], peak_bytes=4 * 2**20, usage=_rusage(8192, 1.5), returncode=returncode,
        timed_out=timed_out, oom_kills=oom_kills, stderr_tail="tail", cgroup_version=2, tree_mode=False,
        runner_cores=[0], cpu_delta={}, runner_cpu_s=0.01))
    assert (result.status, result.signal, result.runtime_s, result.load_s) == (status, signal, 2.0, 0.25)
    assert (result.peak_memory_mib, result.peak_source, result.peak_rss_mib) == (4.0, "kernel", 8.0)
    assert result.avg_memory_mib == 2.0 and result.avg_memory_mib_by_phase == {"startup": 1.0, "steady": 3.0}
    assert result.latency_stats_ms["p50"] == 2.5 and result.latency_stats_ms["headline"] == 2.5
    assert result.throughput_ips == pytest.approx(2 * 1000 / 2.5)
    assert result.stderr_tail == ("" if status == "ok" else "tail")


@pytest.mark.parametrize(("status", "signal", "exit_code", "seen_later", "settled"), [
    ("error", 9, None, True, "oom"),  # SIGKILLed, and the later look saw the kill the runner's read missed
    ("error", 9, None, False, "error"),  # SIGKILLed by something else
    ("error", None, 1, True, "error"),  # the script's own failure: the runner's read decides, as it always does
    ("ok", None, 0, True, "ok"),
])
def test_a_kill_seen_only_by_a_later_look_is_oom(status: str, signal: int | None, exit_code: int | None,
                                                 seen_later: bool, settled: str) -> None:
    result = RunResult(status=status, runtime_s=1.0, signal=signal, exit_code=exit_code)
    assert killed_at_the_limit(result, seen_later).status == settled
