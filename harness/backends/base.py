"""The backend protocol: one limited environment per run, and an honest account of the limits it applied."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from harness.core.records import RunOutcome, RunResult
from harness.measure.spec import RunSpec

if TYPE_CHECKING:  # type-only: the local backend also runs on a bare board Python (harness.backends.target.agent)
    from harness.models.resolve import ModelInfo

# The script runs with oom_score_adj=1000, so an OOM kill of the runner is the runner's own memory, not the model's:
# such a run is an `error`, never the model's `oom`.
RUNNER_KILLED = ("the harness's runner was killed at the memory limit (its own memory, not the model's: the script "
                 "is always the OOM killer's first choice); raise MEMORY (an idle script peaks near 10 MiB)")


def killed_at_the_limit(result: RunResult, oom_killed: bool) -> RunResult:
    """The runner reads its cgroup's oom_kill count as the script ends; on cgroup v1 that count can miss a kill that
    the backend's own look (the kernel's out-of-memory notice for the run cgroup, or the engine's OOMKilled flag)
    sees. A script that died of SIGKILL counts as `oom` when either says so."""
    if result.status == "error" and oom_killed and result.signal == 9:
        result.status = "oom"
    return result


@dataclass(frozen=True)
class Elsewhere:
    """Where a backend's runs run when not on this host (TARGET's boards): the cores a plan pins to, what every record
    says of the machine (its provenance), and how many machines of that kind take runs at once (a farm's boards)."""

    cores: tuple[int, ...]
    metadata: dict[str, Any]
    machines: int = 1


class Backend(Protocol):
    """Starts one limited environment per run, runs the runner in it, enforces the timeout, cleans up.

    Runs may come from several threads at once (parallel slots, a cluster worker's tasks): `run` is called
    concurrently, and `cancel` from another thread than the runs it stops."""

    name: str
    warm_runners: bool
    """Whether each run's runner is started ahead, during the teardown of the run before (harness.backends.warm).
    Sessions turn it off where runs share the host or come from several threads: a runner started ahead would start
    beside another run's measured script."""
    elsewhere: Elsewhere | None
    """None: the runs run on this host. Else the machines they run on (harness.backends.target)."""
    runner_off_workload_cores: bool
    """Whether a run's runner (its sampler) is kept off a pinned workload's cores. Sessions turn it off where runs
    share the host in slots: the other cores are other runs' (the runner then stays on its own run's)."""

    def describe(self) -> dict[str, Any]:
        """What every result of this backend should carry (isolation kind, image digest, engine...)."""
        ...

    def check(self, models: Sequence[ModelInfo]) -> None:
        """Raise one BackendError before the first run for what would fail every run of a model here."""
        ...

    def run(self, spec: RunSpec) -> RunOutcome:
        """The runner's RunResult, the limits actually applied, and what only the outside sees."""
        ...

    def cancel(self) -> None:
        """Kill every run in flight, from another thread than theirs (their `run` calls then return)."""
        ...

    def close(self) -> None:
        """Release what the backend holds between runs; nothing of it persists after the session."""
        ...


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
