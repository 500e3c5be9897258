"""SIGTERM and SIGHUP stop a real session the way Ctrl-C does, on the local and Docker backends; a session killed
outright (SIGKILL) leaves cgroups that the next session, or `harness doctor`, removes by its session id, and no one
else's."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from harness.backends.local import LocalBackend
from harness.core.interrupts import INTERRUPT_EXIT_BASE
from harness.measure import cgroups, leases
from harness.store.results import list_sessions, load_runs, load_session_info
from tests.conftest import docker_image, docker_required

HARNESS = [sys.executable, "-m", "harness.cli"]
ENV = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
MODEL = Path(__file__).resolve().parent.parent / "examples" / "models" / "mobilenet_v1_0.25_128.onnx"
CGROUP_ROOT = Path("/sys/fs/cgroup")
REPEATS = 4
# About half a second per run here: the signal lands while the second run is in flight.
SESSION_ARGS = ["--repeats", str(REPEATS), "--iterations", "300", "--warmup", "5"]


def cgroups_named(*parts: str) -> list[str]:
    """Every cgroup under /sys/fs/cgroup, of any controller, whose name contains one of `parts`."""
    return [os.path.join(root, name) for root, names, _ in os.walk(CGROUP_ROOT) for name in names
            if any(part in name for part in parts)]


def start(results: Path, backend: str) -> subprocess.Popen[str]:
    return subprocess.Popen([*HARNESS, "profile", str(MODEL), "--backend", backend, "--results-dir", str(results),
                             *SESSION_ARGS], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV, text=True)


def session_with_runs(results: Path, process: subprocess.Popen[str], count: int = 1, within_s: float = 60) -> Path:
    """The session folder once `count` runs are kept in it."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline and process.poll() is None:
        sessions = list_sessions(results)
        if sessions and len(load_runs(sessions[0])) >= count:
            return sessions[0]
        time.sleep(0.02)
    process.kill()
    raise AssertionError(f"no {count} runs kept within {within_s} s: {process.communicate()[1]}")


