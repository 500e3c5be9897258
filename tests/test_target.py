"""TARGET=ssh://... against real boards: OpenSSH servers in containers on loopback (tests/boards.py), with CPU and
memory limits of their own, set up from nothing by `harness target setup`. No mock of SSH or of the board."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness.store.results import list_sessions
from tests.boards import Board, BoardFactory, ssh_config_for
from tests.conftest import make_matmul_model
from tests.helpers import session_runs

SESSIONS = "/root/.cache/harness-target/sessions"
pytestmark = pytest.mark.board


def harness(board_config: Path, cwd: Path, *args: str, check: bool = True,
            timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """The CLI as a user runs it, with the boards' ssh_config (HARNESS_SSH_CONFIG)."""
    env = {**os.environ, "HARNESS_SSH_CONFIG": str(board_config)}
    done = subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert not check or done.returncode == 0, done.stderr
    return done


def start(board_config: Path, cwd: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "HARNESS_SSH_CONFIG": str(board_config)}
    return subprocess.Popen([sys.executable, "-m", "harness.cli", *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def one_line_error(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert "Traceback" not in stderr and lines, stderr
    return lines[-1]


def set_up(board: Board, cwd: Path, *runtimes: str) -> dict[str, Any]:
    args = [arg for runtime in runtimes or ("onnxruntime",) for arg in ("--runtime", runtime)]
    return json.loads(harness(board.config, cwd, "target", "setup", board.url, *args, "--json").stdout)


def left_on(board: Board) -> tuple[list[str], list[str]]:
    """(processes, session files) the harness left on the board: both empty after any session."""
    time.sleep(0.5)  # the agent removes its folder as it exits, just after the host has returned
    return [p.args for p in board.processes()], board.files(SESSIONS)


def wait_for_run(board: Board, timeout: float = 120) -> None:
    """Until a bench script runs on the board."""
    deadline = time.monotonic() + timeout
    while not any("_bench.py" in p.args for p in board.processes()):
        assert time.monotonic() < deadline, "no run started on the board"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def board(board_factory: BoardFactory, tmp_path_factory: pytest.TempPathFactory) -> Board:
    """A bare x86 board (Debian's Python, sshd, nothing else) under 1 CPU and 1 GiB, set up once from this host."""
    shared = board_factory.start("x86-bare", cpus=1, memory="1g")
    report = set_up(shared, tmp_path_factory.mktemp("setup"))
    assert {"numpy", "onnxruntime"} <= set(report["packages"])
    return shared


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    folder = tmp_path_factory.mktemp("models")
    return [make_matmul_model(folder / f"mlp_{size}.onnx", size=size, layers=4) for size in (128, 192)]


@dataclass(frozen=True)
class CalibrationModels:
    """Models a board is calibrated on, and one inside their range that it is asked to predict."""

    calibrated: list[Path]
    predicted: Path

    @property
    def every(self) -> list[Path]:
        return [*self.calibrated, self.predicted]


@pytest.fixture(scope="module")
def calibration_models(tmp_path_factory: pytest.TempPathFactory) -> CalibrationModels:
    """Five MLPs from 0.04 to 0.5 ms an inference on this host (the smallest of `models` take 15-30 µs, where the
    host's jitter alone moves a calibration point by tens of percent): the middle one to predict, inside the range of
    the other four. Three noisy points leave a relative fit one degree of freedom (t = 12.7), and its interval can
    pass ×100 even inside their range, where predict rightly gives no number; four leave it two (t = 4.3)."""
    folder = tmp_path_factory.mktemp("calibration-models")
    mlps = [make_matmul_model(folder / f"mlp_{size}.onnx", size=size, layers=4) for size in (256, 384, 512, 768, 1024)]
    return CalibrationModels([*mlps[:2], *mlps[3:]], mlps[2])


def test_a_board_profile_names_the_board_and_becomes_a_device(board: Board, calibration_models: CalibrationModels,
                                                              tmp_path: Path) -> None:
    off_board = calibration_models.predicted
    harness(board.config, tmp_path, "profile", *map(str, calibration_models.calibrated), "--target", board.url,
            "--repeats", "2", "--iterations", "30", "--warmup", "3", "--memory", "512m")
    runs = session_runs(tmp_path / "results")
    assert len(runs) == 8 and all(run["status"] == "ok" for run in runs)
    run = runs[0]
    facts = run["provenance"]["board"]
    assert run["backend"] == "ssh" and run["provenance"]["target"] == board.url
    assert facts["machine"] == "x86_64" and facts["hostname"] == board.name and facts["cores"]
    assert run["provenance"]["packages"]["onnxruntime"]  # the board's engine, from its venv
    assert run["board"]["hostname"] == board.name and set(run["board"]["before"]) >= {"temperature_c", "freq_mhz"}
    assert run["isolation"] in ("rlimit", "cgroup-v1", "cgroup-v2")  # what the board's kernel let the user do
    if run["isolation"] == "rlimit":
        assert any(line.startswith("MEMORY:") for line in run["limits_applied"]["unenforced"])
    assert run["peak_rss_mib"] > 10 and run["latency_stats_ms"]["p50"] > 0
    assert left_on(board) == ([], [])

    device = f"{board.name}-onnxruntime-1t"
    listed = json.loads(harness(board.config, tmp_path, "devices", "--json").stdout)
    assert device in json.dumps(listed)
    assert (tmp_path / "results" / "devices" / device / "library-member").is_file()  # joined, and said so
    # the same models and one more on this host: the board predicts the one it has not run with no import step
    harness(board.config, tmp_path, "profile", *map(str, calibration_models.every), "--backend", "local",
            "--repeats", "2", "--iterations", "30", "--warmup", "3", "--memory", "512m")
    predicted = json.loads(harness(board.config, tmp_path, "predict", off_board.stem, "--device", device,
                                   "--metric", "latency_ms", "--json").stdout)
    assert off_board.stem in json.dumps(predicted)
    measured = json.loads(harness(board.config, tmp_path, "suggest", "--device", device, "-n", "1", "--measure",
                                  "--metric", "latency_ms", "--json").stdout)
    assert measured["measured"] == [off_board.stem]
    table = (tmp_path / "results" / "devices" / device / "measurements.csv").read_text()
    assert all(model.stem in table for model in calibration_models.every)
    harness(board.config, tmp_path, "report")  # the newest session's: the one --measure ran on the board
    report = (list_sessions(tmp_path / "results")[-1] / "report" / "report.md").read_text()
    assert "## Host and board" in report and board.name in report


def test_a_hostile_file_name_is_only_data_on_the_board(board: Board, models: list[Path], tmp_path: Path) -> None:
    folder = tmp_path / "a b;c"
    folder.mkdir()
    hostile = folder / "$(touch pwned).onnx"
    shutil.copyfile(models[0], hostile)
    harness(board.config, tmp_path, "profile", str(hostile), "--target", board.url, "--repeats", "1",
            "--iterations", "5", "--warmup", "1")
    assert session_runs(tmp_path / "results")[0]["status"] == "ok"
    found = board.exec("find", "/", "-xdev", "-name", "pwned", check=False).stdout
    assert found == "" and not list(tmp_path.rglob("pwned"))
    assert left_on(board) == ([], [])


def test_sigterm_leaves_nothing_on_the_board_and_the_session_resumes(board: Board, models: list[Path],
                                                                      tmp_path: Path) -> None:
    process = start(board.config, tmp_path, "profile", str(models[1]), "--target", board.url, "--repeats", "2",
                    "--iterations", "400000", "--warmup", "1", "--timeout", "300")
    wait_for_run(board)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 143 and "interrupted by SIGTERM" in one_line_error(stderr)
    assert left_on(board) == ([], [])
    session = list_sessions(tmp_path / "results")[-1].name
    harness(board.config, tmp_path, "profile", "--resume", session, "--results-dir", "results", "--iterations", "5")
    assert len(session_runs(tmp_path / "results")) == 2


def test_unreachable_boards_fail_in_one_line(board: Board, tmp_path: Path, models: list[Path]) -> None:
    def error(config: Path, target: str) -> str:
        done = harness(config, tmp_path, "profile", str(models[0]), "--target", target, "--repeats", "1",
                       check=False)
        assert done.returncode != 0
        return one_line_error(done.stderr)

    closed = "ssh://root@127.0.0.1:9"  # the discard port: nothing listens
    assert "does not answer" in error(board.config, closed) and closed in error(board.config, closed)
    other_key = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other_key)], check=True)
    config = tmp_path / "wrong_key.config"
    config.write_text(board.config.read_text().replace(str(board.key), str(other_key)))
    assert "refused the key" in error(config, board.url)
    config = tmp_path / "unknown_host.config"
    (tmp_path / "empty_known_hosts").write_text("")
    config.write_text(board.config.read_text().replace(str(board.known_hosts), str(tmp_path / "empty_known_hosts")))
    message = error(config, board.url)
    assert "host key is not one known_hosts trusts" in message
    assert (tmp_path / "empty_known_hosts").read_text() == ""  # never accepted silently


