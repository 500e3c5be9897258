"""The memory of a script's process tree, read from /proc: the runner's sampler where a run has no cgroup of its own."""

from __future__ import annotations

import os
from contextlib import suppress


class ProcessTree:
    """Memory of the script's whole process tree from /proc, where the run has no cgroup of its own (rlimit mode).

    Sums the resident set (statm) of the script and every descendant found through /proc/<pid>/task/*/children. RSS
    counts a page that two processes share (libraries, a forked worker's copy-on-write pages) once per process; PSS
    would not, but /proc/<pid>/smaps_rollup walks page tables and costs milliseconds per sample for a large process.
    A descendant whose parent died is re-parented away from the tree and no longer counted."""

    def __init__(self, pid: int) -> None:
        self.root = pid
        self._page = os.sysconf("SC_PAGE_SIZE")

    def pids(self) -> list[int]:
        found, queue = [], [self.root]
        while queue:
            pid = queue.pop()
            found.append(pid)
            with suppress(OSError):
                for task in os.scandir(f"/proc/{pid}/task"):
                    with suppress(OSError), open(f"{task.path}/children", "rb") as handle:
                        queue.extend(int(child) for child in handle.read().split())
        return found

    def working_set_bytes(self) -> int:
        pages = 0
        for pid in self.pids():
            with suppress(OSError, IndexError, ValueError), open(f"/proc/{pid}/statm", "rb") as handle:
                pages += int(handle.read().split()[1])
        return pages * self._page
