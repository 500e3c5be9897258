"""cgroup v1 and v2 on the harness's side: our own cgroup as paths, the per-run cgroups with their limits, and their
removal. Discovery and the readers the runner samples with are in harness.measure.cgroup_probe.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import time
from pathlib import Path
from typing import NamedTuple

from harness.core.records import Limits
from harness.measure.cgroup_probe import OOM_EVENTS_FILE, V1_CONTROLLERS, own_cgroup_dirs, parse_flat_keyed
from harness.measure.spec import CPU_PERIOD_US

SUPERVISOR_LEAF = "harness-supervisor"  # v2: where the harness's own processes live, beside its run cgroups
MOVE_ATTEMPTS = 20  # rounds of moving processes into the leaf (a process may fork while we move it)


class OwnCgroup(NamedTuple):
    """The cgroup(s) this process lives in. For v1, one directory per controller."""

    version: int  # 1 or 2; 0 when no memory controller is visible
    dirs: dict[str, Path]  # controller -> directory ("memory", "cpu", "cpuset"); v2: all the same dir


def discover() -> OwnCgroup:
    """This process's cgroup(s), as cgroup_probe finds them."""
    version, dirs = own_cgroup_dirs()
    return OwnCgroup(version, {name: Path(path) for name, path in dirs.items()})


def _write(path: Path, value: str) -> None:
    path.write_text(value)


class RunCgroup(NamedTuple):
    """A per-run child cgroup (one directory per v1 controller, one for v2), created with its limits."""

    version: int
    dirs: dict[str, Path]

    @property
    def procs_files(self) -> list[Path]:
        return sorted({d / "cgroup.procs" for d in self.dirs.values()})

    def pids(self) -> set[int]:
        """The processes inside; a cgroup removed meanwhile (its files then fail with ENOENT or ENODEV) has none."""
        found: set[int] = set()
        for path in self.procs_files:
            try:
                found.update(int(p) for p in path.read_text().split())
            except OSError as err:
                if err.errno not in (errno.ENOENT, errno.ENODEV):
                    raise
        return found

    def oom_events(self) -> dict[str, int]:
        """The memory controller's OOM counters: v2's memory.events (`oom`, `oom_kill`, ...), v1's memory.oom_control
        (`oom_kill`, and flags)."""
        return parse_flat_keyed((self.dirs["memory"] / OOM_EVENTS_FILE[self.version]).read_text())

    def remove(self) -> None:
        """Kill whatever is left inside, then rmdir; retried because exiting tasks linger briefly."""
        for _ in range(50):
            for pid in self.pids():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            remaining = [d for d in set(self.dirs.values()) if d.exists()]
            for directory in remaining:
                with contextlib.suppress(OSError):
                    directory.rmdir()
            if not any(d.exists() for d in remaining):
                return
            time.sleep(0.02)


class OomWatch:
    """Whether the OOM killer met a run cgroup: its oom_kill count, or the kernel's notice that the cgroup ran out of
    memory (v1: an eventfd registered on memory.oom_control, as Docker's engine does; v2: memory.events' `oom`). On
    cgroup v1 a script SIGKILLed at its limit has been seen with an oom_kill count of 0 in every read (CI, LiteRT's
    64 MiB Relu); the notice is raised as the cgroup runs out, before the OOM killer chooses what to kill."""

    def __init__(self, run: RunCgroup) -> None:
        """Registered before the script starts; where the kernel refuses the registration, or Python has no eventfd
        (3.9, on a board), the count alone decides."""
        self.run = run
        self._noticed = False
        self._event = self._control = -1
        if run.version != 1 or not hasattr(os, "eventfd"):
            return
        memory = run.dirs["memory"]
        try:
            self._event = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
            self._control = os.open(memory / "memory.oom_control", os.O_RDONLY | os.O_CLOEXEC)
            _write(memory / "cgroup.event_control", f"{self._event} {self._control}")
        except OSError:
            self.close()

    def met(self) -> bool:
        """Read once the script has ended, before the cgroup is removed (a removal notifies the eventfd too)."""
        if self._event >= 0 and not self._noticed:
            with contextlib.suppress(BlockingIOError):
                self._noticed = os.eventfd_read(self._event) > 0
        events = self.run.oom_events()  # v2's `oom` line is its notice; v1's file has none
        self._noticed |= events.get("oom", 0) > 0
        return self._noticed or events.get("oom_kill", 0) > 0

    def close(self) -> None:
        for fd in (self._event, self._control):
            if fd >= 0:
                os.close(fd)
        self._event = self._control = -1


def _subtree_enabled(directory: Path) -> bool:
    return set(V1_CONTROLLERS) <= set((directory / "cgroup.subtree_control").read_text().split())


def _move_processes(source: Path, leaf: Path) -> None:
    """Move every process of `source` into `leaf`; repeated because one may fork while the others move."""
    for _ in range(MOVE_ATTEMPTS):
        pids = (source / "cgroup.procs").read_text().split()
        if not pids:
            return
        for pid in pids:
            try:
                _write(leaf / "cgroup.procs", pid)
            except OSError as err:
                if err.errno != errno.ESRCH:  # exited meanwhile: nothing to move
                    raise
    raise OSError(errno.EBUSY, f"processes kept appearing in {source / 'cgroup.procs'}")


