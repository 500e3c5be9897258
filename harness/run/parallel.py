"""Parallel slots on one host: the session's runs, several at once, each pinned to a slot of its own.

Each run in flight has a worker thread that waits on its backend (the measuring happens in the runner's
own process, in its own cgroup or container, so the threads only wait). Finished runs come back to the
main thread, which alone writes the store: the same runs.jsonl lines as a serial session, in finishing
order, each the moment it exists. Ctrl-C or a backend fault cancels the runs in flight (the backend kills
their processes or containers) and keeps every finished one.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from harness.backends import Backend
from harness.core.records import RunOutcome
from harness.measure.spec import RunSpec
from harness.run.session import OnRun, Session
from harness.run.slots import SlotPlan, place

Finished = queue.Queue[tuple[RunSpec, int, str, RunOutcome | BaseException]]
"""Each run's thread hands its run back to the main thread: spec, slot, start time, and its outcome or the error."""
CANCEL_JOIN_S = 30.0  # how long a cancelled run's thread may take to tear its environment down


class Overlap:
    """For each run in flight, the most runs that were in flight at once during its life (itself included)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._peak: dict[str, int] = {}

    def start(self, run_id: str) -> None:
        with self._lock:
            self._peak[run_id] = 0
            for key in self._peak:
                self._peak[key] = max(self._peak[key], len(self._peak))

    def finish(self, run_id: str) -> int:
        with self._lock:
            return self._peak.pop(run_id)


def confine_runners(backend: Backend) -> None:
    """Keep each run's runner (its 100 Hz sampler) on its own slot's cores: the other cores belong to other runs.
    Serially the local backend moves it off a pinned workload's cores; with slots, that would land it on a
    neighbour's core. Nor does it start a run's runner ahead (during the run before's teardown): with slots, that
    start would fall beside a neighbour's measured script."""
    backend.runner_off_workload_cores = False
    no_runners_ahead(backend)


def no_runners_ahead(backend: Backend) -> None:
    """Where runs share the host or come from several threads, no run's runner starts during the run before's
    teardown (harness.backends.warm): it would start beside another run's measured script."""
    backend.warm_runners = False


class ParallelSession(Session):
    """A Session whose runs go through up to `slots.count` disjoint core sets at once."""

    def __init__(self, *args: Any, slots: SlotPlan, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.slots = slots
        confine_runners(self.backend)

    def _session_info(self, state: str) -> dict[str, Any]:
        return {**super()._session_info(state), "parallel_slots": [list(slot) for slot in self.slots.slots]}

    def resume_command(self) -> str:
        return f"{super().resume_command()} --parallel {self.slots.count}"

    def run(self, on_start: Callable[[RunSpec], None] | None = None, on_done: OnRun | None = None) -> dict[str, Any]:
        done = {run["run_id"] for run in self.runs}
        todo = deque(spec for spec in self.plan.specs if spec.run_id not in done)
        finished: Finished = queue.Queue()
        free = list(range(self.slots.count))
        threads: dict[str, threading.Thread] = {}
        overlap = Overlap()
        self.backend.check(self.plan.models)  # what would fail every run fails once, before the first
        self.store.write_session(self._session_info("running"))
        try:
            while todo or threads or self._queue_next_round(todo):
                while todo and free:
                    slot = free.pop(0)
                    spec = place(todo.popleft(), self.slots.slots[slot])
                    if on_start:
                        on_start(spec)
                    overlap.start(spec.run_id)
                    started_at = time.strftime("%Y-%m-%dT%H:%M:%S%z")
                    threads[spec.run_id] = threading.Thread(
                        target=self._work, args=(spec, slot, started_at, finished), daemon=True,
                        name=f"run-{spec.run_id}")
                    threads[spec.run_id].start()
                spec, slot, started_at, outcome = finished.get()
                threads.pop(spec.run_id).join()
                free.append(slot)
                concurrent = overlap.finish(spec.run_id)
                if isinstance(outcome, BaseException):
                    raise outcome
                self._keep(spec, self._record(spec, outcome, started_at, concurrent_runs=concurrent), on_done)
        except BaseException as err:
            self._cancel(threads)
            self._interrupted(err)
            raise
        finally:
            self.backend.close()
        return self._complete()

    def _queue_next_round(self, todo: deque[RunSpec]) -> bool:
        """With every run kept: queue the next adaptive round, if one is due (Session.more_rounds)."""
        todo.extend(self.more_rounds())
        return bool(todo)

    def _work(self, spec: RunSpec, slot: int, started_at: str, finished: Finished) -> None:
        try:
            outcome: RunOutcome | BaseException = self.outcome(spec)
        except BaseException as err:  # handed to the main thread, which decides
            outcome = err
        finished.put((spec, slot, started_at, outcome))

    def _cancel(self, threads: dict[str, threading.Thread]) -> None:
        """Stop the runs in flight (their results are not finished runs) and wait for their teardown."""
        self.backend.cancel()
        deadline = time.monotonic() + CANCEL_JOIN_S
        for thread in threads.values():
            thread.join(timeout=max(deadline - time.monotonic(), 0.0))
