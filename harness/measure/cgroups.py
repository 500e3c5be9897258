"""cgroup v1 and v2: discovery, cheap readers (pread on fds kept open), and limit writers.

The runner imports this module at every run's start, so it stays light: named tuples, not dataclasses (whose module
and generated methods cost the runner's start more than the rest of this file).

Discovery joins /proc/self/mountinfo (where each hierarchy is mounted and which part of it is visible)
with /proc/self/cgroup (which cgroup we are in). That one rule finds our cgroup on a host, in a Docker
container (where the container's cgroup is mounted as the root), and in a delegated systemd slice.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import time
from pathlib import Path
from typing import NamedTuple

V1_CONTROLLERS = ("memory", "cpu", "cpuset")
SUPERVISOR_LEAF = "harness-supervisor"  # v2: where the harness's own processes live, beside its run cgroups
MOVE_ATTEMPTS = 20  # rounds of moving processes into the leaf (a process may fork while we move it)


class Hierarchy(NamedTuple):
    mount_point: Path
    root: str  # the part of the hierarchy visible at mount_point


def _mounts() -> tuple[dict[str, Hierarchy], Hierarchy | None]:
    """v1 hierarchies by controller, and the v2 (unified) hierarchy if one is mounted."""
    v1: dict[str, Hierarchy] = {}
    v2: Hierarchy | None = None
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        fields, extra = left.split(), right.split()
        if not extra:
            continue
        hierarchy = Hierarchy(Path(fields[4]), fields[3])
        if extra[0] == "cgroup2":
            v2 = v2 or hierarchy
        elif extra[0] == "cgroup":
            for option in extra[2].split(","):
                v1.setdefault(option, hierarchy)
    return v1, v2


def _membership() -> dict[str, str]:
    """Controller -> cgroup path from /proc/self/cgroup; the v2 entry is keyed ''."""
    paths: dict[str, str] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            paths[controller] = path
    return paths


def _locate(hierarchy: Hierarchy, path: str) -> Path:
    relative = os.path.relpath(path, hierarchy.root) if path.startswith(hierarchy.root) else "."
    candidate = (hierarchy.mount_point / relative).resolve()
    # A private cgroup namespace can show paths the mount does not: fall back to the mount's root.
    return candidate if candidate.is_dir() else hierarchy.mount_point


class OwnCgroup(NamedTuple):
    """The cgroup(s) this process lives in. For v1, one directory per controller."""

    version: int  # 1 or 2; 0 when no memory controller is visible
    dirs: dict[str, Path]  # controller -> directory ("memory", "cpu", "cpuset"); v2: all the same dir


def discover() -> OwnCgroup:
    v1, v2 = _mounts()
    membership = _membership()
    if v2 is not None and "" in membership:
        unified = _locate(v2, membership[""])
        available = (v2.mount_point / "cgroup.controllers").read_text().split() if (
            v2.mount_point / "cgroup.controllers").exists() else []
        if "memory" in available:
            return OwnCgroup(2, {name: unified for name in V1_CONTROLLERS})
    if "memory" in v1:
        dirs = {name: _locate(v1[name], membership.get(name, "/")) for name in V1_CONTROLLERS if name in v1}
        return OwnCgroup(1, dirs)
    return OwnCgroup(0, {})


class FileReader:
    """One cgroup file opened once and re-read with pread: no open/close per sample."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)

    def read(self) -> str:
        return os.pread(self._fd, 65536, 0).decode()

    def close(self) -> None:
        os.close(self._fd)


