"""Which cgroups this process is in, and cheap readers of what they hold (pread on file descriptors kept open).

Discovery joins /proc/self/mountinfo (where each hierarchy is mounted and which part of it is visible) with
/proc/self/cgroup (which cgroup we are in). That one rule finds our cgroup on a host, in a Docker container (where
the container's cgroup is mounted as the root), and in a delegated systemd slice.

The runner imports this module at the start of every run, so it needs nothing but os: no pathlib, no typing, no
dataclasses (each of which costs the runner's start more than this whole module). harness.measure.cgroups builds
the harness's side (run cgroups, their limits) on it.
"""

from __future__ import annotations

import os

V1_CONTROLLERS = ("memory", "cpu", "cpuset")


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def _mounts() -> tuple[dict[str, tuple[str, str]], tuple[str, str] | None]:
    """v1 hierarchies by controller, and the v2 (unified) hierarchy if one is mounted: each as (mount point, the
    part of the hierarchy visible there)."""
    v1: dict[str, tuple[str, str]] = {}
    v2: tuple[str, str] | None = None
    for line in _read("/proc/self/mountinfo").splitlines():
        left, _, right = line.partition(" - ")
        fields, extra = left.split(), right.split()
        if not extra:
            continue
        hierarchy = (fields[4], fields[3])
        if extra[0] == "cgroup2":
            v2 = v2 or hierarchy
        elif extra[0] == "cgroup":
            for option in extra[2].split(","):
                v1.setdefault(option, hierarchy)
    return v1, v2


def _membership() -> dict[str, str]:
    """Controller -> cgroup path from /proc/self/cgroup; the v2 entry is keyed ''."""
    paths: dict[str, str] = {}
    for line in _read("/proc/self/cgroup").splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            paths[controller] = path
    return paths


def _locate(hierarchy: tuple[str, str], path: str) -> str:
    mount_point, root = hierarchy
    relative = os.path.relpath(path, root) if path.startswith(root) else "."
    candidate = os.path.realpath(os.path.join(mount_point, relative))
    # A private cgroup namespace can show paths the mount does not: fall back to the mount's root.
    return candidate if os.path.isdir(candidate) else mount_point


def own_cgroup_dirs() -> tuple[int, dict[str, str]]:
    """(cgroup version, controller -> directory) of this process: 1 with a directory per v1 controller ("memory",
    "cpu", "cpuset"), 2 with the one unified directory under each name, 0 and none without a memory controller."""
    v1, v2 = _mounts()
    membership = _membership()
    if v2 is not None and "" in membership:
        unified = _locate(v2, membership[""])
        controllers = os.path.join(v2[0], "cgroup.controllers")
        if "memory" in (_read(controllers).split() if os.path.exists(controllers) else []):
            return 2, dict.fromkeys(V1_CONTROLLERS, unified)
    if "memory" in v1:
        return 1, {name: _locate(v1[name], membership.get(name, "/")) for name in V1_CONTROLLERS if name in v1}
    return 0, {}


class FileReader:
    """One cgroup file opened once and re-read with pread: no open/close per sample."""

    def __init__(self, path: str) -> None:
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


OOM_EVENTS_FILE = {2: "memory.events", 1: "memory.oom_control"}
"""The memory controller's file of OOM counters (`oom_kill`; v2 also `oom`, the notice), by cgroup version."""


class MemoryProbe:
    """Reads a cgroup's memory usage, working set, kernel peak, OOM kills and CPU throttling."""

    def __init__(self, version: int, dirs: dict[str, str]) -> None:
        """`version` and `dirs` as own_cgroup_dirs() gives them (directories as strings or paths)."""
        memory = str(dirs["memory"])
        self.version = version
        if version == 2:
            names = {"usage": "memory.current", "stat": "memory.stat", "peak": "memory.peak",
                     "events": OOM_EVENTS_FILE[2]}
            self._inactive_key = "inactive_file"
        else:
            names = {"usage": "memory.usage_in_bytes", "stat": "memory.stat", "peak": "memory.max_usage_in_bytes",
                     "events": OOM_EVENTS_FILE[1]}
            self._inactive_key = "total_inactive_file"
        paths = {key: os.path.join(memory, name) for key, name in names.items()}
        self._readers = {key: FileReader(path) for key, path in paths.items() if os.path.exists(path)}
        cpu_stat = os.path.join(str(dirs.get("cpu", memory)), "cpu.stat")
        self._cpu = FileReader(cpu_stat) if os.path.exists(cpu_stat) else None

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
