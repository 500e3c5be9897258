"""The runner's report, read from a container's stdout as it is written: a run is over once its runner has printed its
result, not once the engine has torn its container down.

The runner prints its RunResult as one line, then leaves (harness.measure.runner.entry). The engine then takes tens of
milliseconds to see the container end and tear it down (init, shim, cgroup, mounts, log), as long as it takes for a
bare container: the harness cannot shorten that, but need not wait for it. The Docker backend attaches to a run
container's stdout before it starts it and reads the engine's frames up to the first full line; its removals then wait
for the container's end and remove it while the harness stores the run and creates the next container, which starts
only after that. Frames are those of an attach without a TTY: an 8-byte header (stream, three zero bytes, big-endian
length), then the data.
"""

from __future__ import annotations

import contextlib
import select
import struct
import time
from typing import Any

FRAME_HEADER = struct.Struct(">BxxxL")


class StdoutReport:
    """One container's stdout, attached before the container starts (so no line is missed), read up to its first
    newline within a deadline."""

    def __init__(self, api: Any, container_id: str) -> None:
        """`api`: the Docker SDK's APIClient."""
        self._sock = api.attach_socket(container_id, params={"stdout": 1, "stream": 1})

    def first_line(self, deadline: float) -> str | None:
        """What the container printed up to and including its first newline; None when its stdout closed first (it
        ended, or the engine went) or the monotonic `deadline` passed."""
        data = b""
        while b"\n" not in data:
            header = self._read(FRAME_HEADER.size, deadline)
            if header is None:
                return None
            _, length = FRAME_HEADER.unpack(header)
            frame = self._read(length, deadline)
            if frame is None:
                return None
            data += frame
        return data.decode(errors="replace")

    def _read(self, size: int, deadline: float) -> bytes | None:
        """Exactly `size` bytes; None at the end of the stream or past the deadline."""
        data = b""
        while len(data) < size:
            pending = getattr(self._sock, "pending", lambda: 0)()  # a TLS socket's bytes already decrypted
            remaining = deadline - time.monotonic()
            if not pending and (remaining <= 0 or not select.select([self._sock], [], [], remaining)[0]):
                return None
            chunk = self._sock.recv(size - len(data)) if hasattr(self._sock, "recv") else self._sock.read(
                size - len(data))
            if not chunk:
                return None
            data += chunk
        return data

    def close(self) -> None:
        """Detach: the container goes on, and its output still reaches the engine's log."""
        with contextlib.suppress(OSError):
            self._sock.close()
