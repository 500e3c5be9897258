"""Test boards: real OpenSSH servers in real Docker containers on loopback, for tests of `TARGET=ssh://...`.

Three kinds, each an image that a script in tests/boards/ builds once per machine:
- "x86"       harness-board-x86:latest (tests/boards/build-x86): the runtime image, with numpy and onnxruntime in
              /opt/venv (Board.python), plus sshd;
- "x86-bare"  harness-board-x86-bare:latest (tests/boards/build-x86): Debian's Python and sshd, no engine, for a
              setup from nothing;
- "arm64"     harness-board-arm64:bookworm (tests/boards/build-arm64): Debian arm64 with Python and sshd, its
              binaries run by QEMU's user-mode emulation (binfmt_misc) as a Cortex-A72: the container has
              QEMU_CPU=cortex-a72 and tests/boards/cpuinfo-cortex-a72 over its /proc/cpuinfo (onnxruntime's aarch64
              wheel crashes on the host's x86 cpuinfo), and sshd hands QEMU_CPU to every session (SetEnv), since a
              login session does not inherit the container's environment.

A board is one container under its own CPU and memory limits (--cpus, --memory, --memory-swap equal to --memory),
its sshd published on 127.0.0.1 at a port chosen here that stays the same across a restart. Root logs in with a key
made for the test (never a password); the client checks the board's host key against a known_hosts file filled
from the container's own key (never StrictHostKeyChecking=no). Board.config is an ssh_config that serves both
`ssh -F config root@127.0.0.1 -p PORT` (the url) and `ssh -F config ALIAS`.

In tests, use the session fixture `board_factory` (tests/conftest.py): `board_factory.shared("x86")` for a board that
tests share, `board_factory.start("x86", cpus=0.5, memory="512m")` for one a test may stop or break. Either skips
the test when the board cannot be had (no engine, image not built), or fails it when HARNESS_REQUIRE_BOARDS=1 (CI).
Every container the factory started is removed at the end; containers of a session that died are removed by the
next one (their owner label names a process that is gone).
"""

from __future__ import annotations

import contextlib
import os
import random
import shlex
import shutil
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from harness.backends.docker import owner_gone, owner_label

HERE = Path(__file__).parent / "boards"
CPUINFO_CORTEX_A72 = HERE / "cpuinfo-cortex-a72"
QEMU_CPU = "cortex-a72"
LABEL = "org.harness.board"  # every board container carries it; value: the board's kind
OWNER_LABEL = "org.harness.board.owner"  # host/pid/start time of the test process that started it
PORTS = range(20000, 32000)  # below Linux's ephemeral range, so no outgoing connection takes a stopped board's port
READY_TIMEOUT_S = {"x86": 60.0, "x86-bare": 60.0, "arm64": 180.0}
"""How long a board may take from `docker start` until `ssh ... true` succeeds (measured: x86 about 1 s,
arm64 under QEMU about 3 s on an idle 2-core host; the margins are for a loaded CI machine)."""


@dataclass(frozen=True)
class BoardKind:
    image: str
    arch: str  # what `uname -m` says on the board
    python: str  # the interpreter with the board's engines, if any
    build: str  # the script that builds the image


def board_kinds() -> dict[str, BoardKind]:
    """The kinds start_board knows; image tags as the build scripts name them (same environment overrides)."""
    return {
        "x86": BoardKind(os.environ.get("HARNESS_X86_BOARD_IMAGE", "harness-board-x86:latest"), "x86_64",
                         "/opt/venv/bin/python3", "tests/boards/build-x86"),
        "x86-bare": BoardKind(os.environ.get("HARNESS_X86_BARE_BOARD_IMAGE", "harness-board-x86-bare:latest"),
                              "x86_64", "/usr/bin/python3", "tests/boards/build-x86"),
        "arm64": BoardKind(os.environ.get("HARNESS_ARM64_BOARD_IMAGE", "harness-board-arm64:bookworm"), "aarch64",
                           "/usr/bin/python3", "tests/boards/build-arm64"),
    }