def test_a_board_without_python_or_engine_says_the_fix(board_factory: BoardFactory, models: list[Path],
                                                       tmp_path: Path) -> None:
    bare = board_factory.start("x86-bare", cpus=1, memory="512m")
    done = harness(bare.config, tmp_path, "profile", str(models[0]), "--target", bare.url, check=False)
    assert f"harness target setup {bare.url} --runtime onnxruntime" in one_line_error(done.stderr)
    checked = json.loads(harness(bare.config, tmp_path, "target", "check", bare.url, "--json").stdout)
    assert any("RUNTIME=onnxruntime" in line for line in checked["lacks"])
    bare.exec("rm", "/usr/bin/python3")
    done = harness(bare.config, tmp_path, "profile", str(models[0]), "--target", bare.url, check=False)
    assert "no python3 on the board's PATH" in one_line_error(done.stderr)
    assert left_on(bare) == ([], [])


def test_a_board_that_reboots_mid_run_loses_only_that_run(board_factory: BoardFactory, models: list[Path],
                                                          tmp_path: Path) -> None:
    own = board_factory.start("x86-bare", cpus=1, memory="1g")
    set_up(own, tmp_path)
    process = start(own.config, tmp_path, "profile", str(models[1]), "--target", own.url, "--repeats", "2",
                    "--iterations", "400000", "--warmup", "1", "--timeout", "300")
    wait_for_run(own)
    own.stop(timeout_s=0)
    _, stderr = process.communicate(timeout=120)
    line = one_line_error(stderr)
    assert process.returncode != 0 and own.url in line and "continue with `harness profile --resume" in line
    own.start()
    session = line.split("--resume ")[1].split()[0]
    harness(own.config, tmp_path, "profile", "--resume", session, "--results-dir", "results", "--iterations", "5")
    assert [run["status"] for run in session_runs(tmp_path / "results")] == ["ok", "ok"]
    assert left_on(own) == ([], [])  # the rebooted session's folder was swept by the resume
    harness(own.config, tmp_path, "target", "clean", own.url)
    assert own.files("/root/.cache/harness-target") == []


