"""The SSH test boards themselves (tests/boards.py): a board answers by its url and by its alias, admits only the
test's key, checks its host key, runs under the limits it was given, comes back on its port after a restart with its
files and without its processes, and the arm64 board is an emulated Cortex-A72 in every ssh session. Skipped where
the boards cannot start (no engine, images not built), unless HARNESS_REQUIRE_BOARDS=1."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.boards import QEMU_CPU, Board, BoardFactory, Limits, docker, ssh_config_for
from tests.conftest import make_matmul_model

pytestmark = pytest.mark.board
MIB = 1024 * 1024


def ssh_by_url(board: Board, *argv: str, config: Path | None = None) -> subprocess.CompletedProcess[str]:
    """ssh to the board as its url says (user, host, port), with its ssh_config for the key and known hosts."""
    url = urlsplit(board.url)
    return subprocess.run(["ssh", "-F", str(config or board.config), "-p", str(url.port),
                           f"{url.username}@{url.hostname}", *argv], capture_output=True, text=True, timeout=120)


def test_x86_board_answers_by_url_and_by_alias(board_factory: BoardFactory) -> None:
    board = board_factory.shared("x86")
    url = urlsplit(board.url)
    assert (url.scheme, url.username, url.hostname, url.port) == ("ssh", "root", "127.0.0.1", board.port)
    by_url = ssh_by_url(board, "uname -m; id -un")
    assert by_url.returncode == 0, by_url.stderr
    assert by_url.stdout.split() == ["x86_64", "root"]
    by_alias = board.ssh("uname", "-m")
    assert (by_alias.returncode, by_alias.stdout.strip()) == (0, board.arch)
    engines = board.ssh(board.python, "-c", "'import numpy, onnxruntime; print(onnxruntime.__version__)'")
    assert engines.returncode == 0, engines.stderr


def test_a_board_admits_its_key_only_and_is_checked_by_its_host_key(board_factory: BoardFactory,
                                                                     tmp_path: Path) -> None:
    board = board_factory.shared("x86")
    stranger = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)], check=True)

    def ssh_with(key: Path, known_hosts: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["ssh", "-F", "/dev/null", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
                               "-o", f"IdentityFile={key}", "-o", f"UserKnownHostsFile={known_hosts}",
                               "-o", "StrictHostKeyChecking=yes", "-o", "GlobalKnownHostsFile=/dev/null",
                               "-p", str(board.port), "root@127.0.0.1", "true"],
                              capture_output=True, text=True, timeout=60)

    assert ssh_with(board.key, board.known_hosts).returncode == 0
    refused = ssh_with(stranger, board.known_hosts)
    # the board offers public keys and nothing else (no password, no keyboard-interactive)
    assert refused.returncode == 255 and "Permission denied (publickey)." in refused.stderr, refused.stderr
    impostor = tmp_path / "known_hosts"
    impostor.write_text(f"[127.0.0.1]:{board.port} {' '.join(Path(f'{stranger}.pub').read_text().split()[:2])}\n")
    unverified = ssh_with(board.key, impostor)
    assert unverified.returncode == 255 and "Host key verification failed" in unverified.stderr, unverified.stderr


def test_a_board_runs_under_its_limits_and_comes_back_on_its_port_after_a_restart(board_factory: BoardFactory) -> None:
    board = board_factory.start("x86-bare", cpus=0.5, memory="512m")
    assert board.limits() == Limits(cpus=0.5, memory_bytes=512 * MIB, memory_swap_bytes=512 * MIB)
    # the bare board: Debian's Python and no engine
    bare = board.ssh("python3", "-c", "'import importlib.util as u; print(u.find_spec(\"onnxruntime\"))'")
    assert (bare.returncode, bare.stdout.strip()) == (0, "None"), bare.stderr
    assert board.processes() == []

    left = board.ssh("echo kept >/root/marker; sleep 600 </dev/null >/dev/null 2>&1 &")
    assert left.returncode == 0, left.stderr
    assert [(p.comm, p.args) for p in board.processes()] == [("sleep", "sleep 600")]
    assert "marker" in board.files("/root")

    board.stop()
    down = board.ssh("true", timeout=30)
    assert down.returncode == 255, down.stderr
    started = time.monotonic()
    board.start()
    print(f"restart: ssh again after {time.monotonic() - started:.1f} s")
    published = docker("port", board.container, "22/tcp").stdout.split()
    assert published == [f"127.0.0.1:{board.port}"]
    # the same host key (the known_hosts made at the first start still holds), the files kept, no process survived
    again = ssh_by_url(board, "cat /root/marker")
    assert (again.returncode, again.stdout.strip()) == (0, "kept"), again.stderr
    assert board.processes() == []
    assert board.limits().memory_bytes == 512 * MIB


def test_arm64_board_is_an_emulated_cortex_a72_in_every_session(board_factory: BoardFactory) -> None:
    board = board_factory.shared("arm64")
    assert board.arch == "aarch64"
    done = board.ssh("uname -m; grep -m1 'CPU part' /proc/cpuinfo; "
                     "python3 -c 'import os, platform; print(platform.machine(), os.environ.get(\"QEMU_CPU\"))'")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["aarch64", "CPU part\t: 0xd08", f"aarch64 {QEMU_CPU}"]
    assert board.limits() == Limits(cpus=1.0, memory_bytes=1024 * MIB, memory_swap_bytes=1024 * MIB)


def test_one_ssh_config_for_two_boards(board_factory: BoardFactory, tmp_path: Path) -> None:
    boards = [board_factory.shared("x86"), board_factory.shared("arm64")]
    config = ssh_config_for(boards, tmp_path / "ssh_config")
    for board in boards:
        by_alias = subprocess.run(["ssh", "-F", str(config), board.alias, "uname", "-m"], capture_output=True,
                                  text=True, timeout=120)
        assert (by_alias.returncode, by_alias.stdout.strip()) == (0, board.arch), by_alias.stderr
        by_url = ssh_by_url(board, "uname -m", config=config)
        assert (by_url.returncode, by_url.stdout.strip()) == (0, board.arch), by_url.stderr


ARM64_WHEEL_PLATFORMS = ["manylinux2014_aarch64", "manylinux_2_17_aarch64", "manylinux_2_27_aarch64",
                         "manylinux_2_28_aarch64"]
ENGINES_ON_THE_BOARD = """
import sys
import ncnn, numpy as np, onnxruntime as ort
net = ncnn.Net()
session = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
y = session.run(None, {"x": np.ones((2, 64), np.float32)})[0]
print(ort.__version__, ncnn.__version__, y.shape, float(y.sum()))
"""


@pytest.mark.slow
def test_onnxruntime_and_ncnn_wheels_run_on_the_arm64_board(board_factory: BoardFactory, tmp_path: Path) -> None:
    """The reason for the board's QEMU_CPU and cpuinfo: onnxruntime's aarch64 wheel runs a model over ssh (without
    the Cortex-A72 cpuinfo it crashes under QEMU 7.2 and the process hangs). Downloads about 45 MB of wheels."""
    board = board_factory.shared("arm64")
    wheels, site = tmp_path / "wheels", tmp_path / "site"
    platforms = [arg for platform in ARM64_WHEEL_PLATFORMS for arg in ("--platform", platform)]
    common = [*platforms, "--python-version", "3.11", "--implementation", "cp", "--only-binary=:all:", "-q"]
    pip = [sys.executable, "-m", "pip"]
    download = subprocess.run([*pip, "download", *common, "-d", str(wheels), "onnxruntime", "numpy", "ncnn"],
                              capture_output=True, text=True, timeout=600)
    if download.returncode != 0:
        pytest.skip(f"aarch64 wheels could not be downloaded: {download.stderr.strip()[-300:]}")
    subprocess.run([*pip, "install", *common, "--no-index", "--find-links", str(wheels), "--target", str(site),
                    "onnxruntime", "numpy", "ncnn"], check=True, capture_output=True, timeout=600)
    model = make_matmul_model(tmp_path / "mlp.onnx", size=64)
    target = f"/tmp/engines-{tmp_path.name}"
    board.exec("mkdir", "-p", target)
    docker("cp", str(site), f"{board.container}:{target}/site", timeout=600)
    docker("cp", str(model), f"{board.container}:{target}/mlp.onnx")
    try:
        done = board.ssh(f"PYTHONPATH={target}/site", "timeout", "300", "python3", "-", f"{target}/mlp.onnx",
                         input=ENGINES_ON_THE_BOARD, timeout=400)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "(2, 64)" in done.stdout
    finally:
        board.exec("rm", "-rf", target)