def parse_flat_keyed(text: str) -> dict[str, int]:
    """memory.stat, cpu.stat, memory.events, memory.oom_control: 'key value' lines."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if value.strip().lstrip("-").isdigit():
            values[key] = int(value)
    return values


def flat_keyed_value(text: str, key: str) -> int | None:
    """One key of a flat-keyed file without parsing the others: the sampler reads memory.stat (40-odd lines) up to
    a thousand times a second, and parsing every line cost twice what reading it does."""
    start = ("\n" + text).find(f"\n{key} ")
    if start < 0:
        return None
    end = text.find("\n", start)
    return int(text[start + len(key) + 1:end if end >= 0 else None])


class MemoryProbe:
    """Reads a cgroup's memory usage, working set, kernel peak, OOM kills and CPU throttling."""

    def __init__(self, cgroup: OwnCgroup) -> None:
        memory = cgroup.dirs["memory"]
        self.version = cgroup.version
        if self.version == 2:
            names = {"usage": "memory.current", "stat": "memory.stat", "peak": "memory.peak",
                     "events": "memory.events"}
            self._inactive_key = "inactive_file"
        else:
            names = {"usage": "memory.usage_in_bytes", "stat": "memory.stat", "peak": "memory.max_usage_in_bytes",
                     "events": "memory.oom_control"}
            self._inactive_key = "total_inactive_file"
        self._readers = {key: FileReader(memory / name) for key, name in names.items() if (memory / name).exists()}
        cpu_stat = cgroup.dirs.get("cpu", memory) / "cpu.stat"
        self._cpu = FileReader(cpu_stat) if cpu_stat.exists() else None

    @property
    def has_kernel_peak(self) -> bool:
        return "peak" in self._readers

    def usage_bytes(self) -> int:
        return int(self._readers["usage"].read())

    def working_set_bytes(self) -> int:
        """Usage minus inactive page cache: what `docker stats` and kubelet call the working set."""
        usage = self.usage_bytes()
        inactive = flat_keyed_value(self._readers["stat"].read(), self._inactive_key) or 0
        return max(usage - inactive, 0)

    def peak_bytes(self) -> int | None:
        return int(self._readers["peak"].read()) if "peak" in self._readers else None

    def oom_kills(self) -> int:
        return parse_flat_keyed(self._readers["events"].read()).get("oom_kill", 0) if "events" in self._readers else 0

    def cpu_stat(self) -> dict[str, int]:
        """nr_periods, nr_throttled and throttled time in ns (v1 throttled_time, v2 throttled_usec*1000)."""
        if self._cpu is None:
            return {}
        stat = parse_flat_keyed(self._cpu.read())
        throttled_ns = stat.get("throttled_time", stat.get("throttled_usec", 0) * 1000)
        return {"nr_periods": stat.get("nr_periods", 0), "nr_throttled": stat.get("nr_throttled", 0),
                "throttled_ns": throttled_ns}

    def close(self) -> None:
        for reader in [*self._readers.values(), *([self._cpu] if self._cpu else [])]:
            reader.close()


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
        found: set[int] = set()
        for path in self.procs_files:
            if path.exists():
                found.update(int(p) for p in path.read_text().split())
        return found

    def oom_kills(self) -> int:
        memory = self.dirs["memory"]
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        return parse_flat_keyed((memory / name).read_text()).get("oom_kill", 0)

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


def create_run_cgroup(
    parent: OwnCgroup, name: str, memory_bytes: int, swap_bytes: int,
    cpu_quota_us: int | None, cpu_period_us: int, cpuset: str | None,
) -> RunCgroup:
    """Create `name` under `parent` (from run_parent: nested, as v2 delegation requires) and write its limits.

    Memory and memory+swap are both capped so a run never swaps silently past MEMORY+SWAP.
    """
    dirs: dict[str, Path] = {}
    try:
        if parent.version == 2:
            child = parent.dirs["memory"] / name
            child.mkdir()
            dirs = {c: child for c in V1_CONTROLLERS}
            _write(child / "memory.max", str(memory_bytes))
            if (child / "memory.swap.max").exists():
                _write(child / "memory.swap.max", str(swap_bytes))
            _write(child / "cpu.max", f"{cpu_quota_us if cpu_quota_us else 'max'} {cpu_period_us}")
            if cpuset:
                _write(child / "cpuset.cpus", cpuset)
        else:
            for controller in V1_CONTROLLERS:
                dirs[controller] = parent.dirs[controller] / name
                dirs[controller].mkdir()
            memory = dirs["memory"]
            _write(memory / "memory.limit_in_bytes", str(memory_bytes))
            if (memory / "memory.memsw.limit_in_bytes").exists():
                _write(memory / "memory.memsw.limit_in_bytes", str(memory_bytes + swap_bytes))
            _write(dirs["cpu"] / "cpu.cfs_period_us", str(cpu_period_us))
            _write(dirs["cpu"] / "cpu.cfs_quota_us", str(cpu_quota_us or -1))
            cpuset_dir = dirs["cpuset"]
            _write(cpuset_dir / "cpuset.mems", (cpuset_dir.parent / "cpuset.mems").read_text().strip())
            _write(cpuset_dir / "cpuset.cpus", cpuset or (cpuset_dir.parent / "cpuset.cpus").read_text().strip())
    except OSError:
        RunCgroup(parent.version, dirs).remove()
        raise
    return RunCgroup(parent.version, dirs)