def alive(process: psutil.Process) -> bool:
    """Still running (a zombie has ended: only its parent, maybe init of a container, has not reaped it yet)."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def docker_usable() -> None:
    from harness.backends.docker import DockerBackend, engine_status

    usable, why = engine_status(docker_image())
    if usable:
        backend = DockerBackend(docker_image())
        matches = backend.describe()["image_matches_checkout"]
        backend.close()
        usable, why = matches, f"image {docker_image()} was built from other sources than this checkout"
    if not usable:
        if docker_required():
            pytest.fail(f"HARNESS_REQUIRE_DOCKER=1 but {why}")
        pytest.skip(why)


def containers_of(session_id: str) -> list[str]:
    """The ids of the containers the engine holds for `session_id`."""
    import docker

    client = docker.from_env()
    try:
        found = client.containers.list(all=True, filters={"label": f"org.harness.session={session_id}"})
        return [container.id for container in found]
    finally:
        client.close()


@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_stop_signal_mid_run_is_ctrl_c(in_tmp_cwd: Path, backend: str, stop: signal.Signals) -> None:
    if backend == "docker":
        docker_usable()
    results = in_tmp_cwd / "results"
    process = start(results, backend)
    session = session_with_runs(results, process)
    time.sleep(0.2)  # the second run is now in flight
    harness = psutil.Process(process.pid)
    children = harness.children(recursive=True)  # local: the runner in flight, the one started ahead, their scripts
    containers = containers_of(session.name) if backend == "docker" else []  # docker: the run's container
    assert children if backend == "local" else containers
    process.send_signal(stop)
    _, err = process.communicate(timeout=60)

    assert process.returncode == INTERRUPT_EXIT_BASE + stop, err
    assert "Traceback" not in err, err
    resume_lines = [line for line in err.splitlines() if "--resume" in line]
    assert len(resume_lines) == 1, err
    assert resume_lines[0].startswith(f"harness: interrupted by {stop.name}; completed runs are kept ("), err
    kept = load_runs(session)
    assert 1 <= len(kept) < REPEATS and all(run["status"] == "ok" for run in kept)
    assert f"{len(kept)} finished run" in resume_lines[0]
    assert load_session_info(session)["state"] == "interrupted"
    assert not [child for child in children if alive(child)]
    assert not cgroups_named(session.name, *containers)
    if backend == "docker":
        assert containers_of(session.name) == []

    command = resume_lines[0].split("`")[1]
    assert command.startswith("harness profile --resume ")
    resumed = subprocess.run([*HARNESS, *shlex.split(command)[1:], "--json"], capture_output=True, text=True,
                             env=ENV, timeout=120, cwd=in_tmp_cwd)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["models"][0]["n_runs"] == REPEATS
    runs = load_runs(session)
    assert {run["run_id"] for run in kept} <= {run["run_id"] for run in runs}
    assert len({run["run_id"] for run in runs}) == len(runs) == REPEATS
    assert load_session_info(session)["state"] == "complete"
    assert not cgroups_named(session.name)
    if backend == "docker":
        assert containers_of(session.name) == []


@pytest.fixture
def live_other_session() -> Iterator[list[Path]]:
    """A run cgroup of another session, alive: this process holds its lease."""
    backend = LocalBackend()
    if backend.parent is None:
        pytest.skip(f"no run cgroups here: {backend.reason}")
    other = f"other-{os.getpid()}"
    lease = leases.Lease(other, backend.cgroup_folders())
    made = cgroups.make_run_cgroup(backend.parent, f"harness-{other}-r000-0000")
    yield sorted(set(made.dirs.values()))
    made.remove()
    lease.release()
    backend.close()


def killed_between_runs(results: Path) -> tuple[str, list[str]]:
    """A session killed with SIGKILL between two runs, with the runner it had started ahead waiting: its id and the
    cgroups it left."""
    process = start(results, "local")
    session = session_with_runs(results, process)
    deadline = time.monotonic() + 30
    while not cgroups_named(f"{session.name}-next-") and time.monotonic() < deadline:
        time.sleep(0.01)
    process.kill()
    process.wait()
    return session.name, cgroups_named(session.name)


@pytest.mark.parametrize("who", ["next session", "its resume", "doctor"])
def test_a_killed_sessions_cgroups_are_removed_by_its_id(in_tmp_cwd: Path, live_other_session: list[Path],
                                                        who: str) -> None:
    dead, left = killed_between_runs(in_tmp_cwd / "results")
    assert any(f"{dead}-next-" in path for path in left), left  # what the issue saw: the runner's cgroups ahead
    if who == "doctor":
        done = subprocess.run([*HARNESS, "doctor"], capture_output=True, text=True, env=ENV, timeout=60,
                              cwd=in_tmp_cwd)
        assert done.returncode == 0 and f"session {dead}" in done.stdout, done.stdout + done.stderr
    else:
        argv = (["--resume", dead, "--results-dir", str(in_tmp_cwd / "results")] if who == "its resume" else
                [str(MODEL), "--backend", "local", "--repeats", "1", "--iterations", "5", "--results-dir",
                 str(in_tmp_cwd / "next")])
        done = subprocess.run([*HARNESS, "profile", *argv], capture_output=True, text=True, env=ENV, timeout=60)
        assert done.returncode == 0, done.stderr
        assert f"note: removed {len(left)} cgroups that session {dead} left (its harness was killed)" in done.stderr
    assert not cgroups_named(dead)
    if who == "its resume":
        assert load_session_info(in_tmp_cwd / "results" / dead)["state"] == "complete"
    assert all(path.is_dir() for path in live_other_session)  # another session's, alive: untouched


def test_the_probe_cgroup_of_a_harness_killed_as_it_started_is_removed(live_other_session: list[Path]) -> None:
    """A harness killed while its backend probed the isolation left `harness-probe-<pid>`: the next one removes it once
    that pid has gone, and leaves a live harness's probe alone."""
    backend = LocalBackend()
    assert backend.parent is not None  # live_other_session skipped otherwise
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True).stdout.strip()
    dead = cgroups.make_run_cgroup(backend.parent, f"{leases.PROBE_PREFIX}{gone}")
    live = cgroups.make_run_cgroup(backend.parent, f"{leases.PROBE_PREFIX}{os.getppid()}")  # not this process's own
    try:
        assert all(path.is_dir() for path in dead.dirs.values())
        swept = LocalBackend().swept
        assert swept[f"pid {gone}"] == sorted(set(dead.dirs.values()))
        assert not any(path.exists() for path in dead.dirs.values())
        assert all(path.is_dir() for path in live.dirs.values())
    finally:
        live.remove()
        dead.remove()
        backend.close()


def test_a_hangup_after_the_terminal_has_gone_still_ends_interrupted(in_tmp_cwd: Path) -> None:
    """A closed terminal: whatever the harness writes to it fails, yet the session is kept, marked interrupted, leaves
    no cgroup, and the harness exits as SIGHUP's interruption (129), not with a traceback's 1."""
    results = in_tmp_cwd / "results"
    process = start(results, "local")
    session = session_with_runs(results, process)
    assert process.stderr is not None
    process.stderr.close()  # the terminal is gone: every write to stderr now fails
    time.sleep(0.2)
    process.send_signal(signal.SIGHUP)
    assert process.wait(timeout=60) == INTERRUPT_EXIT_BASE + signal.SIGHUP
    assert load_session_info(session)["state"] == "interrupted" and load_runs(session)
    assert not cgroups_named(session.name)


def test_a_terminal_that_goes_away_mid_session_stops_nothing(in_tmp_cwd: Path) -> None:
    """A progress line whose terminal has gone (stderr closed, no signal) is dropped: the session runs to its end and
    keeps every run, where rich's broken-pipe exit once ended it after the run in flight."""
    results = in_tmp_cwd / "results"
    process = start(results, "local")
    session = session_with_runs(results, process)
    assert process.stderr is not None
    process.stderr.close()
    process.wait(timeout=120)
    assert load_session_info(session)["state"] == "complete"
    assert len(load_runs(session)) == len(load_session_info(session)["plan"])
