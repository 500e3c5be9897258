"""A loopback board for benchmarks: this host's own OpenSSH server on 127.0.0.1 at a free port, with a key and a
known_hosts file made for it, so that TARGET runs on the same kernel, cores and cgroups as a local session (the
only difference being the SSH path). Needs `/usr/sbin/sshd` (Debian: openssh-server) and root."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SSHD = "/usr/sbin/sshd"
PYTHON_DIR = os.path.dirname(os.path.realpath(getattr(sys, "_base_executable", sys.executable)))
"""First on the board's PATH: the interpreter this host's sessions run, so `harness target setup` makes the board's
venv from the same Python (a distribution's python3 is built with other optimisations, and runs a bench loop's
Python a few percent faster or slower)."""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def loopback_board(folder: Path) -> Iterator[tuple[str, Path]]:
    """(TARGET url, ssh_config) of this host's sshd on loopback, stopped on exit."""
    if not Path(SSHD).exists() or shutil.which("ssh") is None:
        raise SystemExit(f"a loopback board needs {SSHD} and ssh (apt-get install openssh-server openssh-client)")
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("client", "host"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(folder / name)], check=True)
    (folder / "authorized_keys").write_text((folder / "client.pub").read_text())
    port = _free_port()
    (folder / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {folder / 'host'}\n"
        f"AuthorizedKeysFile {folder / 'authorized_keys'}\nPasswordAuthentication no\n"
        f"PermitRootLogin prohibit-password\nStrictModes no\nPidFile {folder / 'sshd.pid'}\n"
        f"SetEnv PATH={PYTHON_DIR}:/usr/local/bin:/usr/bin:/bin\n")
    host_key = " ".join((folder / "host.pub").read_text().split()[:2])
    (folder / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_key}\n")
    config = folder / "ssh_config"
    config.write_text(f"Host 127.0.0.1\n  IdentityFile {folder / 'client'}\n  IdentitiesOnly yes\n"
                      f"  UserKnownHostsFile {folder / 'known_hosts'}\n  StrictHostKeyChecking yes\n")
    Path("/run/sshd").mkdir(exist_ok=True)
    server = subprocess.Popen([SSHD, "-D", "-e", "-f", str(folder / "sshd_config")], stderr=subprocess.DEVNULL)
    url = f"ssh://root@127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while subprocess.run(["ssh", "-F", str(config), "-o", "BatchMode=yes", "-p", str(port), "root@127.0.0.1",
                              "true"], capture_output=True).returncode != 0:
            if time.monotonic() > deadline:
                raise SystemExit("the loopback sshd did not answer in 30 s")
            time.sleep(0.2)
        yield url, config
    finally:
        server.terminate()
        server.wait()