# The container's command: the test's public key for root, an ed25519 host key made at the first start and kept
# across restarts, then sshd in the foreground (logging to `docker logs`), passing QEMU_CPU on to every session.
INIT = """set -e
mkdir -p /run/sshd /root/.ssh
chmod 700 /root/.ssh
printf '%s\\n' "$BOARD_AUTHORIZED_KEY" >/root/.ssh/authorized_keys
chmod 600 /root/.ssh/authorized_keys
[ -e /etc/ssh/ssh_host_ed25519_key ] || ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/ssh_host_ed25519_key
exec /usr/sbin/sshd -D -e ${QEMU_CPU:+-o SetEnv=QEMU_CPU=$QEMU_CPU}"""


def docker(*argv: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
    """The docker CLI, its output as text; check=True raises with docker's own message."""
    done = subprocess.run(["docker", *argv], capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise RuntimeError(f"docker {' '.join(argv[:2])} failed ({done.returncode}): {done.stderr.strip()}")
    return done


@dataclass(frozen=True)
class Process:
    """One process on a board, as `ps` shows it."""

    pid: int
    ppid: int
    comm: str
    args: str


@dataclass(frozen=True)
class Limits:
    """A board's cgroup limits as the board itself reads them (None: unlimited)."""

    cpus: float | None
    memory_bytes: int | None
    memory_swap_bytes: int | None  # memory plus swap (cgroup v1's memsw); equal to memory_bytes: no swap


@dataclass
class Board:
    """A running board: reach it with `ssh -F config alias`, or with the url and `-F config`."""

    url: str  # ssh://root@127.0.0.1:PORT
    config: Path  # ssh_config for this board: key, known_hosts, and the Host alias
    alias: str  # a Host in config that leads to the same board: ssh://ALIAS works with -F config
    name: str
    container: str
    arch: str  # uname -m on the board: x86_64 or aarch64
    key: Path  # the client's private key (root's authorized key on the board)
    kind: str = "x86"
    port: int = 0
    known_hosts: Path = field(default_factory=Path)
    python: str = "/usr/bin/python3"  # the interpreter with the board's engines (x86: /opt/venv/bin/python3)

    def ssh(self, *argv: str, input: str | None = None, timeout: float = 120,
            check: bool = False) -> subprocess.CompletedProcess[str]:
        """`ssh -F config alias ARGV...` (ssh joins ARGV with spaces into one remote shell command)."""
        return subprocess.run(["ssh", "-F", str(self.config), self.alias, *argv], input=input, capture_output=True,
                              text=True, timeout=timeout, check=check)

    def exec(self, *argv: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
        """ARGV run as root in the container with `docker exec`, past sshd: for a test's look behind the scenes."""
        return docker("exec", self.container, *argv, timeout=timeout, check=check)

    def stop(self, timeout_s: int = 10) -> None:
        """The board drops out: the container stops (sshd and everything else in it end; files stay)."""
        docker("stop", "-t", str(timeout_s), self.container)

    def start(self, timeout: float | None = None) -> None:
        """The board comes back (a reboot: no process survives, files do): sshd on the same port, ready for ssh."""
        docker("start", self.container)
        self.wait_ready(timeout)

    def restart(self, timeout: float | None = None) -> None:
        self.stop()
        self.start(timeout)

    def running(self) -> bool:
        done = docker("inspect", "--format", "{{.State.Running}}", self.container, check=False)
        return done.stdout.strip() == "true"

    def remove(self) -> None:
        docker("rm", "-f", "-v", self.container, check=False)

    def wait_ready(self, timeout: float | None = None) -> float:
        """Wait until `ssh ... true` succeeds; returns the seconds it took. Raises with sshd's log when it does not
        within `timeout` (default READY_TIMEOUT_S of the kind)."""
        started = time.monotonic()
        deadline = started + (timeout or READY_TIMEOUT_S.get(self.kind, 60.0))
        last = ""
        while True:
            if not self.running():
                raise RuntimeError(f"board {self.name}: container {self.container} is not running\n{self.logs()}")
            try:
                done = self.ssh("true", timeout=max(5.0, deadline - time.monotonic()))
                if done.returncode == 0:
                    return time.monotonic() - started
                last = done.stderr.strip()
            except subprocess.TimeoutExpired:
                last = "ssh timed out"
            if time.monotonic() > deadline:
                raise RuntimeError(f"board {self.name}: no ssh after {time.monotonic() - started:.0f} s "
                                   f"(last: {last})\n{self.logs()}")
            time.sleep(0.2)

    def logs(self, tail: int = 20) -> str:
        done = docker("logs", "--tail", str(tail), self.container, check=False)
        return (done.stdout + done.stderr).strip()

    def processes(self) -> list[Process]:
        """What runs on the board besides init, sshd (the listener and every session's) and this look itself: empty
        on a board that nothing was left on."""
        done = self.exec("sh", "-c", "echo $$; exec ps -eo pid=,ppid=,comm=,args=")
        me, *rows = done.stdout.splitlines()
        found = []
        for row in rows:
            pid, ppid, comm, *args = row.split(None, 3)
            if int(pid) in (1, int(me)) or comm == "sshd":
                continue
            command = args[0] if args else ""
            if command.startswith("/usr/libexec/qemu-binfmt/"):  # an emulated binary: drop QEMU and the binary's path
                command = command.split(None, 2)[-1]
            found.append(Process(int(pid), int(ppid), comm, command))
        return found

    def files(self, path: str) -> list[str]:
        """Every file, folder and link under `path` on the board, relative to it and sorted; [] if it does not
        exist."""
        done = self.exec("sh", "-c", 'cd "$1" 2>/dev/null || exit 0; find . -mindepth 1 -printf "%P\\n"', "sh", path)
        return sorted(done.stdout.splitlines())

    def limits(self) -> Limits:
        """The CPU quota and memory limits of the board's cgroup, read on the board over ssh (cgroup v1 or v2)."""
        script = ("cd /sys/fs/cgroup; if [ -f cpu.max ]; then echo v2; cat cpu.max memory.max; "
                  "cat memory.swap.max 2>/dev/null || echo max; else echo v1; "
                  "echo $(cat cpu/cpu.cfs_quota_us) $(cat cpu/cpu.cfs_period_us); cat memory/memory.limit_in_bytes; "
                  "cat memory/memory.memsw.limit_in_bytes 2>/dev/null || echo max; fi")
        version, quota_period, memory_text, swap_text = self.ssh(script, check=True).stdout.split("\n")[:4]
        quota, period = quota_period.split()
        cpus = None if quota in ("max", "-1") else int(quota) / int(period)

        def limit(text: str) -> int | None:
            text = text.strip()  # no limit: "max" (v2), or v1's largest page-aligned int64
            return None if text == "max" or int(text) >= 2**62 else int(text)

        memory, swap = limit(memory_text), limit(swap_text)
        if version == "v2":  # memory.swap.max is the swap alone
            swap = None if memory is None or swap is None else memory + swap
        return Limits(cpus, memory, swap)


def ssh_config_text(board: Board) -> str:
    q = shlex.quote
    return (f"# Board {board.name} ({board.kind}, {board.arch}), container {board.container}:\n"
            f"#   ssh -F {q(str(board.config))} {board.alias}   or   {board.url} with -F {q(str(board.config))}\n"
            f"Host {board.alias}\n"
            f"    HostName 127.0.0.1\n"
            f"    Port {board.port}\n"
            f"    User root\n"
            f"Host {board.alias} 127.0.0.1\n"
            f'    IdentityFile "{board.key}"\n'
            f"    IdentitiesOnly yes\n"
            f'    UserKnownHostsFile "{board.known_hosts}"\n'
            f"    GlobalKnownHostsFile /dev/null\n"
            f"    StrictHostKeyChecking yes\n"
            f"    HostKeyAlgorithms ssh-ed25519\n"
            f"    PasswordAuthentication no\n"
            f"    KbdInteractiveAuthentication no\n"
            f"    ConnectTimeout 10\n")


def ssh_config_for(boards: list[Board], path: Path) -> Path:
    """One ssh_config for several boards (a session with two targets): each alias as in its own config; their
    keys and known_hosts together for 127.0.0.1."""
    lines = []
    for board in boards:
        lines += [f"Host {board.alias}", "    HostName 127.0.0.1", f"    Port {board.port}", "    User root"]
    lines += [f"Host {' '.join(board.alias for board in boards)} 127.0.0.1"]
    lines += [f'    IdentityFile "{key}"' for key in dict.fromkeys(board.key for board in boards)]
    lines += ["    UserKnownHostsFile " + " ".join(f'"{board.known_hosts}"' for board in boards),
              "    IdentitiesOnly yes", "    GlobalKnownHostsFile /dev/null", "    StrictHostKeyChecking yes",
              "    HostKeyAlgorithms ssh-ed25519", "    PasswordAuthentication no", "    ConnectTimeout 10"]
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o600)
    return path


def boards_required() -> bool:
    return os.environ.get("HARNESS_REQUIRE_BOARDS") == "1"


def board_available(kind: str) -> tuple[bool, str]:
    """(True, "") when a board of this kind can start here: docker answers, the image is built, ssh is installed
    and, for arm64, QEMU's aarch64 interpreter is registered with binfmt_misc. Else (False, why)."""
    kinds = board_kinds()
    if kind not in kinds:
        return False, f"unknown board kind {kind!r} (known: {', '.join(kinds)})"
    for tool in ("docker", "ssh", "ssh-keygen"):
        if shutil.which(tool) is None:
            return False, f"no {tool} command on this machine"
    try:
        info = docker("info", "--format", "{{.ServerVersion}}", timeout=30, check=False)
    except subprocess.TimeoutExpired:
        return False, "the Docker engine did not answer within 30 s"
    if info.returncode != 0 or not info.stdout.strip():
        return False, "no Docker engine answers (../shared/tools/docker-engine-up starts one)"
    image = kinds[kind].image
    if docker("image", "inspect", image, check=False).returncode != 0:
        return False, f"board image {image} is not built (run {kinds[kind].build})"
    if kind == "arm64":
        binfmt = Path("/proc/sys/fs/binfmt_misc/qemu-aarch64")
        try:
            enabled = binfmt.read_text().splitlines()[0].strip() == "enabled"
        except OSError:
            enabled = False
        if not enabled:
            return False, "QEMU's aarch64 interpreter is not registered with binfmt_misc (tests/boards/build-arm64)"
    return True, ""


def require_board(kind: str) -> None:
    """Skip the calling test when a board of this kind cannot start here; fail it when HARNESS_REQUIRE_BOARDS=1."""
    usable, why = board_available(kind)
    if usable:
        return
    if boards_required():
        pytest.fail(f"HARNESS_REQUIRE_BOARDS=1 but {why}")
    pytest.skip(why)


def sweep_orphans() -> int:
    """Remove the board containers of test sessions that died before removing them; returns how many."""
    listed = docker("ps", "-a", "--filter", f"label={OWNER_LABEL}",
                    "--format", f'{{{{.ID}}}} {{{{.Label "{OWNER_LABEL}"}}}}', check=False)
    gone = [cid for cid, _, owner in (line.partition(" ") for line in listed.stdout.splitlines()) if owner_gone(owner)]
    if gone:
        docker("rm", "-f", "-v", *gone, check=False)
    return len(gone)


def client_key(tmp: Path) -> Path:
    """The client's ed25519 key in tmp, made once: every board started with the same tmp accepts it."""
    key = tmp / "id_ed25519"
    if not key.exists():
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "harness-test-boards", "-f", str(key)],
                       check=True, capture_output=True)
    return key


