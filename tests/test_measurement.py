"""Every number is what its name says: memory in rlimit mode, page-cache charging, the runner's own footprint and
placement, OOM of a grandchild, intra-op spinning under a quota. Real cgroups, real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.backends.local import LocalBackend
from harness.cli import main
from harness.core.records import Limits
from harness.measure import cgroups
from harness.measure.launch import inside, runner_command
from harness.measure.report_protocol import MAX_LATENCIES
from tests.conftest import make_matmul_model
from tests.helpers import profile_json, run_fields, run_spec, session_runs

pytestmark = pytest.mark.skipif(cgroups.discover().version != 1, reason="needs a writable cgroup v1 hierarchy")
MIB = 1024**2


@pytest.fixture
def shared_cgroup() -> Iterator[cgroups.RunCgroup]:
    """A cgroup standing for the one the harness, its CLI and the shell share when runs get no cgroup of their own."""
    limits = Limits(cpus=None, cpu_mode="none", cpuset=None, cpu_quota_us=None, cpu_period_us=None,
                    memory_bytes=4096 * MIB, memory_swap_bytes=4096 * MIB)
    group = cgroups.create_run_cgroup(cgroups.discover(), f"harness-test-shared-{os.getpid()}", limits)
    yield group
    group.remove()


def run_runner_in(group: cgroups.RunCgroup, spec: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    """`python -m harness.measure.runner` started inside `group`, as the local backend starts it."""
    spec_path, out = tmp_path / "spec.json", tmp_path / "result.json"
    spec_path.write_text(json.dumps(spec))
    subprocess.run(inside(group.procs_files, runner_command(spec_path, out)), check=True)
    return json.loads(out.read_text())


def test_rlimit_mode_measures_the_process_tree_not_the_shared_cgroup(
        tmp_path: Path, tiny_onnx: Path, workloads: Path, shared_cgroup: cgroups.RunCgroup) -> None:
    """In rlimit mode the runner shares a cgroup with others; that cgroup's high-water mark (300 MiB here, left by an
    earlier process) is not the run's peak. An idle script peaks at its own few MiB; two processes of 100 MiB each
    count together, which the largest single process's ru_maxrss alone would not."""
    procs = [str(path) for path in shared_cgroup.procs_files]
    subprocess.run([sys.executable, str(workloads / "alloc.py"), str(tiny_onnx), "300", "0"], check=True,
                   preexec_fn=lambda: [Path(p).write_text(str(os.getpid())) for p in procs])  # noqa: PLW1509
    shared_peak = int((shared_cgroup.dirs["memory"] / "memory.max_usage_in_bytes").read_text()) / MIB
    assert shared_peak >= 300
    base = run_spec(workloads / "alloc.py", model=tiny_onnx).runner_input().to_dict()
    rlimited = {**base, "isolation": "rlimit", "rlimit_as_bytes": 2048 * MIB}
    idle = run_runner_in(shared_cgroup, {**rlimited, "script_args": ["0", "0.3"]}, tmp_path)
    assert idle["status"] == "ok" and idle["peak_source"] == "process-tree"
    assert idle["peak_memory_mib"] < 40 and idle["avg_memory_mib"] < 40, idle
    pair = run_runner_in(shared_cgroup, {**rlimited, "script": str(workloads / "alloc_pair.py"),
                                         "script_args": ["100", "1.0"]}, tmp_path)
    assert pair["status"] == "ok" and pair["peak_source"] == "process-tree"
    assert 200 <= pair["peak_memory_mib"] < 260, pair["peak_memory_mib"]
    assert 100 <= pair["peak_rss_mib"] < 130  # one process's high-water mark: half the tree's
    in_cgroup = run_runner_in(shared_cgroup, {**base, "script_args": ["0", "0.3"]}, tmp_path)
    assert in_cgroup["peak_source"] == "kernel" and in_cgroup["peak_memory_mib"] >= 300  # what rlimit mode reported


