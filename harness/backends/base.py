"""The backend protocol, and the RunResult a backend reports when the runner could not report itself."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Protocol

from harness.spec import RunSpec

STDERR_TAIL_CHARS = 2000
# The script runs with oom_score_adj=1000, so an OOM kill of the runner is the runner's own memory, not the model's:
# such a run is an `error`, never the model's `oom`.
RUNNER_KILLED = ("the harness's runner was killed at the memory limit (its own memory, not the model's: the script "
                 "is always the OOM killer's first choice); raise MEMORY (an idle script peaks near 14 MiB)")


class Backend(Protocol):
    """Starts one limited environment per run, runs the runner in it, enforces the timeout, cleans up."""

    name: str

    def describe(self) -> dict[str, Any]:
        """What every result of this backend should carry (isolation kind, image digest, engine...)."""
        ...

    def run(self, spec: RunSpec) -> dict[str, Any]:
        """The runner's RunResult plus what only the outside sees (OOM flags, exit status, overhead_s)."""
        ...

    def close(self) -> None: ...


def outside_result(status: str, runtime_s: float, detail: str, exit_code: int | None = None,
                   signal: int | None = None) -> dict[str, Any]:
    """A RunResult for a run whose runner died or never reported (killed at the memory limit, engine gone)."""
    return {
        "status": status, "exit_code": exit_code, "signal": signal, "stderr_tail": detail[-STDERR_TAIL_CHARS:],
        "runtime_s": runtime_s, "load_s": None, "latency_ms": None, "latencies_ms": [], "throughput_ips": None,
        "peak_memory_mib": None, "peak_rss_mib": None, "avg_memory_mib": None, "avg_memory_mib_by_phase": {},
        "cpu_s": None, "samples": 0, "metrics": {},
    }


def cache_model_file(path: str | Path) -> None:
    """Read the model file from the harness's own process just before a run, so every run finds it in the page cache.

    A page-cache page is charged to the memory cgroup that first reads it. Without this, whichever run first read
    the file (after boot, or after the kernel evicted it) would carry its whole size in peak_memory_mib and the
    others nothing. Read here, the pages are charged to the harness's cgroup, and no run's peak includes them.
    A script profiled as a whole has no model (an empty path): nothing to read."""
    if not str(path):
        return
    buffer = bytearray(1024 * 1024)
    with open(path, "rb", buffering=0) as handle:
        os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_SEQUENTIAL)
        while handle.readinto(buffer):
            pass