def free_port() -> int:
    """A port below the ephemeral range that nothing listens on now, for a board to keep across restarts."""
    for port in random.sample(PORTS, 200):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port on 127.0.0.1 in {PORTS}")


def start_board(kind: str, tmp: Path, cpus: float = 1, memory: str = "1g", name: str | None = None,
                timeout: float | None = None, cgroups: bool = False) -> Board:
    """Start a board of `kind` ("x86", "x86-bare", "arm64") under --cpus `cpus` and --memory `memory` (no swap), and
    return it once `ssh ... true` succeeds. Its key, ssh_config and known_hosts go in tmp. The caller removes it
    (board.remove(); board_factory does that itself)."""
    spec = board_kinds()[kind]
    name = name or f"{kind}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir(parents=True, exist_ok=True)
    key = client_key(tmp)
    public = (tmp / "id_ed25519.pub").read_text().strip()
    # cgroups: the host's cgroup tree mounted writable, so the board's root can make run cgroups under its own
    extra = ["-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw"] if cgroups else []
    if kind == "arm64":
        extra += ["-e", f"QEMU_CPU={QEMU_CPU}", "-v", f"{CPUINFO_CORTEX_A72}:/proc/cpuinfo:ro"]
    container = f"harness-board-{name}"
    for attempt in range(5):
        port = free_port()
        done = docker("run", "-d", "--init", "--name", container, "--hostname", name,
                      "--label", f"{LABEL}={kind}", "--label", f"{OWNER_LABEL}={owner_label()}",
                      "--cpus", str(cpus), "--memory", memory, "--memory-swap", memory,
                      "-p", f"127.0.0.1:{port}:22", "-e", f"BOARD_AUTHORIZED_KEY={public}", *extra,
                      spec.image, "sh", "-c", INIT, check=False)
        if done.returncode == 0:
            break
        docker("rm", "-f", container, check=False)
        if "already allocated" not in done.stderr and "address already in use" not in done.stderr or attempt == 4:
            raise RuntimeError(f"starting board {name} from {spec.image} failed: {done.stderr.strip()}")
    known_hosts = tmp / f"{name}.known_hosts"
    board = Board(url=f"ssh://root@127.0.0.1:{port}", config=tmp / f"{name}.ssh_config", alias=name, name=name,
                  container=container, arch=spec.arch, key=key, kind=kind, port=port, known_hosts=known_hosts,
                  python=spec.python)
    try:
        host_key = wait_host_key(board, timeout or READY_TIMEOUT_S[kind])
        known_hosts.write_text(f"[127.0.0.1]:{port} {host_key}\n")
        board.config.write_text(ssh_config_text(board))
        board.config.chmod(0o600)
        board.wait_ready(timeout)
    except BaseException:
        board.remove()
        raise
    return board


