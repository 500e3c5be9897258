"""The board's agent: started over SSH in the session's folder on the board, it runs each run it is sent through the
local backend there, exactly as `BACKEND=local` runs it on a host: the same runner, the board's cgroups where its
kernel lets this user write them (else rlimits, and the record says so), the board's own peaks.

One JSON object a line each way. The host sends {"run": RunSpec} and gets {"outcome": ..., "board": ...}, or {"error":
...}. The agent starts by saying {"ready": ..., "describe": ..., "metadata": ...}. When its standard input closes (the
session ended, the host was interrupted, or the connection was lost), it cancels the run in flight, removes the
session's folder and exits: nothing of the session stays on the board. Standard library and this package only.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import queue
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO, Any

from harness.backends.local import LocalBackend
from harness.core.errors import HarnessError, StorageError
from harness.core.records import RunOutcome
from harness.measure import board_side
from harness.measure.provenance import collect_metadata
from harness.measure.spec import RunSpec


def outcome_dict(outcome: RunOutcome) -> dict[str, Any]:
    return {"result": outcome.result.to_dict(), "applied": outcome.applied.to_dict() if outcome.applied else None,
            "overhead_s": outcome.overhead_s, "clock_s": outcome.clock_s}


class Agent:
    def __init__(self, folder: Path, out: IO[str]) -> None:
        self.folder, self.out = folder, out
        self._lock = threading.Lock()
        self.backend = LocalBackend()  # each run's runner started ahead where the board has cgroups, as on a host
        self._busy = threading.Event()  # a run is in flight

    def say(self, message: dict[str, Any]) -> None:
        with self._lock:
            self.out.write(json.dumps(message) + "\n")
            self.out.flush()

    def run(self, spec_data: dict[str, Any]) -> None:
        for key in ("model", "script", "inputs_file"):  # sent relative to the session's folder
            if spec_data.get(key):
                spec_data[key] = str(self.folder / spec_data[key])
        before = board_side.snapshot()
        try:
            outcome = self.backend.run(RunSpec.from_dict(spec_data))
        except StorageError as err:
            self.say({"error": str(err), "kind": "storage"})
            return
        except HarnessError as err:
            self.say({"error": str(err), "kind": type(err).__name__})
            return
        self.say({"outcome": outcome_dict(outcome), "board": {"before": before, "after": board_side.snapshot()}})

    def work(self, runs: queue.Queue[dict[str, Any] | None]) -> None:
        """Every run, one after another on this one thread (the local backend's runner started ahead is this
        thread's), until the queue's end."""
        while (spec_data := runs.get()) is not None:
            self._busy.set()
            try:
                self.run(spec_data)
            finally:
                self._busy.clear()

    def serve(self, requests: IO[str]) -> None:
        """Hand each request to the worker while standard input is watched for its end."""
        runs: queue.Queue[dict[str, Any] | None] = queue.Queue()
        worker = threading.Thread(target=self.work, args=(runs,), daemon=True, name="agent-runs")
        worker.start()
        for line in requests:
            request = json.loads(line)
            if "run" in request:
                runs.put(request["run"])
            elif request.get("bye"):
                break
        if self._busy.is_set():
            self.backend.cancel()  # the host is gone or stopped: its run in flight goes
        runs.put(None)
        worker.join(timeout=30)
        self.backend.close()


def serve() -> None:
    """The agent's entry point (its working folder is the session's folder on the board)."""
    folder = Path.cwd()
    lock = open(folder / board_side.LOCK_NAME, "a")  # noqa: SIM115 - held for the agent's life
    fcntl.flock(lock, fcntl.LOCK_EX)
    scratch = folder / "tmp"  # the runners' scratch files live in the session's folder, and go with it
    scratch.mkdir(exist_ok=True)
    os.environ["TMPDIR"] = tempfile.tempdir = str(scratch)
    agent = Agent(folder, sys.stdout)
    try:
        agent.say({"ready": True, "pid": os.getpid(), "describe": agent.backend.describe(),
                   "metadata": collect_metadata(),
                   "swept": {owner: len(paths) for owner, paths in agent.backend.swept.items()}})
        agent.serve(sys.stdin)
    finally:
        with contextlib.suppress(Exception):
            agent.backend.close()
        board_side.clean(str(folder))