def test_a_farm_spreads_runs_and_survives_a_board_dropping_out(board_factory: BoardFactory, models: list[Path],
                                                               tmp_path: Path) -> None:
    boards = [board_factory.start("x86-bare", cpus=1, memory="1g") for _ in range(2)]
    config = ssh_config_for(boards, tmp_path / "farm.config")
    for one in boards:
        harness(config, tmp_path, "target", "setup", f"ssh://{one.alias}")
    target = " ".join(f"ssh://{one.alias}" for one in boards)
    harness(config, tmp_path, "profile", *map(str, models[:2]), "--target", target, "--repeats", "3",
            "--iterations", "300", "--warmup", "1")
    runs = session_runs(tmp_path / "results")
    assert len(runs) == 6 and {run["board"]["hostname"] for run in runs} == {one.name for one in boards}

    process = start(config, tmp_path, "profile", *map(str, models[:2]), "--target", target, "--repeats", "4",
                    "--iterations", "3000", "--warmup", "1")
    wait_for_run(boards[1])
    boards[1].stop(timeout_s=0)
    _, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, stderr
    assert "goes to another board (1 left)" in stderr
    runs = session_runs(tmp_path / "results")
    assert len(runs) == 8 and all(run["status"] == "ok" for run in runs)
    assert runs[-1]["board"]["hostname"] == boards[0].name
    assert left_on(boards[0]) == ([], [])


