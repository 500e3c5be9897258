"""Container removal off a run's critical path, and never beside another run's script.

A run's container still costs the engine tens of milliseconds once its runner has reported: seeing it end (when the
runner's report was read from its stdout, harness.backends.runner_report) and removing it (its writable layer, its
metadata). The Docker backend hands each container it is done with to Removals, which waits for its end and removes it
on a thread of its own while the harness stores the run and creates the next container. `settle` waits until every
removal handed over is done; the backend calls it before it starts the next container, so engine work for one run
never overlaps another run's measurement, and when it closes (a session ends, or is interrupted, and closes its
backend on the way out). The threads are not daemons: the process cannot end before they do. A harness killed
outright leaves ended containers whose owner is gone; the next session's sweep removes them
(harness.backends.docker.sweep_orphans).
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class Removals:
    """Removes containers by name on background threads; `settle` waits for all of them."""

    def __init__(self, remove: Callable[[str], None]) -> None:
        """`remove(name)` waits for one container to end, removes it and never raises (an engine error is swallowed
        there)."""
        self._remove = remove
        self._pending: list[threading.Thread] = []
        self._lock = threading.Lock()  # parallel slots hand over and settle from several threads

    def submit(self, name: str) -> None:
        thread = threading.Thread(target=self._remove, args=(name,), name=f"remove {name}")
        with self._lock:
            self._pending = [t for t in self._pending if t.is_alive()]
            self._pending.append(thread)
        thread.start()

    def settle(self) -> None:
        """Return once every container handed over so far is removed."""
        with self._lock:
            pending = list(self._pending)
        for thread in pending:
            thread.join()
