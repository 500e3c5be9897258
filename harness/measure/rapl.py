"""The host's energy over the timed phase, from Linux's powercap RAPL counters; stdlib only (the bench loop runs it).

/sys/class/powercap/intel-rapl:N is CPU package N (its `name` file says `package-N`; AMD's Zen packages appear
under the same names); intel-rapl:N:M are its parts (core, uncore, dram), which this reader leaves out. Each
domain's `energy_uj` counts microjoules up to `max_energy_range_uj` and starts again from 0, so a delta across one
wrap is after + max − before. The largest ranges are about 262 kJ, 40 minutes at 100 W: a timed phase longer than
one range could wrap twice unseen, which the record's `seconds` lets a reader rule out.

The energy is the packages': shared by every core, so whatever else runs on the host is in it, and it is the
run's only where nothing else runs. Since Linux 5.10 `energy_uj` is readable by root only (CVE-2020-8694); where no
counter is readable the run's record says why (`energy.absent`) and holds no number, never a zero.
"""

from __future__ import annotations

import os
import time
from typing import Any

from harness.measure.report_protocol import AVG_POWER_KEY, ENERGY_MJ_KEY

POWERCAP = "/sys/class/powercap"
PACKAGE_PREFIX = "intel-rapl:"
WHOSE = "RAPL package energy: shared by every core, so other load on the host is in it"
NO_COUNTER = ("no RAPL package counter under {root} (not an x86 host, the intel_rapl driver not loaded, or a "
              "container without the host's /sys/class/powercap)")
ROOT_ONLY = ("{path} is readable by root only (Linux 5.10 and later, CVE-2020-8694); docs/energy.md says how to "
             "allow reading it")


def _read(path: str) -> str:
    with open(path, encoding="ascii") as handle:
        return handle.read().strip()


def packages(root: str = POWERCAP) -> tuple[list[tuple[str, str, int]], str | None]:
    """(name, energy_uj path, max_energy_range_uj) of each package domain with a readable counter; or none and the
    reason."""
    try:
        domains = sorted(entry for entry in os.listdir(root)
                         if entry.startswith(PACKAGE_PREFIX) and entry[len(PACKAGE_PREFIX):].isdigit())
    except OSError:
        domains = []
    if not domains:
        return [], NO_COUNTER.format(root=root)
    found = []
    for domain in domains:
        base = os.path.join(root, domain)
        energy_path = os.path.join(base, "energy_uj")
        try:
            int(_read(energy_path))
            found.append((_read(os.path.join(base, "name")), energy_path,
                          int(_read(os.path.join(base, "max_energy_range_uj")))))
        except PermissionError:
            return [], ROOT_ONLY.format(path=energy_path)
        except (OSError, ValueError) as err:
            return [], f"{base} cannot be read as a RAPL domain ({err})"
    return found, None


def delta_uj(before: int, after: int, max_range_uj: int) -> int:
    """Microjoules counted from `before` to `after`, across one wraparound at max_range_uj."""
    return after - before if after >= before else after + max_range_uj - before


class EnergyReader:
    """Reads every package's counter at start() and stop(); stop() gives the run's `energy` record. The domains are
    found when it is made, before the timed phase, so only the counter reads bracket it."""

    def __init__(self, root: str = POWERCAP) -> None:
        self.domains, self.absent = packages(root)
        self.started: list[int] = []
        self.t0 = 0.0
        self.read_s = 0.0

    def _counters(self) -> list[int]:
        start = time.perf_counter()
        values = [int(_read(path)) for _, path, _ in self.domains]
        self.read_s += time.perf_counter() - start
        return values

    def start(self) -> None:
        if self.absent is None:
            try:
                self.started = self._counters()
            except (OSError, ValueError) as err:
                self.absent = f"a RAPL counter stopped being readable ({err})"
        self.t0 = time.perf_counter()

    def stop(self, inferences: int) -> dict[str, Any]:
        """{energy_mj per inference, avg_power_w, energy_j, seconds, domains, whose, read_s}, or {absent: why}."""
        seconds = time.perf_counter() - self.t0
        if self.absent is not None:
            return {"absent": self.absent}
        try:
            ended = self._counters()
        except (OSError, ValueError) as err:
            return {"absent": f"a RAPL counter stopped being readable ({err})"}
        total_j = sum(delta_uj(before, after, max_range) for before, after, (_, _, max_range)
                      in zip(self.started, ended, self.domains, strict=True)) / 1e6
        return energy_record(total_j, seconds, inferences, [name for name, _, _ in self.domains], WHOSE, self.read_s)


def energy_record(energy_j: float, seconds: float, inferences: int, domains: list[str], whose: str, read_s: float,
                  **extra: Any) -> dict[str, Any]:
    """A timed phase's `energy` record: per inference, average power, the total and what it was read from."""
    return {ENERGY_MJ_KEY: energy_j * 1000 / inferences if inferences else None,
            AVG_POWER_KEY: energy_j / seconds if seconds > 0 else None, "energy_j": energy_j, "seconds": seconds,
            "domains": domains, "whose": whose, "read_s": read_s, **extra}