@pytest.mark.parametrize("runtime", ["onnxruntime", "ncnn"])
def test_the_arm64_board_runs_its_own_engines_and_calibrates(board_factory: BoardFactory,
                                                             calibration_models: CalibrationModels, tmp_path: Path,
                                                             runtime: str) -> None:
    arm = board_factory.shared("arm64")
    set_up(arm, tmp_path, runtime)
    common = ["--repeats", "2", "--iterations", "100", "--warmup", "1", "--runtime", runtime]
    calibrated, predicted_model = calibration_models.calibrated, calibration_models.predicted
    harness(arm.config, tmp_path, "profile", *map(str, calibrated), "--target", arm.url, *common, timeout=1200)
    runs = session_runs(tmp_path / "results")
    assert all(run["status"] == "ok" for run in runs), [run.get("stderr_tail") for run in runs]
    assert runs[0]["provenance"]["board"]["machine"] == "aarch64"
    assert runs[0]["provenance"]["board"]["cpu_model"] == "Cortex-A72"
    assert runs[0]["conditions"]["runtime"].startswith(runtime)
    harness(arm.config, tmp_path, "profile", *map(str, calibration_models.every), *common, "--backend", "local")
    device = f"{arm.name}-{runtime}-1t"
    predicted = json.loads(harness(arm.config, tmp_path, "predict", predicted_model.stem, "--device", device,
                                   "--metric", "latency_ms", "--runtime", runtime, "--json").stdout)
    assert predicted_model.stem in json.dumps(predicted)
    assert left_on(arm) == ([], [])


def test_python_profiles_on_the_board_too(board: Board, models: list[Path], tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import harness

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HARNESS_SSH_CONFIG", str(board.config))
    session = harness.profile([models[0]], target=board.url, repeats=1, iterations=5, warmup=1,
                              results_dir=tmp_path / "results", progress=False)
    (run,) = session_runs(tmp_path / "results")
    assert run["backend"] == "ssh" and run["provenance"]["target"] == board.url and run["status"] == "ok"
    assert list(session.summary["model_name"]) == [models[0].stem]
    assert left_on(board) == ([], [])


def test_a_board_whose_kernel_allows_it_enforces_the_limits_there(board_factory: BoardFactory, models: list[Path],
                                                                  tmp_path: Path) -> None:
    """A board where root may write its cgroups (its cgroup tree mounted writable): each run gets a cgroup of its own
    on the board, with the profile's MEMORY and pinned cores, and its peak is the board kernel's high-water mark."""
    own = board_factory.start("x86-bare", cpus=2, memory="1g", cgroups=True)
    set_up(own, tmp_path)
    harness(own.config, tmp_path, "profile", str(models[1]), "--target", own.url, "--repeats", "2", "--iterations",
            "20", "--warmup", "1", "--memory", "300m")
    runs = session_runs(tmp_path / "results")
    assert {run["isolation"] for run in runs} == {f"cgroup-v{runs[0]['provenance']['board']['cgroup']['version']}"}
    for run in runs:
        assert run["limits_applied"]["memory_bytes"] == 300 * 1024**2 and run["limits_applied"]["cpuset"]
        assert run["peak_source"] == "kernel" and 10 < run["peak_memory_mib"] < 300
    assert left_on(own) == ([], [])
    own_cgroup = own.exec("sh", "-c", "grep memory /proc/1/cgroup | cut -d: -f3").stdout.strip()
    leftover = own.exec("find", f"/sys/fs/cgroup/memory{own_cgroup}", "-name", "harness-*", check=False).stdout
    assert own_cgroup.startswith("/docker/") and leftover == ""  # the board's run cgroups went with their runs
