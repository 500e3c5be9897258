"""Parallel slots on one host: concurrent runs on disjoint cores (as seen from inside the runs), every run stored
once with how many runs shared the host, `auto` deciding from the cores and the stored interference, Ctrl-C."""

from __future__ import annotations

import itertools
import json
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.cli import main
from harness.core.config import load_profile
from harness.measure import cgroups
from harness.measure.provenance import cpu_model
from harness.models.resolve import resolve_model
from harness.run.session import plan_session
from harness.run.slots import INTERFERENCE_FILE, plan_slots, run_needs
from harness.store.results import list_sessions, load_runs, load_session_info
from tests.helpers import INTERRUPTED_EXITS, ctrl_c_handled

CORES = sorted(os.sched_getaffinity(0))
needs_two_cores = pytest.mark.skipif(len(CORES) < 2, reason="parallel slots need at least 2 allowed cores")
GIB = 1024**3


def _sweep(results: Path, model: Path, workloads: Path, *flags: str, seconds: float = 1.5) -> list[dict]:
    code = main(["sweep", str(model), "--backend", "local", "--results-dir", str(results), "--json", "--no-report",
                 "--script", str(workloads / "placement.py"), *flags, "--", str(seconds)])
    assert code == 0
    (session,) = list_sessions(results)
    return load_runs(session)


def _overlap(a: dict, b: dict) -> bool:
    return a["metrics"]["t_start"] < b["metrics"]["t_end"] and b["metrics"]["t_start"] < a["metrics"]["t_end"]


@needs_two_cores
def test_concurrent_runs_never_share_a_core(capsys, in_tmp_cwd: Path, tiny_onnx: Path, workloads: Path) -> None:
    runs = _sweep(in_tmp_cwd / "results", tiny_onnx, workloads, "--cpus", "1,0.5", "--repeats", "2",
                  "--parallel", "2")
    assert sorted(r["run_id"] for r in runs) == sorted({r["run_id"] for r in runs}) and len(runs) == 4
    assert all(r["status"] == "ok" for r in runs), [r["stderr_tail"] for r in runs]
    for run in runs:  # the cores the script saw are the slot's, whole and fractional CPUS alike
        cpuset = run["limits_requested"]["cpuset"]
        assert run["metrics"]["cores"] == cpuset and len(cpuset.split(",")) == 1
        assert run["runner_cores"] == [int(run["limits_requested"]["cpuset"])]  # its sampler stays off the other slot
    fractional = [r for r in runs if r["cpus"] == 0.5]
    assert all(r["limits_requested"]["cpu_quota_us"] == 50_000 for r in fractional)
    pairs = [(a, b) for a, b in itertools.combinations(runs, 2) if _overlap(a, b)]
    assert pairs, "no two runs were in flight at once"
    for a, b in pairs:
        assert a["metrics"]["cores"] != b["metrics"]["cores"]
        assert a["concurrent_runs"] == b["concurrent_runs"] == 2
    assert "2 runs at once" in capsys.readouterr().err


def test_serial_runs_record_that_they_ran_alone(in_tmp_cwd: Path, tiny_onnx: Path, workloads: Path) -> None:
    runs = _sweep(in_tmp_cwd / "results", tiny_onnx, workloads, "--repeats", "2", seconds=0.1)
    assert [r["concurrent_runs"] for r in runs] == [1, 1]
    assert not any(_overlap(a, b) for a, b in itertools.combinations(runs, 2))


def _stored_interference(results: Path, worst: float, hostname: str | None = None) -> None:
    path = results / INTERFERENCE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"raw": {"interference": {
        "hostname": hostname or platform.node(), "host_cpu_model": cpu_model(), "worst": worst,
        "measured_at": "2026-01-01T00:00:00"}}}))


@needs_two_cores
def test_auto_follows_cores_memory_and_measured_interference(in_tmp_cwd: Path, tiny_onnx: Path) -> None:
    results = in_tmp_cwd / "results"
    model = resolve_model(str(tiny_onnx), None)

    def slots(cpus: list[float], memory: int = 64 * GIB, pinning: str = "auto"):
        profile = load_profile(None, {"MEMORY": "1g", "CPU_PINNING": pinning})
        plan = plan_session(profile, [model], cpus, (), "s", seed=1)
        return plan_slots(run_needs(plan.specs), "auto", CORES, memory, results)

    unknown = slots([1.0])
    assert unknown.count == 1 and "unknown" in unknown.notes[0] and "parallel_interference.py" in unknown.notes[0]
    _stored_interference(results, 0.25)
    noisy = slots([1.0])
    assert noisy.count == 1 and "25%" in noisy.notes[0]
    _stored_interference(results, 0.25, hostname="elsewhere")
    assert "another host" in slots([1.0]).notes[0]
    _stored_interference(results, 0.04)
    quiet = slots([1.0])
    assert quiet.count == len(CORES) and not quiet.notes
    assert set(itertools.chain(*quiet.slots)) == set(CORES) and len(set(map(frozenset, quiet.slots))) == len(CORES)
    assert slots([0.5], pinning="off").count == len(CORES)  # quota-only runs get their own cores too
    every_core = slots([float(len(CORES))])
    assert every_core.count == 1 and "stay serial" in every_core.notes[0]
    assert slots([1.0], memory=GIB + GIB // 2).count == 1  # one run of MEMORY=1g fits, two do not


def test_bad_parallel_value_is_one_line(capsys, in_tmp_cwd: Path, tiny_onnx: Path) -> None:
    capsys.readouterr()
    assert main(["profile", str(tiny_onnx), "--backend", "local", "--parallel", "two"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--parallel 'two'" in err


@needs_two_cores
def test_ctrl_c_keeps_finished_runs_and_stops_the_rest(in_tmp_cwd: Path, tiny_onnx: Path, workloads: Path) -> None:
    results = in_tmp_cwd / "results"
    argv = [sys.executable, "-m", "harness.cli", "profile", str(tiny_onnx), "--backend", "local", "--repeats", "6",
            "--parallel", "2", "--results-dir", str(results), "--script", str(workloads / "placement.py"), "--", "2"]
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               preexec_fn=ctrl_c_handled)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any(load_runs(s) for s in list_sessions(results)):
        time.sleep(0.2)
    time.sleep(0.5)  # both slots' next runs are in flight (and the summary after the first ones is written)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode in INTERRUPTED_EXITS, err
    assert "completed runs are kept" in err
    (session,) = list_sessions(results)
    runs = load_runs(session)
    assert 1 <= len(runs) < 6 and all(r["status"] == "ok" for r in runs)
    assert load_session_info(session)["state"] == "interrupted"
    time.sleep(0.5)
    leftovers = subprocess.run(["pgrep", "-f", str(workloads / "placement.py")], capture_output=True, text=True)
    assert not leftovers.stdout.strip()
    run_cgroups = [p for d in cgroups.discover().dirs.values() for p in d.glob(f"harness-{session.name}*")]
    assert not run_cgroups