def test_oom_of_a_grandchild_then_an_error_exit_is_oom(capsys, in_tmp_cwd: Path, tiny_onnx: Path,
                                                        workloads: Path) -> None:
    results = in_tmp_cwd / "results"
    profile_json(capsys, results, str(tiny_onnx), "--backend", "local", "--memory", "150m", "--repeats", "1",
                 "--script", str(workloads / "grandchild_oom.py"), "--", "400")
    (run,) = session_runs(results)
    assert run["oom_kills"] >= 1 and run["exit_code"] == 1, run
    assert run["status"] == "oom"
    assert "worker ended with -9" in run["stderr_tail"]


def drop_from_page_cache(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def test_no_run_is_charged_the_model_files_page_cache(tmp_path: Path, workloads: Path) -> None:
    """The model's pages are charged to whoever reads them first. With the file out of the page cache (after boot,
    or evicted), the first run used to peak higher by the file's size (64 MiB here); now every run is alike."""
    model = make_matmul_model(tmp_path / "big.onnx", size=4096, layers=1)
    size_mib = model.stat().st_size / MIB
    drop_from_page_cache(model)
    backend = LocalBackend()
    spec = run_spec(workloads / "read_model.py", model=model, memory_mib=1024)
    peaks = [run_fields(backend, spec)["peak_memory_mib"] for _ in range(2)]
    assert size_mib > 60 and abs(peaks[0] - peaks[1]) < 8, peaks
    assert max(peaks) < size_mib  # the file's pages are in no run's peak


def test_runner_footprint_does_not_grow_with_iterations(tmp_path: Path, tiny_onnx: Path, workloads: Path) -> None:
    """Latencies travel as a bounded binary file: ten times as many inferences, the same peak; beyond
    MAX_LATENCIES a uniform sample is kept, n/mean/min/max still cover every call, and the result says so."""
    backend = LocalBackend()
    script = workloads / "latency_series.py"
    runs = {n: run_fields(backend, run_spec(script, str(n), model=tiny_onnx, memory_mib=512))
            for n in (MAX_LATENCIES, 10**6)}
    small, large = runs[MAX_LATENCIES], runs[10**6]
    assert small["status"] == large["status"] == "ok"
    assert large["latency_stats_ms"]["n"] == 10**6 and len(large["latencies_ms"]) == MAX_LATENCIES
    assert small["latency_stats_ms"]["n"] == len(small["latencies_ms"]) == MAX_LATENCIES and not small["notes"]
    stats = small["latency_stats_ms"]
    assert small["latency_headline"] == "p50" and stats["headline"] == stats["p50"]
    assert any("uniform sample" in note for note in large["notes"])
    assert large["peak_memory_mib"] - small["peak_memory_mib"] < 3, (small["peak_memory_mib"], large["peak_memory_mib"])


def test_a_huge_json_latency_line_does_not_kill_the_runner(tmp_path: Path, tiny_onnx: Path, workloads: Path) -> None:
    """A script reporting 6 million latencies as one JSON line (36 MB of text) used to make the runner parse it all
    inside a 100 MiB limit, where the OOM killer took the runner and the run was called the model's oom."""
    run = run_fields(LocalBackend(), run_spec(workloads / "latency_series.py", "6000000", "json", model=tiny_onnx,
                                      memory_mib=100))
    assert run["status"] == "ok", run["stderr_tail"]
    assert run["latency_stats_ms"] is None and any("was skipped" in note for note in run["notes"])


def test_a_runner_killed_at_the_limit_is_not_the_models_oom(tiny_onnx: Path, workloads: Path) -> None:
    """Below what the runner itself needs, the OOM killer takes the runner before the script ever starts."""
    run = run_fields(LocalBackend(), run_spec(workloads / "alloc.py", "0", model=tiny_onnx, memory_mib=3))
    assert run["status"] == "error", run
    assert "runner was killed at the memory limit" in run["stderr_tail"]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs a core beside the pinned one")
def test_runner_samples_off_the_pinned_workloads_cores(in_tmp_cwd: Path, tiny_onnx: Path) -> None:
    """A CPUS=1 run pinned to the last core: its script runs only there, in the run's cpuset cgroup, and the runner
    (which wakes every 10 ms) runs on the other cores, still inside the run's memory cgroup."""
    probe = in_tmp_cwd / "where.py"
    probe.write_text("import os\nfrom pathlib import Path\nfrom harness.measure.report_protocol import report\n"
                     "report(cores=','.join(map(str, sorted(os.sched_getaffinity(0)))),\n"
                     "       cgroups=Path('/proc/self/cgroup').read_text())\n")
    run = run_fields(LocalBackend(), run_spec(probe, model=tiny_onnx, cpus=1.0))
    workload = [int(core) for core in run["metrics"]["cores"].split(",")]
    assert workload == [max(os.sched_getaffinity(0))]
    assert run["runner_cores"] == sorted(set(os.sched_getaffinity(0)) - set(workload))
    assert all("harness-test-" in line for line in run["metrics"]["cgroups"].splitlines()
               if line.split(":")[1] in ("memory", "cpuset", "cpu,cpuacct"))
    shared = run_fields(LocalBackend(runner_off_workload_cores=False), run_spec(probe, model=tiny_onnx, cpus=1.0))
    assert shared["runner_cores"] == workload


def test_onnxruntime_does_not_spin_under_a_quota(capsys, in_tmp_cwd: Path, tiny_onnx: Path) -> None:
    """With two intra-op threads and a 1.5-CPU quota, spinning workers between tiny inferences burn the quota: a
    pinned run keeps spinning (its cores are its own), a quota run does not, so it uses about one core, not two."""
    results = in_tmp_cwd / "results"
    profile_json(capsys, results, str(tiny_onnx), "--backend", "local", "--repeats", "1", "--cpus", "1.5",
                 "--iterations", "100000", "--warmup", "100")
    (run,) = session_runs(results)
    assert run["limits_requested"]["cpu_mode"] == "quota" and run["metrics"]["intra_op_spinning"] is False
    steady_s = run["latency_stats_ms"]["mean"] * run["latency_stats_ms"]["n"] / 1000
    # spinning kept both threads busy through the steady phase: cpu_s >= runtime_s - load + 2 x steady
    assert run["cpu_s"] < run["runtime_s"] + 0.5 * steady_s, (run["cpu_s"], run["runtime_s"], steady_s)


def test_under_a_quota_the_mean_is_the_headline_latency(capsys, in_tmp_cwd: Path, tiny_onnx: Path,
                                                         workloads: Path) -> None:
    """1 ms inferences at CPUS=0.5 over a 100 ms quota period: about 50 run at full speed, then one absorbs a 50 ms
    stall. The median stays at the CPUS=1 figure; the mean doubles. Quota runs say so, and rank on the mean."""
    from harness.analysis.run_values import run_value
    from harness.core.metric_registry import FASTEST_INFERENCE

    results = in_tmp_cwd / "results"
    capsys.readouterr()
    assert main(["sweep", str(tiny_onnx), "--cpus", "1,0.5", "--repeats", "1", "--backend", "local", "--results-dir",
                 str(results), "--no-report", "--cpu-pinning", "off", "--script",
                 str(workloads / "short_inference.py"), "--", "600"]) == 0
    runs = {run["cpus"]: run for run in session_runs(results)}
    whole, half = runs[1.0], runs[0.5]
    # 1 CPU of quota never binds here
    assert whole["limits_requested"]["cpu_mode"] == half["limits_requested"]["cpu_mode"] == "quota"
    assert whole["latency_headline"] == half["latency_headline"] == "mean"
    assert run_value(half, "latency_ms") == half["latency_stats_ms"]["mean"]
    # Calibration's fastest-inference rule keeps the mean too: the fastest inference dodged the quota's stalls.
    assert run_value(half, "latency_ms", FASTEST_INFERENCE) == half["latency_stats_ms"]["mean"]
    assert any("shorter than the quota's run window" in note for note in half["notes"])
    assert half["shorter_than_quota_window"] and not whole["shorter_than_quota_window"]  # no stall at a whole CPU
    assert "inferences shorter than the CFS quota's run window" in capsys.readouterr().err
    if half["cpu_nr_throttled"] == 0:
        pytest.skip("the host's other load left this run less than its 0.5 CPU: the quota never bound")
    assert half["latency_stats_ms"]["p50"] < 1.3 * whole["latency_stats_ms"]["p50"]  # the median hides the limit
    stats = half["latency_stats_ms"]
    assert stats["mean"] > 1.6 * stats["p50"]  # the mean shows the stalls (ideal 2x)
