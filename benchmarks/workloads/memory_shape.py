"""A known memory profile, for the peak-fidelity benchmark. Usage: memory_shape.py MODEL SHAPE MIB SECONDS [SPIKE_MS]

- steady: MIB resident for SECONDS (MIB 0 is the empty run that measures the baseline);
- spike:  idle SECONDS/2, MIB resident for SPIKE_MS, idle SECONDS/2;
- ramp:   grows linearly from 0 to MIB over SECONDS in 1 MiB steps, then releases it all and exits.

Memory is mapped with MAP_POPULATE, so it is resident when the call returns, and a spike lasts SPIKE_MS
rather than however long Python takes to touch each page. Stdlib and the harness's reporting protocol only: it runs
in the runtime image too.
"""

import mmap
import sys
import time

from harness import report_metrics

MIB = 1024 * 1024


class Held:
    """The memory the workload holds, and the integral of it over time (MiB*s), reported as allocation_mib_s:
    the benchmark's truth for the average. Mapping or unmapping counts half its duration (a linear ramp)."""

    def __init__(self) -> None:
        self.blocks: list[mmap.mmap] = []
        self.mib = self.mib_s = 0.0
        self.since = time.monotonic()

    def _advance(self) -> float:
        now = time.monotonic()
        self.mib_s += self.mib * (now - self.since)
        self.since = now
        return now

    def add(self, mib: int) -> None:
        start = self._advance()
        self.blocks.append(mmap.mmap(-1, mib * MIB, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | mmap.MAP_POPULATE))
        self.since = time.monotonic()
        self.mib_s += (self.mib + mib / 2) * (self.since - start)
        self.mib += mib

    def release(self) -> None:
        start = self._advance()
        for block in self.blocks:
            block.close()
        self.blocks.clear()
        self.since = time.monotonic()
        self.mib_s += self.mib / 2 * (self.since - start)
        self.mib = 0
        report_metrics(allocation_mib_s=self.mib_s)


def steady(held: Held, mib: int, seconds: float) -> None:
    if mib:
        held.add(mib)
    time.sleep(seconds)


def spike(held: Held, mib: int, seconds: float, spike_ms: float) -> None:
    time.sleep(seconds / 2)
    held.add(mib)
    time.sleep(spike_ms / 1000)
    held.release()
    time.sleep(seconds / 2)


def ramp(held: Held, mib: int, seconds: float) -> None:
    start = time.monotonic()
    for step in range(1, mib + 1):
        time.sleep(max(0.0, start + step * seconds / mib - time.monotonic()))
        held.add(1)


if __name__ == "__main__":
    shape, size, duration = sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    memory = Held()
    if shape == "spike":
        spike(memory, size, duration, float(sys.argv[5]))
    elif shape == "ramp":
        ramp(memory, size, duration)
    else:
        steady(memory, size, duration)
    memory.release()