def wait_host_key(board: Board, timeout: float) -> str:
    """The board's ed25519 host key ("ssh-ed25519 AAAA..."), read from the container once its init has made it."""
    deadline = time.monotonic() + timeout
    while True:
        done = board.exec("cat", "/etc/ssh/ssh_host_ed25519_key.pub", check=False)
        if done.returncode == 0 and done.stdout.startswith("ssh-ed25519 "):
            return " ".join(done.stdout.split()[:2])
        if not board.running():
            raise RuntimeError(f"board {board.name}: container {board.container} ended\n{board.logs()}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"board {board.name}: no host key after {timeout:.0f} s\n{board.logs()}")
        time.sleep(0.2)


class BoardFactory:
    """Starts boards for a test session and removes every one of them at the end (close)."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.boards: list[Board] = []
        self._shared: dict[str, Board] = {}
        self._swept = False

    def start(self, kind: str, cpus: float = 1, memory: str = "1g", name: str | None = None,
              cgroups: bool = False) -> Board:
        """A new board of its own for the calling test (which may stop, restart or break it); skips or fails the
        test as require_board does when it cannot be had."""
        require_board(kind)
        if not self._swept:
            sweep_orphans()
            self._swept = True
        board = start_board(kind, self.tmp, cpus=cpus, memory=memory, name=name, cgroups=cgroups)
        self.boards.append(board)
        return board

    def shared(self, kind: str) -> Board:
        """The session's board of this kind under the default limits (1 CPU, 1 GiB), started on first use and
        shared by every test that asks: leave it running and as found."""
        board = self._shared.get(kind)
        if board is None:
            board = self._shared[kind] = self.start(kind, name=f"{kind}-shared-{uuid.uuid4().hex[:6]}")
        elif not board.running():
            board.start()
        return board

    def close(self) -> None:
        for board in self.boards:
            with contextlib.suppress(Exception):
                board.remove()
        self.boards.clear()
        self._shared.clear()
