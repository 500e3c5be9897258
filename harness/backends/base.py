"""The backend protocol, and the RunResult a backend reports when the runner could not report itself."""

from __future__ import annotations

from typing import Any, Protocol

from harness.spec import RunSpec

STDERR_TAIL_CHARS = 2000


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