def run_parent(own: OwnCgroup) -> OwnCgroup:
    """The cgroup(s) under which run cgroups are created, ready for them.

    v1: our own cgroups. v2: our own cgroup, with memory, cpu and cpuset enabled for its children. The
    kernel refuses that (EBUSY) while the cgroup itself holds processes ("no internal processes"), which is
    the case in a systemd scope, a delegated slice and a container's namespace root; only the true root is
    exempt. So, as Docker-in-Docker does, every process of our cgroup first moves into a leaf
    SUPERVISOR_LEAF, and run cgroups are created beside it. A harness started from inside that leaf (a
    second command in the same shell) uses the leaf's parent, so the layout stays one level deep.
    """
    if own.version != 2:
        return own
    base = own.dirs["memory"]
    if base.name == SUPERVISOR_LEAF and _subtree_enabled(base.parent):
        base = base.parent
    else:
        missing = [c for c in V1_CONTROLLERS if c not in (base / "cgroup.controllers").read_text().split()]
        if missing:
            raise OSError(errno.ENOENT, f"controllers {', '.join(missing)} are not enabled for {base} by its parent"
                          " (systemd: Delegate=yes; by hand: +" + " +".join(missing) + " in the parent's"
                          " cgroup.subtree_control)")
        enable = " ".join(f"+{c}" for c in V1_CONTROLLERS)
        try:
            _write(base / "cgroup.subtree_control", enable)
        except OSError as err:
            if err.errno != errno.EBUSY:
                raise
            leaf = base / SUPERVISOR_LEAF
            leaf.mkdir(exist_ok=True)
            _move_processes(base, leaf)
            _write(base / "cgroup.subtree_control", enable)
    return OwnCgroup(2, {name: base for name in V1_CONTROLLERS})


def create_run_cgroup(parent: OwnCgroup, name: str, limits: Limits) -> RunCgroup:
    """Create `name` under `parent` (from run_parent: nested, as v2 delegation requires) and write its limits."""
    created = make_run_cgroup(parent, name)
    try:
        limit_run_cgroup(created, limits)
    except OSError:
        created.remove()
        raise
    return created


def make_run_cgroup(parent: OwnCgroup, name: str) -> RunCgroup:
    """Create `name` under `parent` without limits (v1: its cpuset gets the parent's cores and memory nodes, without
    which no process may join it)."""
    dirs: dict[str, Path] = {}
    try:
        if parent.version == 2:
            child = parent.dirs["memory"] / name
            child.mkdir()
            dirs = {c: child for c in V1_CONTROLLERS}
        else:
            for controller in V1_CONTROLLERS:
                dirs[controller] = parent.dirs[controller] / name
                dirs[controller].mkdir()
            cpuset_dir = dirs["cpuset"]
            for key in ("cpuset.mems", "cpuset.cpus"):
                _write(cpuset_dir / key, (cpuset_dir.parent / key).read_text().strip())
    except OSError:
        RunCgroup(parent.version, dirs).remove()
        raise
    return RunCgroup(parent.version, dirs)


def limit_run_cgroup(run: RunCgroup, limits: Limits) -> None:
    """Write a run's limits into its cgroup, freshly made or already holding a runner (a limit below what the cgroup
    uses fails on v1). Memory and memory+swap are both capped so a run never swaps silently past MEMORY+SWAP; a limit
    that is None is written as "no limit"."""
    memory_bytes, total_bytes, quota_us = limits.memory_bytes, limits.memory_swap_bytes, limits.cpu_quota_us
    period_us = limits.cpu_period_us or CPU_PERIOD_US
    if run.version == 2:
        child = run.dirs["memory"]
        _write(child / "memory.max", _or_max(memory_bytes))
        if (child / "memory.swap.max").exists():
            swap_bytes = None if memory_bytes is None or total_bytes is None else total_bytes - memory_bytes
            _write(child / "memory.swap.max", _or_max(swap_bytes))
        _write(child / "cpu.max", f"{_or_max(quota_us or None)} {period_us}")
        if limits.cpuset:
            _write(child / "cpuset.cpus", limits.cpuset)
        return
    memory = run.dirs["memory"]
    _write(memory / "memory.limit_in_bytes", str(_or_unlimited(memory_bytes)))
    if (memory / "memory.memsw.limit_in_bytes").exists():
        _write(memory / "memory.memsw.limit_in_bytes", str(_or_unlimited(total_bytes)))
    _write(run.dirs["cpu"] / "cpu.cfs_period_us", str(period_us))
    _write(run.dirs["cpu"] / "cpu.cfs_quota_us", str(_or_unlimited(quota_us or None)))
    if limits.cpuset:
        _write(run.dirs["cpuset"] / "cpuset.cpus", limits.cpuset)


def _or_max(value: int | None) -> str:
    """cgroup v2's spelling of a limit: the number, or `max` for none."""
    return "max" if value is None else str(value)


def _or_unlimited(value: int | None) -> int:
    """cgroup v1's spelling of a limit: the number, or -1 for none."""
    return -1 if value is None else value
