"""What else the machine did while a run ran: the CPU time of everything but the run, the hypervisor's steal, and the
clock of the run's cores. A run that shared its machine measures the machine's load as much as its model; the record
says so, and the summary names the models whose runs saw it (harness.analysis.stats).

Read from /proc/stat and cpufreq's scaling_cur_freq, standard library only: the runner reads it inside the run's
environment (a container's /proc/stat is the host's, a board's its own), twice per run.
"""

from __future__ import annotations

import os
from contextlib import suppress

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:
    from typing import Any

NOISY_OTHER_CORES = 0.25
"""Other processes' CPU time, in cores on average over the run, from which a run is called noisy: a quarter of a core
busy besides the run is enough to move a 1-CPU latency by a few percent on a small host (docs/measurement.md: noisy)."""
NOISY_STEAL = 0.01
"""The share of the machine's CPU time a hypervisor gave to other guests, from which a run is called noisy."""
NOISY_CLOCK_DROP = 0.10
"""A fall of the run's cores' clock between its start and its end, from which a run is called noisy."""
_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def cpu_times() -> dict[str, int] | None:
    """The machine's aggregate CPU times in clock ticks (/proc/stat's `cpu` line), or None where it cannot be read."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            first = stat.readline().split()
    except OSError:
        return None
    if not first or first[0] != "cpu":
        return None
    return dict(zip(_FIELDS, (int(value) for value in first[1:9]), strict=False))


def clock_mhz(cores: list[int]) -> float | None:
    """The lowest current clock of `cores` in MHz (cpufreq), or None where the kernel does not expose it (most VMs)."""
    found = []
    for core in cores:
        with suppress(OSError, ValueError), open(f"/sys/devices/system/cpu/cpu{core}/cpufreq/scaling_cur_freq",
                                                 encoding="ascii") as freq:
            found.append(int(freq.read()) / 1000.0)
    return min(found) if found else None


def script_affinity(pid: int) -> list[int]:
    """The cores the script may run on (its cpuset or affinity), whose clock the run's host load reads."""
    try:
        return sorted(os.sched_getaffinity(pid))
    except OSError:  # it has already exited
        return sorted(os.sched_getaffinity(0))


def snapshot(cores: list[int]) -> dict[str, Any]:
    """What a run's start or end reads: the CPU times and the clock of its cores."""
    return {"times": cpu_times(), "mhz": clock_mhz(cores)}


def host_load(before: dict[str, Any], after: dict[str, Any], wall_s: float, own_cpu_s: float) -> dict[str, Any]:
    """Between two snapshots: `other_cores`, the CPU time of everything but the run (its script's tree and its
    runner, `own_cpu_s`) in cores on average; `steal`, the hypervisor's share of the machine's time; the clock at the
    start and end; and `noisy` with the reasons, by the NOISY_* thresholds."""
    load: dict[str, Any] = {"other_cores": None, "steal": None, "mhz": [before["mhz"], after["mhz"]], "noisy": []}
    start, end = before["times"], after["times"]
    if start and end and wall_s > 0:
        delta = {name: end.get(name, 0) - start.get(name, 0) for name in _FIELDS}
        tick = os.sysconf("SC_CLK_TCK")
        busy = sum(delta[name] for name in ("user", "nice", "system", "irq", "softirq")) / tick
        total = sum(delta.values())
        load["other_cores"] = round(max(0.0, busy - own_cpu_s) / wall_s, 3)
        load["steal"] = round(delta["steal"] / total, 4) if total else 0.0
        if load["other_cores"] >= NOISY_OTHER_CORES:
            load["noisy"].append(f"{load['other_cores']:.2f} cores busy besides the run")
        if load["steal"] >= NOISY_STEAL:
            load["noisy"].append(f"{load['steal']:.1%} of the CPU time stolen by the hypervisor")
    if before["mhz"] and after["mhz"] and after["mhz"] < (1 - NOISY_CLOCK_DROP) * before["mhz"]:
        load["noisy"].append(f"clock fell from {before['mhz']:.0f} to {after['mhz']:.0f} MHz")
    return load
