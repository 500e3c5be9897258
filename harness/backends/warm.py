"""A runner started ahead of its run, so that its interpreter's start and imports leave the gap between two scripts.

Once a run's measurement is over (its script has ended and the runner has read the cgroup's figures, which the runner
says by closing its stdout), the local backend makes a fresh cgroup and starts the next runner in it, exactly as a
run's runner starts (harness.measure.launch: a /bin/sh joins the cgroup, then execs the interpreter), so every page it
touches is still charged to the run it will measure, from its first. It starts while the runner before puts its result
together and exits, then waits on a pipe for its spec while the harness stores and summarises the run before. The
next run writes its limits into that cgroup (above the runner's few MiB; a limit that does not take means a cold
start) and hands the spec over; the runner goes on as any runner does. A runner nobody takes is killed and its cgroup
removed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from harness.measure import cgroups
from harness.measure.launch import inside, runner_command


@dataclass
class WarmRunner:
    """A started runner waiting on stdin for its spec, in a cgroup of its own without limits yet."""

    process: subprocess.Popen[bytes]
    cgroup: cgroups.RunCgroup
    workdir: Path
    spawned: float  # monotonic, when it was started

    @property
    def err_path(self) -> Path:
        return self.workdir / "runner.err"


def start_warm(parent: cgroups.OwnCgroup, name: str) -> WarmRunner:
    """A runner started in a new cgroup `name` under `parent`. It joins the memory cgroup (v2: the run's one cgroup)
    only: on v1 the cpu and cpuset cgroups it may also join depend on the spec (see handover)."""
    workdir = Path(tempfile.mkdtemp(prefix="harness-local-"))
    cgroup: cgroups.RunCgroup | None = None
    try:
        cgroup = cgroups.make_run_cgroup(parent, name)
        command = inside([cgroup.dirs["memory"] / "cgroup.procs"], runner_command(Path("-"), workdir / "result.json"))
        spawned = time.monotonic()
        with open(workdir / "runner.err", "wb") as err:  # WarmRunner.err_path
            process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                       start_new_session=True)
    except BaseException:
        if cgroup is not None:
            cgroup.remove()
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    return WarmRunner(process, cgroup, workdir, spawned)


def handover(warm: WarmRunner, runner_joins: list[Path], spec_text: str) -> None:
    """Once its cgroup has the run's limits: move the runner into the cgroups it joins that it is not in yet (v1: the
    cpu and cpuset cgroups, unless it is kept apart from a pinned workload), then write the spec and close the pipe
    (the runner reads nothing before it closes)."""
    joined = warm.cgroup.dirs["memory"] / "cgroup.procs"
    for procs in runner_joins:
        if procs == joined:
            continue
        try:
            procs.write_text(str(warm.process.pid))
        except OSError as err:  # it must not measure from the wrong cgroup: it ends, and the run's error says why
            with open(warm.err_path, "a") as log:
                log.write(f"harness-join: cannot join {procs}: {err.strerror}\n")
            with contextlib.suppress(ProcessLookupError):
                os.killpg(warm.process.pid, signal.SIGKILL)
            return
    stdin = warm.process.stdin
    assert stdin is not None
    try:
        stdin.write(spec_text.encode())
        stdin.close()
    except BrokenPipeError:  # it died before (a failed join): the backend reads why from its stderr
        with contextlib.suppress(OSError):
            stdin.close()


def discard(warm: WarmRunner) -> None:
    """Kill a runner nobody took (it never started a script) or reap one that has ended, then remove its cgroup and
    files."""
    if warm.process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(warm.process.pid, signal.SIGKILL)
        warm.process.wait()
    for pipe in (warm.process.stdin, warm.process.stdout):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()
    warm.cgroup.remove()
    shutil.rmtree(warm.workdir, ignore_errors=True)
