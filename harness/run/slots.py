"""Slots: how many runs may share one host at once, and on which cores each of them runs.

A slot is a set of cores that belongs to one run at a time; slots never overlap, so no two concurrent runs
ever share a core. Every slot is as wide as the widest run of the plan (ceil(CPUS) cores), so any run fits
any slot. The count is capped three ways: by the allowed cores, by the host's available memory (each
concurrent run may fill its MEMORY + SWAP), and, for `auto`, by the measured interference of co-running
models on this host (benchmarks/parallel_interference.py stores it): cores that share caches and memory
bandwidth bend each other's figures, and a measurement is only worth parallelism if that bend stays under
the unstable threshold.
"""

from __future__ import annotations

import json
import math
import platform
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harness.analysis.stats import IQR_WARN_THRESHOLD
from harness.core.errors import ConfigError
from harness.measure.spec import CpuLimits, RunSpec, cpu_list

# Where benchmarks/parallel_interference.py stores its figures, under RESULTS_DIR.
INTERFERENCE_FILE = Path("bench") / "parallel_interference.json"
INTERFERENCE_LIMIT = IQR_WARN_THRESHOLD  # a co-runner that moves medians more than this makes results unstable
MEASURE_HINT = "measure it with `python benchmarks/parallel_interference.py` (about 3 minutes) or give --parallel N"


@dataclass(frozen=True)
class SlotPlan:
    """Disjoint core sets, one per run that may be in flight at once; one slot means serial."""

    slots: tuple[tuple[int, ...], ...]
    notes: tuple[str, ...] = ()

    @property
    def count(self) -> int:
        return len(self.slots)


def parse_parallel(text: str) -> int | str:
    """--parallel value: 'auto' or a whole number >= 1."""
    if text == "auto":
        return text
    if text.isdigit() and int(text) >= 1:
        return int(text)
    raise ConfigError(f"--parallel {text!r} is not valid: give a whole number >= 1 or auto")


def stored_interference(results_dir: Path) -> tuple[float | None, str]:
    """The worst median shift a co-runner caused on this host (hostname and CPU model must match), and where
    it comes from; None when no measurement of this host is stored."""
    from harness.measure.provenance import cpu_model

    path = Path(results_dir) / INTERFERENCE_FILE
    try:
        stored: dict[str, Any] = json.loads(path.read_text())["raw"]["interference"]
    except (OSError, ValueError, KeyError, TypeError):
        return None, f"no interference measurement in {path}"
    if stored.get("hostname") != platform.node() or stored.get("host_cpu_model") != cpu_model():
        return None, f"{path} was measured on another host ({stored.get('hostname')})"
    return float(stored["worst"]), f"{path}, measured {stored.get('measured_at', '?')}"


def run_needs(specs: Sequence[RunSpec]) -> tuple[int, int]:
    """(cores, bytes) one slot must hold: the widest run's ceil(CPUS) and the largest MEMORY + SWAP."""
    return (max((math.ceil(spec.cpu.cpus) for spec in specs), default=1),
            max((spec.memory_bytes + spec.swap_bytes for spec in specs), default=1))


def plan_slots(needs: tuple[int, int], requested: int | str, allowed_cores: Sequence[int],
               available_memory_bytes: int, results_dir: Path) -> SlotPlan:
    """Slots for `--parallel requested` on this host, for runs of `needs` (run_needs), with a note for every
    cap that applied. A host with fewer cores than one run needs gets no slot at all."""
    width, need = needs
    cores = sorted(allowed_cores, reverse=True)  # slot 0 takes the highest cores, as serial pinning does
    if width > len(cores):
        return SlotPlan((), (f"each run needs {width} cores and this host allows {len(cores)}",))
    by_cores = len(cores) // width
    by_memory = max(available_memory_bytes // need, 1)
    notes: list[str] = []
    if requested == "auto":
        count = min(by_cores, by_memory)
        if count > 1:
            interference, source = stored_interference(results_dir)
            if interference is None:
                notes.append(f"--parallel auto: runs stay serial, since co-running interference on this host is "
                             f"unknown ({source}); {MEASURE_HINT}")
                count = 1
            elif interference > INTERFERENCE_LIMIT:
                notes.append(f"--parallel auto: runs stay serial, since a co-runner moved medians by "
                             f"{interference:.0%} on this host (> {INTERFERENCE_LIMIT:.0%}; {source})")
                count = 1
        elif by_cores == 1:
            notes.append(f"--parallel auto: runs stay serial, since each needs {width} of this host's {len(cores)} "
                         "allowed cores")
    else:
        count = min(int(requested), by_cores, by_memory)
        if count < int(requested):
            why = (f"each run needs {width} of {len(cores)} allowed cores" if by_cores < int(requested) else
                   f"{available_memory_bytes / 1024**2:.0f} MiB of memory is available for runs of "
                   f"{need / 1024**2:.0f} MiB (MEMORY + SWAP)")
            notes.append(f"--parallel {requested}: {count} at once, since {why}")
    if count > 1 and by_memory < by_cores and requested == "auto":
        notes.append(f"--parallel auto: {count} at once, limited by available memory")
    return SlotPlan(tuple(tuple(sorted(cores[i * width:(i + 1) * width])) for i in range(count)), tuple(notes))


def place(spec: RunSpec, slot: Sequence[int]) -> RunSpec:
    """The run pinned to its slot: its ceil(CPUS) highest cores of the slot, and its CFS quota kept (so a
    fractional CPUS is both on cores of its own and capped at its share)."""
    cores = sorted(slot)[-math.ceil(spec.cpu.cpus):]
    return replace(spec, cpu=CpuLimits(spec.cpu.cpus, cpu_list(cores), spec.cpu.quota_us, spec.cpu.period_us))
