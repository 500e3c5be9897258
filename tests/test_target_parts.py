"""TARGET's parts that need no board: the address, ssh's failures as one line each, what the board side reads and
removes (run here, on this host's own /proc and /sys), and the throttle rule."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from harness.analysis.boards import device_name
from harness.analysis.throttle import throttle_reason
from harness.backends.target.board import check_done
from harness.backends.target.transport import remote_command, ssh_failure
from harness.core.config import load_profile
from harness.core.errors import BackendError, ConfigError
from harness.core.records import RunRecord
from harness.core.targets import Address, parse_targets, target_addresses
from harness.measure import board_side


def test_addresses_parse_as_data() -> None:
    assert parse_targets("ssh://pi@raspberrypi.local:2222") == (Address("raspberrypi.local", "pi", 2222),)
    assert parse_targets("ssh://board ssh://board,ssh://root@[::1]:22") == (
        Address("board"), Address("::1", "root", 22))
    assert Address("::1", "root", 22).url == "ssh://root@[::1]:22"
    assert Address("raspberrypi.local", "pi", 2222).ssh_args() == ["-p", "2222", "-l", "pi", "raspberrypi.local"]
    assert Address("pi.local", None, 2200).label == "pi.local-2200"


@pytest.mark.parametrize("text", ["pi@host", "ssh://", "ssh://host/path", "ssh://u:pw@host", "ssh://host:99999",
                                  "ssh://-oProxyCommand=x", "ssh://$(touch x)", "ssh://host;reboot"])
def test_bad_addresses_are_one_line(text: str) -> None:
    with pytest.raises(ConfigError, match=r"^TARGET: .*expected ssh://user@host\[:port\]"):
        target_addresses(text)


def test_target_is_a_profile_variable(in_tmp_cwd: Path) -> None:
    profile = load_profile(None, {"TARGET": "ssh://pi@board:2200  ssh://alias"})
    assert profile.target == "ssh://pi@board:2200 ssh://alias"
    with pytest.raises(ConfigError, match=r"^TARGET='ssh://a b;c' \(from --target\) is not valid"):
        load_profile(None, {"TARGET": "ssh://a b;c"})


def test_remote_commands_quote_every_argument() -> None:
    hostile = "$(touch pwned).onnx"
    line = remote_command(["python3", "-c", "print(1)", hostile])
    assert subprocess.run(["sh", "-c", f"printf '%s\\n' {line[len('python3 '):]}"], capture_output=True, text=True,
                          check=True).stdout.splitlines() == ["-c", "print(1)", hostile]


@pytest.mark.parametrize(("stderr", "says"), [
    ("Host key verification failed.", "host key is not one known_hosts trusts"),
    ("root@127.0.0.1: Permission denied (publickey).", "refused the key"),
    ("ssh: connect to host 127.0.0.1 port 2299: Connection refused", "does not answer (ssh: connect to host"),
    ("ssh: Could not resolve hostname nowhere: Name or service not known", "does not resolve"),
    ("client_loop: send disconnect: Broken pipe", "the connection was lost while running (client_loop"),
])
def test_ssh_failures_name_the_board_and_the_fix(stderr: str, says: str) -> None:
    message = str(ssh_failure(Address("127.0.0.1", "root", 2299), stderr, "running"))
    assert message.startswith("board ssh://root@127.0.0.1:2299: ") and says in message and "\n" not in message


def test_board_facts_and_snapshot_read_this_machine() -> None:
    facts = json.loads(subprocess.run([sys.executable, board_side.__file__, "facts"], capture_output=True,
                                      check=True).stdout)
    assert facts["machine"] == os.uname().machine and facts["cores"] == sorted(os.sched_getaffinity(0))
    assert facts["python"] == ".".join(map(str, sys.version_info[:3])) and facts["libc"][0] == "glibc"
    assert "numpy" in facts["engines"] and facts["memory_mib"] > 100
    snapshot = board_side.snapshot()
    assert set(snapshot) == {"temperature_c", "freq_mhz", "governor", "time"}


def test_arm_cores_are_named_from_their_part_numbers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cpuinfo = "".join(f"processor\t: {n}\nCPU implementer\t: 0x41\nCPU part\t: {part}\n\n"
                      for n, part in enumerate(["0xd05", "0xd05", "0xd0b"]))
    real_read = board_side._read
    monkeypatch.setattr(board_side, "_read", lambda path, default="": cpuinfo if path == "/proc/cpuinfo"
                        else real_read(path, default))
    assert board_side.cpu_model() == "Cortex-A55 + Cortex-A76"


def _tar(*members: tuple[str, bytes]) -> bytes:
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as archive:
        for name, content in members:
            info = tarfile.TarInfo(name)
            info.size = len(content)
            archive.addfile(info, io.BytesIO(content))
    return data.getvalue()


def test_receive_unpacks_inside_and_refuses_a_way_out(tmp_path: Path) -> None:
    folder = tmp_path / "session"
    command = [sys.executable, board_side.__file__, "receive", str(folder)]
    subprocess.run(command, input=_tar(("models/ab/$(touch pwned).onnx", b"x")), check=True)
    assert (folder / "models/ab/$(touch pwned).onnx").read_bytes() == b"x" and not Path("pwned").exists()
    refused = subprocess.run(command, input=_tar(("../escaped", b"y")), capture_output=True)
    assert refused.returncode != 0 and b"refused '../escaped'" in refused.stderr
    assert not (tmp_path / "escaped").exists()


def test_clean_kills_what_names_the_folder_and_sweep_keeps_live_sessions(tmp_path: Path) -> None:
    base = tmp_path / "sessions"
    dead, live = base / "dead", base / "live"
    for folder in (dead, live):
        folder.mkdir(parents=True)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", str(dead / "model.onnx")])
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl,sys,time; h=open(sys.argv[1],'a'); "
                               "fcntl.flock(h, fcntl.LOCK_EX); print(1, flush=True); time.sleep(60)",
                               str(live / board_side.LOCK_NAME)], stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline()
        swept = subprocess.run([sys.executable, board_side.__file__, "sweep", str(base)], capture_output=True,
                               check=True)
        assert json.loads(swept.stdout) == ["dead"]
        assert sleeper.wait(timeout=10) == -9 and not dead.exists() and live.exists()
    finally:
        for process in (sleeper, holder):
            process.kill()
            process.wait()


def _board_run(before: dict, after: dict) -> RunRecord:
    return RunRecord.from_dict({"run_id": "r", "model_name": "m", "status": "ok", "backend": "ssh",
                                "board": {"hostname": "pi", "before": before, "after": after}})


def test_throttle_is_heat_or_a_falling_clock() -> None:
    cool = {"temperature_c": 55.0, "freq_mhz": {"cpu0": 1800.0}}
    assert throttle_reason([_board_run(cool, cool)]) is None
    assert throttle_reason([_board_run(cool, {**cool, "temperature_c": 82.0})]) == "82 °C at its hottest"
    slowed = {"temperature_c": 70.0, "freq_mhz": {"cpu0": 1500.0}}
    assert throttle_reason([_board_run(cool, slowed)]) == "cpu0 clocked 17% below its highest"


def test_board_device_names() -> None:
    assert device_name(("raspberrypi", "ncnn", 4), None, False) == "raspberrypi-ncnn-4t"
    assert device_name(("raspberrypi", "ncnn", 4), "my pi", True) == "my-pi-ncnn-4t"
    assert device_name(("raspberrypi", "ncnn", 4), "my-pi", False) == "my-pi"


def test_a_full_board_disk_is_one_line_with_its_fix(tmp_path: Path) -> None:
    """A real file system that fills up: a 256 KiB tmpfs, as the board's disk."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(disk)]).returncode != 0:
        pytest.skip("mounting a tmpfs needs root")
    try:
        done = subprocess.run([sys.executable, board_side.__file__, "receive", str(disk / "session")],
                              input=_tar(("models/big.onnx", b"x" * 1024 * 1024)), capture_output=True)
        assert done.returncode == board_side.NO_SPACE_EXIT
        with pytest.raises(BackendError) as caught:
            check_done("ssh://pi@board", done, "copying files")
        message = str(caught.value)
        assert message.startswith("board ssh://pi@board: no space left on the board's disk (")
        assert "while copying files; free space on the board" in message and "harness target clean" in message
    finally:
        subprocess.run(["umount", str(disk)], check=True)
