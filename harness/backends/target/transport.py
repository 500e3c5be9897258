"""One OpenSSH connection per board, multiplexed: a session's runs, uploads and checks share one master connection
(ControlMaster), so a run costs the board, not a handshake.

The user's own OpenSSH client runs it, as they configured it: ~/.ssh/config, keys, agent, ProxyJump and known_hosts
(HARNESS_SSH_CONFIG names another config file, as `ssh -F` does). BatchMode is on, so ssh never asks for a password
and never accepts a host key it does not know: either ends in one line naming the board and the fix. Remote commands
are argument lists, each argument quoted for the board's shell: no value reaches that shell as code.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from harness.core.errors import BackendError
from harness.core.targets import Address

CONFIG_ENV = "HARNESS_SSH_CONFIG"
CONNECT_TIMEOUT_S = 10
ALIVE_INTERVAL_S = 5  # a board that stops answering is noticed within ALIVE_INTERVAL_S * ALIVE_COUNT
ALIVE_COUNT = 3
SSH_FAILED = 255  # ssh's own exit status: the connection, not the remote command, failed

_CAUSES = (
    (("host key verification failed", "host key for", "remote host identification has changed",
      "no matching host key"),
     "its host key is not one known_hosts trusts (ssh refused it); check the key, then add it: connect once with "
     "`ssh {dest}` and accept it, or `ssh-keyscan` it into ~/.ssh/known_hosts"),
    (("permission denied", "too many authentication failures", "no more authentication methods"),
     "it refused the key (Permission denied); put your public key in the board's ~/.ssh/authorized_keys "
     "(`ssh-copy-id {dest}`) or name the key (IdentityFile) for it in ~/.ssh/config"),
    (("could not resolve hostname", "name or service not known", "temporary failure in name resolution"),
     "its name does not resolve; check the host name, or add a Host entry for it to ~/.ssh/config"),
    (("connection refused", "connection timed out", "operation timed out", "no route to host",
      "network is unreachable", "timeout, server", "host is down"),
     "it does not answer ({detail}); check that the board is on and reachable and that its sshd runs on that port"),
)


def ssh_failure(address: Address, stderr: str, doing: str = "") -> BackendError:
    """One line for an ssh client that failed to reach or keep `address`: what happened and the fix."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip() and "warning: permanently added" not in
             line.lower()]
    detail = lines[-1] if lines else "ssh ended without a word"
    text = stderr.lower()
    dest = " ".join(shlex.quote(arg) for arg in address.ssh_args())
    for needles, cause in _CAUSES:
        if any(needle in text for needle in needles):
            return BackendError(f"board {address.url}: {cause.format(dest=dest, detail=detail)}")
    what = f" while {doing}" if doing else ""
    return BackendError(f"board {address.url}: the connection was lost{what} ({detail}); check the board (it may "
                        "have rebooted or dropped off the network)")


def remote_command(argv: Sequence[str]) -> str:
    """The command line ssh hands the board's shell: every argument quoted, so each arrives as itself."""
    return " ".join(shlex.quote(str(arg)) for arg in argv)


class Connection:
    """A master connection to one board and the commands run through it. `open()` connects (or raises one
    BackendError); `close()` ends the master and removes its socket folder."""

    def __init__(self, address: Address) -> None:
        self.address = address
        self.config = os.environ.get(CONFIG_ENV) or None
        self._folder = Path(tempfile.mkdtemp(prefix="harness-ssh-"))  # 0700: the control socket is ours alone
        self.control = self._folder / "control"
        self._master: subprocess.Popen[bytes] | None = None

    def options(self) -> list[str]:
        """ssh's options for every command of this connection."""
        return ["ssh", *(["-F", self.config] if self.config else []), "-o", "BatchMode=yes",
                "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}", "-o", f"ServerAliveInterval={ALIVE_INTERVAL_S}",
                "-o", f"ServerAliveCountMax={ALIVE_COUNT}", "-o", f"ControlPath={self.control}", "-o", "LogLevel=ERROR"]

    def open(self) -> Connection:
        """Start the master connection; one BackendError if the board cannot be reached."""
        if self._master is not None and self._master.poll() is None:
            return self
        if shutil.which("ssh") is None:
            raise BackendError("TARGET needs OpenSSH's client, `ssh`, on this host; install it (e.g. `apt-get "
                               "install openssh-client`)")
        errors = tempfile.TemporaryFile()  # noqa: SIM115 - the master's stderr while it connects
        self._master = subprocess.Popen([*self.options(), "-M", "-N", "-o", "ControlPersist=no",
                                         *self.address.ssh_args()], stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=errors, start_new_session=True)
        deadline = time.monotonic() + CONNECT_TIMEOUT_S * 3
        while not self.control.exists():
            if self._master.poll() is not None or time.monotonic() > deadline:
                self._stop_master()
                errors.seek(0)
                raise ssh_failure(self.address, errors.read().decode(errors="replace"), "connecting")
            time.sleep(0.02)
        errors.close()
        return self

    def argv(self, remote: Sequence[str]) -> list[str]:
        """The local command that runs `remote` (an argument list) on the board through the master."""
        return [*self.options(), "-o", "ControlMaster=no", *self.address.ssh_args(), "--", remote_command(remote)]

    def run(self, remote: Sequence[str], data: bytes | None = None, timeout: float | None = 120.0,
            doing: str = "") -> subprocess.CompletedProcess[bytes]:
        """Run `remote` on the board and wait; a failure of ssh itself (exit 255) is one BackendError."""
        try:
            done = subprocess.run(self.argv(remote), input=data, capture_output=True, timeout=timeout, check=False,
                                  stdin=None if data is not None else subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise BackendError(f"board {self.address.url}: no answer in {timeout:g} s while {doing or 'working'}; "
                               "check the board") from None
        if done.returncode == SSH_FAILED:
            raise ssh_failure(self.address, done.stderr.decode(errors="replace"), doing)
        return done

    def send(self, remote: Sequence[str], source: IO[bytes], doing: str) -> subprocess.CompletedProcess[bytes]:
        """Run `remote` with `source` streamed to its standard input (an upload)."""
        done = subprocess.run(self.argv(remote), stdin=source, capture_output=True, check=False)
        if done.returncode == SSH_FAILED:
            raise ssh_failure(self.address, done.stderr.decode(errors="replace"), doing)
        return done

    def start(self, remote: Sequence[str], stderr: IO[bytes]) -> subprocess.Popen[bytes]:
        """Start `remote` with pipes to its standard input and output (the board's agent)."""
        return subprocess.Popen(self.argv(remote), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                                start_new_session=True)

    def _stop_master(self) -> None:
        if self._master is not None:
            if self._master.poll() is None:
                self._master.terminate()
                try:
                    self._master.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self._master.kill()
                    self._master.wait()
            self._master = None

    def close(self) -> None:
        """End the master connection and remove its socket."""
        self._stop_master()
        with contextlib.suppress(OSError):
            shutil.rmtree(self._folder)
