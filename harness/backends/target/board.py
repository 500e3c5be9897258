"""The host's view of one board: its facts, its environment (the venv `harness target setup` made) and what is sent
to it. Every command runs through the board's one Connection; board_side's source goes as `python -c` text, so
nothing needs to be installed on the board for these."""

from __future__ import annotations

import json
import subprocess
import tarfile
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from harness.backends.target.transport import Connection
from harness.core.errors import BackendError
from harness.measure import board_side

BASE = ".cache/harness-target"
"""Everything the harness keeps on a board, relative to its user's home: env/ (the venv) and sessions/<id>/."""
ENV = f"{BASE}/env"
ENV_PYTHON = f"{ENV}/bin/python"
SESSIONS = f"{BASE}/sessions"
MIN_PYTHON = (3, 9)
NOT_FOUND = 127  # the board's shell: no such command
SOURCE = Path(board_side.__file__).read_text()


class Board:
    """One reachable board and the Python that will run there (its venv's, else python3)."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.address = connection.address
        self.facts: dict[str, Any] = {}
        self.python = ENV_PYTHON

    @property
    def url(self) -> str:
        return self.address.url

    def probe(self) -> dict[str, Any]:
        """The board's facts, from its venv's Python where `harness target setup` made one, else from python3."""
        for python in (ENV_PYTHON, "python3"):
            done = self.connection.run([python, "-c", SOURCE, "facts"], doing="reading the board's facts")
            if done.returncode == NOT_FOUND:
                continue
            if done.returncode != 0:
                raise BackendError(f"board {self.url}: {python} failed ({last_line(done.stderr)}); check its Python")
            self.python, self.facts = python, json.loads(done.stdout)
            self.facts["env"] = python == ENV_PYTHON
            version = tuple(int(part) for part in self.facts["python"].split(".")[:2])
            if version < MIN_PYTHON:
                raise BackendError(f"board {self.url}: its Python is {self.facts['python']}; the harness needs "
                                   f"{MIN_PYTHON[0]}.{MIN_PYTHON[1]} or newer there (install python3 on the board)")
            return self.facts
        raise BackendError(f"board {self.url}: no python3 on the board's PATH; install Python 3.9 or newer there "
                           "(e.g. `sudo apt-get install python3`)")

    def call(self, command: str, *args: str, data: bytes | None = None, python: str | None = None,
             doing: str = "") -> subprocess.CompletedProcess[bytes]:
        """One of board_side's commands on the board; its failure is one BackendError (a full disk named)."""
        done = self.connection.run([python or self.python, "-c", SOURCE, command, *args], data=data,
                                   doing=doing or command)
        check_done(self.url, done, doing or command)
        return done

    def upload(self, folder: str, files: Iterable[tuple[Path, str]], python: str | None = None) -> None:
        """Each (local file or folder, name under `folder`) sent to the board in one tar stream, over the connection
        (written to a temporary file first: its size is known, and ssh reads it at its own pace)."""
        with tempfile.TemporaryFile() as bundle:
            with tarfile.open(fileobj=bundle, mode="w") as archive:
                for path, name in files:
                    archive.add(str(path), arcname=name, filter=_plain)
            bundle.seek(0)
            done = self.connection.send([python or self.python, "-c", SOURCE, "receive", folder], bundle,
                                        "copying files")
        check_done(self.url, done, "copying files")


def _plain(member: tarfile.TarInfo) -> tarfile.TarInfo | None:
    """Files and folders only, owned by whoever unpacks them; caches left out."""
    if "__pycache__" in member.name or not (member.isfile() or member.isdir()):
        return None
    member.uid = member.gid = 0
    member.uname = member.gname = ""
    return member


def last_line(data: bytes) -> str:
    lines = [line for line in data.decode(errors="replace").splitlines() if line.strip()]
    return lines[-1].strip() if lines else "no message"


def check_done(url: str, done: subprocess.CompletedProcess[bytes], doing: str) -> None:
    """One BackendError for a board-side command that failed: a full disk gets its own fix."""
    if done.returncode == 0:
        return
    if done.returncode == board_side.NO_SPACE_EXIT:
        raise BackendError(f"board {url}: {last_line(done.stderr)} while {doing}; free space on the board (its "
                           f"~/{BASE} holds the harness's files; `harness target clean {url}` removes them)")
    raise BackendError(f"board {url}: {doing} failed ({last_line(done.stderr)})")
