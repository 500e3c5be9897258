"""A real Dask cluster on this machine: a scheduler with a worker on one core (the head) and a worker node on the
other, each its own process group. A sweep across it stores every run once, naming its node; killing the
worker node mid-sweep loses no finished run and the rest completes on the head or is marked not run."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from harness.cli import main
from harness.measure import cgroups
from harness.store.results import list_sessions, load_runs, load_session_info
from tests.conftest import (
    EXTERNAL_WEIGHT,
    WORKLOADS,
    make_escaping_model,
    make_external_data_model,
    make_hardmax_model,
)
from tests.helpers import INTERRUPTED_EXITS, ctrl_c_handled

pytest.importorskip("distributed", reason="the cluster extra is not installed: pip install -e '.[cluster]'")

CORES = sorted(os.sched_getaffinity(0))
SCHEDULER = [sys.executable, "-m", "distributed.cli.dask_scheduler"]
WORKER = [sys.executable, "-m", "distributed.cli.dask_worker"]
START_TIMEOUT_S = 90.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _spawn(argv: list[str], core: int, log: Path) -> subprocess.Popen[bytes]:
    """A cluster process pinned to one core, in a process group of its own (so a kill takes all of it)."""
    with open(log, "wb") as out:
        return subprocess.Popen(["taskset", "-c", str(core), *argv], stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def _kill(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _wait_for(log: Path, text: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while text not in log.read_text(errors="replace"):
        assert process.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")[-2000:]
        time.sleep(0.2)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """One cluster for this module's tests (each takes about 15 s to start here); the last test kills its node."""
    with dask_cluster(tmp_path_factory.mktemp("cluster")) as started:
        yield started


@contextmanager
def dask_cluster(directory: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """(scheduler address, the worker node's process): head = scheduler + worker on the last core, node = a
    worker on the first core, so their runs never share a core."""
    address = f"tcp://127.0.0.1:{_free_port()}"
    head_core, node_core = CORES[-1], CORES[0]
    processes = [_spawn([*SCHEDULER, "--host", "127.0.0.1", "--port", address.rsplit(":", 1)[1],
                         "--dashboard-address", ":0"], head_core, directory / "scheduler.log")]
    try:
        _wait_for(directory / "scheduler.log", "Scheduler at:", processes[0])
        for name, core in (("head", head_core), ("node", node_core)):
            processes.append(_spawn([*WORKER, address, "--nthreads", "1", "--no-nanny", "--name", name,
                                     "--dashboard-address", ":0"], core, directory / f"{name}.log"))
        for name, process in zip(("head", "node"), processes[1:], strict=True):
            _wait_for(directory / f"{name}.log", "Registered to:", process)
        yield address, processes[2]
    finally:
        for process in reversed(processes):
            _kill(process)


def _sweep(address: str, results: Path, model: Path, workloads: Path) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "harness.cli", "sweep", str(model), "--repeats", "8", "--backend", "local",
            "--cluster", address, "--results-dir", str(results), "--no-report", "--json",
            "--script", str(workloads / "placement.py"), "--", "1.5"]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=results.parent,
                            preexec_fn=ctrl_c_handled)


def _stored_until(results: Path, sweep: subprocess.Popen[str], done: Callable[[list[dict]], bool]) -> list[dict]:
    """The session's stored runs, polled until `done` says so (the sweep must still be running then)."""
    deadline = time.monotonic() + 180
    runs: list[dict] = []
    while time.monotonic() < deadline and sweep.poll() is None:
        sessions = list_sessions(results)
        runs = load_runs(sessions[0]) if sessions else []
        if done(runs):
            return runs
        time.sleep(0.1)
    raise AssertionError(f"the sweep ended or stalled first: {sweep.stderr.read() if sweep.stderr else ''}")


two_cores = pytest.mark.skipif(len(CORES) < 2, reason="the head and the worker node each need a core of their own")


@two_cores
def test_ctrl_c_keeps_finished_runs_and_stops_the_workers(cluster, tmp_path: Path, tiny_onnx: Path,
                                                          workloads: Path) -> None:
    address, _ = cluster
    results = tmp_path / "results"
    sweep = _sweep(address, results, tiny_onnx, workloads)
    kept = _stored_until(results, sweep, lambda runs: len(runs) >= 1)
    time.sleep(0.5)  # the next runs are in flight (and the summary after the first one is written)
    sweep.send_signal(signal.SIGINT)
    _, err = sweep.communicate(timeout=120)
    assert sweep.returncode in INTERRUPTED_EXITS, err
    assert "completed runs are kept" in err
    (session,) = list_sessions(results)
    runs = load_runs(session)
    assert {r["run_id"] for r in kept} <= {r["run_id"] for r in runs} and 1 <= len(runs) < 8
    assert load_session_info(session)["state"] == "interrupted"
    time.sleep(1.0)
    leftovers = subprocess.run(["pgrep", "-f", str(workloads / "placement.py")], capture_output=True, text=True)
    assert not leftovers.stdout.strip(), "a run kept running on a worker after Ctrl-C"


