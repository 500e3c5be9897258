"""The Docker backend against a real engine and the image `make image` built: limits, exact peaks, outcomes,
lockdown, cleanup. Skipped with the reason when no engine or no current image is there, unless
HARNESS_REQUIRE_DOCKER=1 (CI), where that is a failure."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import docker
import pytest

from harness.backends.docker import (
    DEADLINE_LABEL,
    LABEL,
    NAME_PREFIX,
    OWNER_LABEL,
    PIDS_LIMIT,
    DockerBackend,
    Finished,
    container_name,
    engine_status,
    owner_label,
)
from harness.backends.docker_results import reported_ok
from harness.backends.local import LocalBackend
from harness.cli import main
from harness.core.errors import BackendError, ModelError
from harness.measure.spec import RunSpec
from harness.models.resolve import ModelInfo, resolve_model
from harness.store.results import list_sessions
from tests.conftest import (
    ESCAPES,
    EXTERNAL_WEIGHT,
    WORKLOADS,
    docker_image,
    docker_required,
    make_escaping_model,
    make_external_data_model,
    make_matmul_model,
)
from tests.helpers import INTERRUPTED_EXITS, ctrl_c_handled, entry, profile_json, run_fields, run_spec, session_runs

pytestmark = pytest.mark.docker
IMAGE = docker_image()
# Loop iterations per process: about 1.8 s of one core here. The engine's own work right after a container
# starts (about 0.1 s of CPU) competes with a run that uses every host core, so the work must dwarf it.
BURN_WORK = "50000000"
MIB = 1024 * 1024


def unavailable(reason: str) -> None:
    if docker_required():
        pytest.fail(f"HARNESS_REQUIRE_DOCKER=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def backend() -> Iterator[DockerBackend]:
    usable, why = engine_status(IMAGE)
    if not usable:
        unavailable(why)
    instance = DockerBackend(IMAGE)
    if not instance.describe()["image_matches_checkout"]:
        unavailable(f"image {IMAGE} was built from other sources than this checkout (run `make image`)")
    yield instance
    instance.close()


@pytest.fixture(scope="module")
def engine(backend: DockerBackend) -> Iterator[docker.DockerClient]:
    client = docker.from_env()
    yield client
    client.close()


def containers_of(client: docker.DockerClient, session_id: str) -> list[Any]:
    return client.containers.list(all=True, filters={"label": f"org.harness.session={session_id}"})


def left_behind(backend: DockerBackend, client: docker.DockerClient, session_id: str) -> list[Any]:
    """The session's containers once the backend's removals (off each run's critical path) are done."""
    backend.removals.settle()
    return containers_of(client, session_id)


def make_spec(script: Path, *args: str, model: Path, cpus: float = 1.0, memory_mib: int = 256,
              timeout_s: float = 60.0, session_id: str | None = None) -> RunSpec:
    return run_spec(script, *args, model=model, cpus=cpus, memory_mib=memory_mib, timeout_s=timeout_s,
                    session_id=session_id, image=IMAGE)


def docker_profile(capsys, results: Path, engine: docker.DockerClient, model: Path, *args: str) -> dict[str, Any]:
    summary = profile_json(capsys, results, str(model), "--backend", "docker", *args)
    assert summary["backend"] == "docker" and summary["isolation"] == "docker"
    assert containers_of(engine, summary["session_id"]) == []
    return summary


def test_profile_through_docker_names_the_image(capsys, in_tmp_cwd: Path, tiny_onnx: Path,
                                                engine: docker.DockerClient) -> None:
    results = in_tmp_cwd / "results"
    summary = docker_profile(capsys, results, engine, tiny_onnx, "--repeats", "2", "--iterations", "50")
    runs = session_runs(results)
    image = engine.images.get(IMAGE)
    assert entry(summary, "tiny_mlp")["statuses"] == {"ok": 2}
    for run in runs:
        assert run["backend"] == "docker" and run["status"] == "ok" and run["latency_stats_ms"]["n"] == 50
        info = run["provenance"]["backend"]
        assert info["image"] == IMAGE and info["image_id"] == image.id
        assert info["engine_version"] == engine.version()["Version"]
        assert info["cgroup_version"] == engine.info()["CgroupVersion"]
        assert info["image_packages"]["onnxruntime"]
        assert run["container"]["name"].startswith(NAME_PREFIX) and run["overhead_s"] > 0
        assert run["peak_source"] == "kernel" and run["cgroup_version"] == int(info["cgroup_version"])


def test_auto_picks_docker_only_with_the_image(backend: DockerBackend) -> None:
    assert engine_status(IMAGE) == (True, f"docker, since an engine answers and image {IMAGE} exists")
    missing = "harness-runtime:no-such-tag"
    assert engine_status(missing) == (False, f"image {missing} does not exist (run `make image`)")
    with pytest.raises(BackendError, match=f"Docker image {missing} does not exist; run `make image`"):
        DockerBackend(missing)


def test_missing_framework_is_named_before_any_run(backend: DockerBackend, engine: docker.DockerClient,
                                                  tmp_path: Path) -> None:
    if "torch" in backend.describe()["image_modules"]:
        pytest.skip(f"image {IMAGE} was built with TORCH=1")
    model = tmp_path / "net.pt"
    model.write_bytes(b"not loaded: the check comes first")
    model.chmod(0o644)
    spec = make_spec(Path(__file__).resolve().parent.parent / "bench_scripts" / "torch_bench.py", model=model)
    with pytest.raises(BackendError, match=r"has no torch for net.pt; rebuild it with `make image TORCH=1`"):
        run_fields(backend, spec)
    assert containers_of(engine, spec.session_id) == []
    # The session asks before its first run: the same line, from the models alone.
    info = ModelInfo("net", model, "torch", Path(spec.script), "0" * 64, 0.0)
    with pytest.raises(BackendError, match=r"has no torch for net.pt; rebuild it with `make image TORCH=1`"):
        backend.check([info])


ENGINES = [("ncnn", "ncnn", "ncnn", "NCNN=1"), ("litert", "ai_edge_litert", "ai-edge-litert", "LITERT=1")]
"""RUNTIME -> the module the image needs, its package (the runtime condition's name), the `make image` option."""


@pytest.mark.parametrize(("runtime", "module", "package", "option"), ENGINES, ids=[e[0] for e in ENGINES])
def test_a_model_on_another_engine_runs_in_the_container_or_is_refused_in_one_line(
        capsys, in_tmp_cwd: Path, tiny_onnx: Path, backend: DockerBackend, engine: docker.DockerClient,
        monkeypatch: pytest.MonkeyPatch, runtime: str, module: str, package: str, option: str) -> None:
    """An image built with NCNN=1 (LITERT=1) runs the model converted on the host (an ncnn .bin mounted beside its
    .param; a .tflite) on the image's engine; any other image refuses the session before a container starts, naming
    the option."""
    pytest.importorskip(module, reason=f"the {runtime} extra is not installed (make test installs it)")
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(in_tmp_cwd / "cache"))
    try:
        resolve_model(str(tiny_onnx), runtime=runtime)  # converts on the host, as the session does
    except ModelError as err:
        pytest.skip(str(err))
    results = in_tmp_cwd / "results"
    flags = ("--runtime", runtime, "--repeats", "2", "--iterations", "20", "--warmup", "2")
    info = backend.describe()
    if module in info["image_modules"]:
        assert engine_status(IMAGE, runtime)[0]
        docker_profile(capsys, results, engine, tiny_onnx, *flags)
        runs = session_runs(results)
        assert [r["status"] for r in runs] == ["ok", "ok"] and all(r["latency_stats_ms"]["n"] == 20 for r in runs)
        assert {r["conditions"]["runtime"] for r in runs} == {f"{package} {info['image_packages'][package]}"}
        return
    capsys.readouterr()
    assert main(["profile", "--results-dir", str(results), str(tiny_onnx), "--backend", "docker", *flags]) == 3
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("harness: error:")]
    assert len(errors) == 1 and f"image {IMAGE} has no {module} for tiny_mlp-" in errors[0]
    assert errors[0].endswith(f"; rebuild it with `make image {option}` or use BACKEND=local")
    assert not any(results.glob("*/runs.jsonl"))  # refused before the first run
    # BACKEND=auto reads the image's engines from its label and runs such a session locally instead.
    assert engine_status(IMAGE, runtime) == (False, f"image {IMAGE} has no {runtime} for RUNTIME={runtime} "
                                                    f"(`make image {option}` adds it)")
    assert main(["profile", "--results-dir", str(results), str(tiny_onnx), "--backend", "auto", *flags]) == 0
    assert {r["backend"] for r in session_runs(results)} == {"local"}