@two_cores
def test_per_op_is_refused_in_one_line(cluster, capsys, in_tmp_cwd: Path, tiny_onnx: Path) -> None:
    capsys.readouterr()
    assert main(["sweep", str(tiny_onnx), "--backend", "local", "--cluster", cluster[0], "--per-op"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "PER_OP is not available with --cluster" in err
    assert not list_sessions(in_tmp_cwd / "results")
    # The refused sweep's client is gone too: left open, it would try to reconnect long after the CLI ended.
    from distributed import Client

    with Client(cluster[0], set_as_default=False) as probe:
        clients = probe.run_on_scheduler(lambda dask_scheduler: sorted(dask_scheduler.clients))
        assert set(clients) <= {probe.id, "fire-and-forget"}, clients


@two_cores
def test_external_data_leaving_the_models_folder_is_refused_in_one_line(cluster, capsys, in_tmp_cwd: Path) -> None:
    model, location = make_escaping_model(in_tmp_cwd, "dotdot")
    capsys.readouterr()
    assert main(["profile", str(model), "--backend", "local", "--cluster", cluster[0], "--repeats", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(model) in err and "'W'" in err and repr(location) in err
    assert not list_sessions(in_tmp_cwd / "results")


@two_cores
def test_workers_run_a_model_with_its_external_data_beside_their_copy(cluster, in_tmp_cwd: Path) -> None:
    """The workers get the model's data file with the model, at its place beside it, and nothing else of its folder."""
    model = make_external_data_model(in_tmp_cwd / "models" / "model.onnx", "parts/weights.bin")
    (model.parent / "other.bin").write_bytes(b"beside the model, but not the model's")
    results = in_tmp_cwd / "results"
    assert main(["profile", str(model), "--backend", "local", "--cluster", cluster[0], "--repeats", "4",
                 "--script", str(WORKLOADS / "model_folder.py"), "--results-dir", str(results)]) == 0
    runs = load_runs(list_sessions(results)[0])
    assert [run["status"] for run in runs] == ["ok"] * 4, runs[0]["stderr_tail"]
    assert {run["node"]["worker_name"] for run in runs} == {"head", "node"}
    for run in runs:
        assert run["metrics"] == {"y0": float(EXTERNAL_WEIGHT[:, 0].sum()), "files": "model.onnx,parts"}


@two_cores
def test_workers_run_models_on_ncnn_and_a_refused_one_is_kept_as_errors(cluster, in_tmp_cwd: Path, tiny_onnx: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The driver converts; the workers get each converted .param with its .bin beside it. A model ncnn cannot run is
    not sent to them: its runs are kept as errors with the refusal's line."""
    pytest.importorskip("ncnn", reason="the ncnn extra is not installed (make test installs it)")
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(in_tmp_cwd / "cache"))
    hardmax = make_hardmax_model(in_tmp_cwd / "hardmax.onnx")
    results = in_tmp_cwd / "results"
    assert main(["profile", str(tiny_onnx), str(hardmax), "--runtime", "ncnn", "--backend", "local", "--cluster",
                 cluster[0], "--repeats", "2", "--iterations", "20", "--results-dir", str(results)]) == 0
    runs = load_runs(list_sessions(results)[0])
    ran = [run for run in runs if run["model_name"] == "tiny_mlp"]
    assert [run["status"] for run in ran] == ["ok"] * 2, ran[0]["stderr_tail"]
    assert all(run["node"] and run["conditions"]["runtime"].startswith("ncnn ") for run in ran)
    refused = [run for run in runs if run["model_name"] == "hardmax"]
    assert [run["status"] for run in refused] == ["error"] * 2 and not any(run.get("node") for run in refused)
    assert all("ncnn has no operator Hardmax" in run["stderr_tail"] for run in refused)


@two_cores
def test_sweep_across_head_and_worker_survives_a_killed_worker(cluster, tmp_path: Path, tiny_onnx: Path,
                                                               workloads: Path) -> None:
    address, node = cluster
    results = tmp_path / "results"
    sweep = _sweep(address, results, tiny_onnx, workloads)
    before_kill = _stored_until(results, sweep, lambda runs: any(r["node"]["worker_name"] == "node" for r in runs))
    time.sleep(0.5)  # the node is mid-run again: each worker takes its next run at once
    _kill(node)
    out, err = sweep.communicate(timeout=300)
    assert sweep.returncode == 0, err
    (session,) = list_sessions(results)
    own = cgroups.discover()  # the killed attempt's cgroup was cleared when its run was retried here
    assert not [p for d in own.dirs.values() for p in d.glob(f"harness-{session.name}*")]
    runs, info = load_runs(session), load_session_info(session)
    planned = [spec["run_id"] for spec in info["plan"]]
    stored = [run["run_id"] for run in runs]
    assert len(stored) == len(set(stored)), "a run was stored twice"
    assert set(stored) | set(info["not_run"]) == set(planned) and not set(stored) & set(info["not_run"])
    assert {run["run_id"] for run in before_kill} <= set(stored), "a finished run was lost"
    assert all(run["status"] == "ok" for run in runs)
    workers = {run["node"]["worker_name"] for run in runs}
    assert workers == {"head", "node"}
    for run in runs:  # each run names its node, and its provenance is that node's
        assert run["node"]["hostname"] == run["provenance"]["hostname"] and run["provenance"]["kernel"]
        assert run["metrics"]["cores"] == str(CORES[-1] if run["node"]["worker_name"] == "head" else CORES[0])
    last_on_node = max(run["metrics"]["t_end"] for run in runs if run["node"]["worker_name"] == "node")
    assert any(run["metrics"]["t_start"] > last_on_node for run in runs), "no run completed after the kill"
    summary = json.loads(out)
    assert sum(entry["n_runs"] for entry in summary["models"]) == len(runs)


def test_cluster_without_the_extra_is_one_line(capsys, in_tmp_cwd: Path, tiny_onnx: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # as if the extra were not installed
    capsys.readouterr()
    assert main(["sweep", str(tiny_onnx), "--backend", "local", "--cluster", "tcp://127.0.0.1:1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "pip install -e '.[cluster]'" in err