def test_cpu_limit_holds(capsys, in_tmp_cwd: Path, tiny_onnx: Path, workloads: Path,
                         engine: docker.DockerClient) -> None:
    times, parallel = {}, {}
    for cpus in ("2", "1", "0.5"):
        results = in_tmp_cwd / f"results-{cpus}"
        # Five repeats: the fastest of three was still slowed by the host's other load now and then (a CPUS=1
        # minimum 5% over its share of the CPUS=2 work), which is what the minimum is there to leave out.
        docker_profile(capsys, results, engine, tiny_onnx, "--cpus", cpus, "--repeats", "5",
                       "--script", str(workloads / "cpu_burn.py"), "--", "2", BURN_WORK)
        runs = session_runs(results)
        assert all(r["limits_requested"]["cpu_mode"] == ("quota" if cpus == "0.5" else "pinned") for r in runs)
        # The engine's HostConfig holds what was asked: 0.5 CPUS as a 50 ms quota per 100 ms, whole CPUS as cores.
        assert all(r["limits_applied"]["cpu_mode"] == r["limits_requested"]["cpu_mode"] for r in runs)
        assert all(r["limits_applied"]["cpus"] == float(cpus) for r in runs)
        # The fastest repeat is the one least disturbed by other load on the host (timeit's rationale);
        # a limit that did not hold would make every repeat fast.
        times[cpus] = min(r["runtime_s"] for r in runs if r["status"] == "ok")
        parallel[cpus] = sorted(r["cpu_s"] / r["runtime_s"] for r in runs if r["status"] == "ok")
    # Cores kept busy at once (CPU time over wall time), as in the local test: SMT siblings slow two busy
    # processes down, which bends the CPUS=1/CPUS=2 runtime ratio (1.35 seen in CI) but not this.
    assert max(parallel["1"]) <= 1.05, parallel
    assert parallel["2"][len(parallel["2"]) // 2] >= 1.6, parallel
    assert times["0.5"] / times["1"] >= 1.8, times


def test_peak_memory_is_exact(backend: DockerBackend, workloads: Path, tiny_onnx: Path) -> None:
    alloc = workloads / "alloc.py"
    run_fields(backend, make_spec(alloc, "0", model=tiny_onnx))  # warms the page cache
    baseline = run_fields(backend, make_spec(alloc, "0", model=tiny_onnx))["peak_memory_mib"]
    for n_mib in (64, 200):
        run = run_fields(backend, make_spec(alloc, str(n_mib), model=tiny_onnx, memory_mib=512))
        assert run["status"] == "ok" and run["peak_source"] == "kernel"
        assert abs(run["peak_memory_mib"] - (baseline + n_mib)) <= max(0.02 * n_mib, 3.0), (n_mib, baseline, run)


def test_oom_is_recorded_and_session_goes_on(capsys, in_tmp_cwd: Path, tiny_onnx: Path, workloads: Path,
                                             engine: docker.DockerClient) -> None:
    results = in_tmp_cwd / "results"
    summary = docker_profile(capsys, results, engine, tiny_onnx, "--memory", "128m", "--repeats", "2",
                             "--script", str(workloads / "alloc.py"), "--", "300")
    runs = session_runs(results)
    assert [r["status"] for r in runs] == ["oom", "oom"]
    assert all(r["container"]["oom_killed"] and r["peak_memory_mib"] <= 128.5 for r in runs)
    assert entry(summary, "tiny_mlp")["statuses"] == {"oom": 2}


def test_runner_killed_at_the_limit_is_not_the_models_oom(backend: DockerBackend, engine: docker.DockerClient,
                                                          workloads: Path, tiny_onnx: Path) -> None:
    """Below what the runner needs (the CLI refuses MEMORY < 16 MiB) the engine's flag tells of an OOM kill, but the
    model never ran: an error naming the runner, not the model's oom. The runner alone fits in the engine's smallest
    limit (6 MiB), so the spec it reads is made bigger than that: 8 MiB of script arguments."""
    spec = make_spec(workloads / "alloc.py", "0", *["x" * 4096] * 2048, model=tiny_onnx, memory_mib=6)
    run = run_fields(backend, spec)
    assert run["status"] == "error" and run["container"]["oom_killed"] and run["signal"] == 9
    assert "runner was killed at the memory limit" in run["stderr_tail"]
    assert left_behind(backend, engine, spec.session_id) == []


def test_timeout_and_crash_statuses_and_nothing_left(backend: DockerBackend, engine: docker.DockerClient,
                                                     workloads: Path, tiny_onnx: Path) -> None:
    timeout = make_spec(workloads / "sleep.py", "60", model=tiny_onnx, timeout_s=1.5)
    started = time.monotonic()
    run = run_fields(backend, timeout)
    assert run["status"] == "timeout" and 1.5 <= run["runtime_s"] < 3.0
    assert time.monotonic() - started < 10
    crash = make_spec(workloads / "crash.py", model=tiny_onnx)
    run = run_fields(backend, crash)
    assert run["status"] == "error" and run["exit_code"] == 3
    assert "loading model failed" in run["stderr_tail"]
    for spec in (timeout, crash):
        assert left_behind(backend, engine, spec.session_id) == []


def test_container_past_the_grace_is_killed_from_outside(backend: DockerBackend, engine: docker.DockerClient,
                                                        monkeypatch: pytest.MonkeyPatch, workloads: Path,
                                                        tiny_onnx: Path) -> None:
    """The runner stops its script at TIMEOUT_S; should the runner itself hang, the backend kills the
    container GRACE_S later. A negative grace stands in for the hung runner: the kill comes at 2 s."""
    monkeypatch.setattr(backend, "grace_s", -28.0)
    spec = make_spec(workloads / "sleep.py", "60", model=tiny_onnx, timeout_s=30.0)
    run = run_fields(backend, spec)
    assert run["status"] == "timeout" and "did not stop in time" in run["stderr_tail"]
    assert 2.0 <= run["runtime_s"] < 5.0
    assert left_behind(backend, engine, spec.session_id) == []


def test_parallel_sessions_with_equal_run_ids_never_collide(backend: DockerBackend, engine: docker.DockerClient,
                                                            workloads: Path, tiny_onnx: Path) -> None:
    spec = make_spec(workloads / "alloc.py", "8", "1.0", model=tiny_onnx)  # held 1 s: the two overlap
    results: list[dict[str, Any]] = []

    def session() -> None:
        own = DockerBackend(IMAGE)
        results.append(run_fields(own, spec))
        own.close()

    threads = [threading.Thread(target=session) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [r["status"] for r in results] == ["ok", "ok"]
    assert results[0]["container"]["name"] != results[1]["container"]["name"]
    assert containers_of(engine, spec.session_id) == []


def test_orphans_of_a_killed_harness_are_swept_by_the_next_session(backend: DockerBackend,
                                                                   engine: docker.DockerClient) -> None:
    """A harness killed with SIGKILL removes nothing; its containers carry a deadline the next one honours."""
    session = f"test-{uuid.uuid4().hex[:8]}"
    now = int(time.time())
    made = {when: engine.containers.create(backend.image_id, ["sleep", "600"], labels={
        "org.harness.session": session, LABEL: f"{session}-{when}", DEADLINE_LABEL: str(now + offset)})
        for when, offset in (("past", -1), ("future", 600))}
    made["past"].start()
    try:
        fresh = DockerBackend(IMAGE)
        fresh.close()
        left = {c.labels[LABEL] for c in containers_of(engine, session)}
        assert fresh.orphans_removed >= 1 and left == {f"{session}-future"}
    finally:
        for container in containers_of(engine, session):
            container.remove(force=True)


def test_ctrl_c_removes_the_container(backend: DockerBackend, engine: docker.DockerClient, workloads: Path,
                                      tiny_onnx: Path) -> None:
    spec = make_spec(workloads / "sleep.py", "60", model=tiny_onnx)
    main_thread = threading.get_ident()
    timer = threading.Timer(2.0, signal.pthread_kill, (main_thread, signal.SIGINT))
    # Ctrl-C raises KeyboardInterrupt even where the suite was started with SIGINT ignored (a background job).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    started = time.monotonic()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_fields(backend, spec)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert time.monotonic() - started < 15
    assert containers_of(engine, spec.session_id) == []



def test_each_container_is_removed_off_the_critical_path_yet_before_the_next_one_starts(
        backend: DockerBackend, engine: docker.DockerClient, workloads: Path, tiny_onnx: Path) -> None:
    """A run returns before its container is removed, and the engine removes it while the harness stores the run;
    the next container starts only once the last one is gone (the engine's own events say when), and nothing is
    left once the removals settle."""
    session = f"test-{uuid.uuid4().hex[:8]}"
    since = time.time() - 1
    specs = [replace(make_spec(workloads / "alloc.py", "0", "0", model=tiny_onnx, session_id=session),
                     run_id=f"{session}-{index}") for index in range(3)]
    assert [run_fields(backend, spec)["status"] for spec in specs] == ["ok"] * 3
    assert left_behind(backend, engine, session) == []
    events = list(engine.events(since=since, until=time.time() + 1, decode=True,
                                filters={"type": "container", "label": f"org.harness.session={session}"}))
    when = {(event["Actor"]["Attributes"][LABEL], event["Action"]): event["timeNano"] for event in events}
    for earlier, later in zip(specs, specs[1:], strict=False):
        assert when[earlier.run_id, "destroy"] < when[later.run_id, "start"], when


def contained(backend: DockerBackend, shell: str, session: str) -> Finished | None:
    """A hardened container running `shell` (sh -c), its first stdout line taken as its whole outcome when it reports
    a run that went well, as a run's is."""
    return backend._contain(["sh", "-c", shell], name=container_name(session), labels={LABEL: session},
                            timeout_s=60.0, reported=reported_ok, mem_limit=64 * MIB)


def test_a_run_is_over_when_its_runner_has_reported(backend: DockerBackend, engine: docker.DockerClient) -> None:
    """A container that reports a run that went well and then lives on 3 s: its outcome is its report, read at once,
    its end (by itself, exit 0: not killed) is waited for by the removals, and it is gone once they settle."""
    session = f"test-{uuid.uuid4().hex[:8]}"
    since = time.time() - 1
    done = contained(backend, 'echo \'{"status": "ok", "runtime_s": 1}\'; exec sleep 3', session)
    assert done is not None and done.state is None and done.stdout.strip() == '{"status": "ok", "runtime_s": 1}'
    assert done.elapsed_s < 2.0, done
    assert done.host_config["Memory"] == 64 * MIB
    settled = time.monotonic()
    assert engine.containers.list(all=True, filters={"label": f"{LABEL}={session}"}) != []
    backend.removals.settle()
    assert time.monotonic() - settled > 0.5
    assert engine.containers.list(all=True, filters={"label": f"{LABEL}={session}"}) == []
    events = list(engine.events(since=since, until=time.time() + 1, decode=True,
                                filters={"type": "container", "label": f"{LABEL}={session}", "event": "die"}))
    assert [event["Actor"]["Attributes"]["exitCode"] for event in events] == ["0"], events


def test_a_failed_report_waits_for_the_containers_end(backend: DockerBackend, engine: docker.DockerClient) -> None:
    """A report of a run that did not go well is not the whole outcome: the engine's view of the container's end
    (exit status, OOMKilled) is read once it has ended."""
    session = f"test-{uuid.uuid4().hex[:8]}"
    done = contained(backend, 'echo \'{"status": "error"}\'; sleep 1; exit 7', session)
    assert done is not None and done.state is not None and done.state["ExitCode"] == 7
    assert done.elapsed_s >= 1.0 and done.stdout.strip() == '{"status": "error"}'
    assert left_behind(backend, engine, session) == []


def test_ctrl_c_mid_session_keeps_runs_and_leaves_no_container(in_tmp_cwd: Path, engine: docker.DockerClient,
                                                               backend: DockerBackend, workloads: Path,
                                                               tiny_onnx: Path) -> None:
    """Interrupted while a run is in flight, with the container of the run before it still being removed: the
    finished run is kept and, by the time the harness has exited, no container of the session is left."""
    results = in_tmp_cwd / "results"
    argv = [sys.executable, "-m", "harness.cli", "profile", str(tiny_onnx), "--backend", "docker", "--repeats", "4",
            "--results-dir", str(results), "--script", str(workloads / "alloc.py"), "--", "8", "1.0"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True,
                               preexec_fn=ctrl_c_handled)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (list_sessions(results) and session_runs(results)):
        time.sleep(0.02)
    time.sleep(0.5)  # the second run's container is up
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode in INTERRUPTED_EXITS, err
    runs = session_runs(results)
    assert 1 <= len(runs) < 4 and all(run["status"] == "ok" for run in runs)
    assert containers_of(engine, runs[0]["session_id"]) == []

LOCKDOWN_PROBE = '''
import os, socket
from harness.measure.report_protocol import report

def refused(action):
    try:
        action()
    except OSError:
        return True
    return False

status = dict(line.split(":\\t", 1) for line in open("/proc/self/status").read().splitlines() if ":\\t" in line)
report(uid=os.getuid(), cap_eff=status["CapEff"].strip(), no_new_privs=status["NoNewPrivs"].strip(),
       rootfs_read_only=refused(lambda: open("/usr/probe", "w")),
       model_read_only=refused(lambda: open(os.environ["HARNESS_MODEL"], "a")),
       tmp_writable=not refused(lambda: open("/tmp/probe", "w")),
       network_refused=refused(lambda: socket.create_connection(("1.1.1.1", 53), timeout=2)),
       interfaces=",".join(sorted(os.listdir("/sys/class/net"))))

def first(*paths):
    for path in paths:
        if os.path.exists(path):
            return open(path).read().strip()
    return None

v1, v2 = "/sys/fs/cgroup/{}/{}", "/sys/fs/cgroup/{}"
cpu_max = first(v2.format("cpu.max"))
quota, period = cpu_max.split() if cpu_max else (first(v1.format("cpu", "cpu.cfs_quota_us")),
                                                 first(v1.format("cpu", "cpu.cfs_period_us")))
report(cpu_quota=quota, cpu_period=period,
       cpuset=first(v2.format("cpuset.cpus"), v1.format("cpuset", "cpuset.cpus")),
       memory_limit=first(v2.format("memory.max"), v1.format("memory", "memory.limit_in_bytes")),
       memory_swap_limit=first(v1.format("memory", "memory.memsw.limit_in_bytes")),
       swap_limit=first(v2.format("memory.swap.max")),
       pids_max=first(v2.format("pids.max"), v1.format("pids", "pids.max")))
'''


def test_container_is_locked_down_with_its_limits(backend: DockerBackend, tmp_path: Path, tiny_onnx: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(LOCKDOWN_PROBE)
    probe.chmod(0o644)
    quota = run_fields(backend, make_spec(probe, model=tiny_onnx, cpus=0.5, memory_mib=200))
    assert quota["status"] == "ok", quota["stderr_tail"]
    seen = quota["metrics"]
    assert seen["uid"] != 0 and int(seen["cap_eff"], 16) == 0 and seen["no_new_privs"] == "1"
    assert seen["rootfs_read_only"] and seen["model_read_only"] and seen["tmp_writable"]
    assert seen["network_refused"] and seen["interfaces"] == "lo"
    assert int(seen["cpu_quota"]) * 2 == int(seen["cpu_period"]) and seen["memory_limit"] == str(200 * MIB)
    applied = quota["limits_applied"]
    assert (applied["cpu_mode"], applied["cpu_quota_us"], applied["memory_bytes"]) == ("quota", 50_000, 200 * MIB)
    assert seen["pids_max"] == str(PIDS_LIMIT)
    if backend.describe()["swap_capped"]:
        assert {seen.get("memory_swap_limit"), seen.get("swap_limit")} - {None} in ({str(200 * MIB)}, {"0"}), seen
    pinned = run_fields(backend, make_spec(probe, model=tiny_onnx, cpus=1))["metrics"]
    assert pinned["cpuset"] == "1" and pinned["cpu_quota"] in ("-1", "max")


def test_docker_args_reach_the_script(backend: DockerBackend, tmp_path: Path, tiny_onnx: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    (data / "labels.txt").write_text("cat\n")
    (data / "labels.txt").chmod(0o644)
    probe = tmp_path / "probe.py"
    probe.write_text("import os\nfrom harness.measure.report_protocol import report\n"
                     "report(greeting=os.environ['GREETING'], labels=open('/data/labels.txt').read().strip(),\n"
                     "       null_device=os.path.exists('/dev/net/tun'))\n")
    probe.chmod(0o644)
    args = f"-v {data}:/data -e 'GREETING=hello world' --device /dev/null:/dev/net/tun"
    extra = DockerBackend(IMAGE, docker_args=args)
    try:
        run = run_fields(extra, make_spec(probe, model=tiny_onnx))
        assert extra.describe()["docker_args"] == {"volumes": [f"{data}:/data:ro"], "env": ["GREETING"],
                                                   "devices": ["/dev/null:/dev/net/tun"]}
    finally:
        extra.close()
    assert run["status"] == "ok", run["stderr_tail"]
    assert run["metrics"] == {"greeting": "hello world", "labels": "cat", "null_device": True}


def test_docker_and_local_agree_on_memory(backend: DockerBackend, tmp_path: Path) -> None:
    """Same model and limits, runs alternated. Small weights: the interpreters differ (the image's Python is the
    base image's), and some Python builds hold more heap per MiB of weights, which is not the container's doing
    (see README). Speed is compared by benchmarks/docker_overhead.py, not here: inside the full suite CI twice
    saw one backend 11-12% slower than the other on every run, while alone they agree within 1%."""
    model = make_matmul_model(tmp_path / "mlp512.onnx", size=512, layers=4)
    script = Path(__file__).resolve().parent.parent / "bench_scripts" / "onnx_bench.py"
    spec = replace(make_spec(script, model=model, memory_mib=1024), iterations=300, warmup=20)
    local = LocalBackend()
    runs: dict[str, list[dict[str, Any]]] = {"local": [], "docker": []}
    for _ in range(3):
        runs["local"].append(run_fields(local, spec))
        runs["docker"].append(run_fields(backend, spec))
    assert all(r["status"] == "ok" and r["latency_stats_ms"]["n"] == 300 for name in runs for r in runs[name])
    local_mib, docker_mib = (statistics.median(r["peak_memory_mib"] for r in runs[name]) for name in runs)
    assert abs(docker_mib - local_mib) <= 0.10 * local_mib, (local_mib, docker_mib)


CONTAINER_START = re.compile(rb"POST \S*/containers/[^/ ]+/start[ ?]")


class EngineProxy:
    """Forwards a Unix socket to the real engine's; stop() is the engine vanishing mid-conversation.

    With `stop_at_start=n` it stops itself 0.5 s after the n-th container start request goes through,
    so "the engine died during run n" happens at a known point of a session."""

    def __init__(self, path: Path, target: str, stop_at_start: int = 0) -> None:
        self.path, self.target, self.stop_at_start, self.starts = path, target, stop_at_start, 0
        self.server = socket.socket(socket.AF_UNIX)
        self.server.bind(str(path))
        self.server.listen()
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX)
            upstream.connect(self.target)
            self.sockets += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, requests: bool) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                if requests and CONTAINER_START.match(data):
                    self.starts += 1
                    if self.starts == self.stop_at_start:
                        threading.Timer(0.5, self.stop).start()
                sink.sendall(data)

    def stop(self) -> None:
        self.server.close()
        for sock in self.sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


@pytest.fixture
def engine_socket(engine: docker.DockerClient) -> str:
    url = engine.api.base_url
    if not url.startswith("http+docker://localhost"):
        pytest.skip("the engine does not listen on a local Unix socket")
    return os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock").removeprefix("unix://")


def test_engine_lost_mid_run_is_one_clear_error(engine: docker.DockerClient, engine_socket: str, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch, workloads: Path,
                                                tiny_onnx: Path) -> None:
    proxy = EngineProxy(tmp_path / "engine.sock", engine_socket, stop_at_start=1)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{proxy.path}")
    spec = make_spec(workloads / "sleep.py", "60", model=tiny_onnx)
    lost = DockerBackend(IMAGE)
    try:
        with pytest.raises(BackendError, match=f"Docker engine stopped answering during run {spec.run_id}"):
            lost.run(spec)
    finally:
        # Here the engine itself lives on, so the container it still holds is this test's to remove.
        for container in containers_of(engine, spec.session_id):
            container.remove(force=True)


def test_engine_lost_mid_session_keeps_finished_runs(capsys, in_tmp_cwd: Path, engine: docker.DockerClient,
                                                     engine_socket: str, monkeypatch: pytest.MonkeyPatch,
                                                     workloads: Path, tiny_onnx: Path) -> None:
    # Container starts: the image probe of describe() (an empty cache: the image is probed), run 1, then run 2,
    # during which the engine goes.
    proxy = EngineProxy(in_tmp_cwd / "engine.sock", engine_socket, stop_at_start=3)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{proxy.path}")
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(in_tmp_cwd / "cache"))
    results = in_tmp_cwd / "results"
    capsys.readouterr()
    code = main(["profile", str(tiny_onnx), "--backend", "docker", "--repeats", "3", "--results-dir",
                 str(results), "--script", str(workloads / "sleep.py"), "--", "2"])
    err = capsys.readouterr().err.strip().splitlines()
    runs = session_runs(results)
    for container in containers_of(engine, runs[0]["session_id"]):
        container.remove(force=True)
    assert code == 3 and [r["status"] for r in runs] == ["ok"]
    assert err[-1].startswith("harness: error: the Docker engine stopped answering during run"), err
    assert "1 finished run kept in" in err[-1] and f"--resume {runs[0]['session_id']} --results-dir" in err[-1]


def test_exited_container_of_a_harness_that_lost_its_engine_is_removed_at_once(
        engine: docker.DockerClient, engine_socket: str, in_tmp_cwd: Path, workloads: Path, tiny_onnx: Path) -> None:
    """The issue's case: the engine goes away mid-run, the harness stops, its container exits later on its own.
    The next session removes it at once, though its deadline is minutes away."""
    proxy = EngineProxy(in_tmp_cwd / "engine.sock", engine_socket, stop_at_start=2)  # the probe's start, then run 1's
    results = in_tmp_cwd / "results"
    env = {**os.environ, "DOCKER_HOST": f"unix://{proxy.path}", "PYTHONPATH": str(Path(__file__).parents[1]),
           "HARNESS_CACHE_DIR": str(in_tmp_cwd / "cache")}  # an empty cache: the image is probed
    done = subprocess.run([sys.executable, "-m", "harness.cli", "profile", str(tiny_onnx), "--backend", "docker",
                           "--repeats", "1", "--results-dir", str(results), "--script", str(workloads / "sleep.py"),
                           "--", "3"], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 3 and "Docker engine stopped answering" in done.stderr, done.stderr
    session = list_sessions(results)[-1].name
    left = containers_of(engine, session)
    try:
        deadline = time.monotonic() + 30
        while any(c.status != "exited" for c in left) and time.monotonic() < deadline:
            time.sleep(0.5)
            left = containers_of(engine, session)
        assert [c.status for c in left] == ["exited"]
        assert int(left[0].labels[DEADLINE_LABEL]) > time.time() + 60  # only the exited rule can remove it now
        fresh = DockerBackend(IMAGE)
        fresh.close()
        assert containers_of(engine, session) == [] and fresh.orphans_removed >= 1
    finally:
        for container in containers_of(engine, session):
            container.remove(force=True)


def test_exited_container_of_a_live_harness_is_kept(backend: DockerBackend, engine: docker.DockerClient) -> None:
    """A parallel session's container that has just exited still holds its result: no other session takes it."""
    session = f"test-{uuid.uuid4().hex[:8]}"
    container = engine.containers.create(backend.image_id, ["true"], labels={
        "org.harness.session": session, LABEL: session, DEADLINE_LABEL: str(int(time.time()) + 600),
        OWNER_LABEL: owner_label()})
    try:
        container.start()
        container.wait(timeout=30)
        fresh = DockerBackend(IMAGE)
        fresh.close()
        assert [c.status for c in containers_of(engine, session)] == ["exited"]
    finally:
        container.remove(force=True)


def test_script_with_no_model_runs_in_a_container(capsys, backend: DockerBackend, in_tmp_cwd: Path,
                                                  workloads: Path) -> None:
    results = in_tmp_cwd / "results"
    profile_json(capsys, results, "--backend", "docker", "--repeats", "1", "--script", str(workloads / "job.py"),
                 "--", "2")
    run = session_runs(results)[0]
    assert run["status"] == "ok" and run["model_name"] == "job" and run["metrics"] == {"chunks": 2, "args": "2"}
    assert run["peak_memory_mib"] >= 32 and run["runtime_s"] >= 0.3


@pytest.mark.parametrize("how", ESCAPES)
def test_external_data_leaving_the_models_folder_is_refused_in_one_line(capsys, backend: DockerBackend,
                                                                        in_tmp_cwd: Path, how: str) -> None:
    model, location = make_escaping_model(in_tmp_cwd, how)
    capsys.readouterr()
    results = in_tmp_cwd / "results"
    assert main(["profile", str(model), "--backend", "docker", "--repeats", "1", "--results-dir", str(results)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err
    assert str(model) in err and "'W'" in err and repr(location) in err and not results.exists()
    with pytest.raises(ModelError, match="own folder"):  # a run handed to the backend directly: no container
        backend.run(replace(make_spec(WORKLOADS / "sleep.py", "0", model=model), external_data=(("W", location),)))


def test_a_model_runs_with_its_external_data_mounted_beside_it_and_nothing_else(capsys, in_tmp_cwd: Path,
                                                                                engine: docker.DockerClient) -> None:
    model = make_external_data_model(in_tmp_cwd / "models" / "model.onnx", "parts/weights.bin")
    (model.parent / "other.bin").write_bytes(b"beside the model, but not the model's")
    docker_profile(capsys, in_tmp_cwd / "bench", engine, model, "--repeats", "1", "--iterations", "5")
    (run,) = session_runs(in_tmp_cwd / "bench")
    assert run["status"] == "ok", run["stderr_tail"]
    assert run["model_facts"]["params"] == EXTERNAL_WEIGHT.size
    docker_profile(capsys, in_tmp_cwd / "script", engine, model, "--repeats", "1",
                   "--script", str(WORKLOADS / "model_folder.py"))
    (run,) = session_runs(in_tmp_cwd / "script")
    assert run["status"] == "ok", run["stderr_tail"]
    assert run["metrics"] == {"y0": float(EXTERNAL_WEIGHT[:, 0].sum()), "files": "model.onnx,parts"}
