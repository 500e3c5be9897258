"""A session across a Dask distributed cluster: `harness sweep ... --cluster tcp://HOST:8786`.

Dask distributed rather than Ray: a scheduler and a worker start in seconds and a few tens of MB
(`dask scheduler`, `dask worker ADDRESS`), where a Ray head on a busy small host did not come up within its
own 30 s agent deadline; and Dask already does what "a lost node loses nothing" needs: the runs a dead
worker had in flight go back to the queue and run on another worker, and a run whose workers died
`distributed.scheduler.allowed-failures` times (3) ends as KilledWorker, which the session records as not
run. Workers start the same way by hand on two machines or from a Kubernetes Deployment (docs/scaling.md).

Each worker runs its runs with its own backend (local cgroups or Docker, per BACKEND, chosen there) on slots
of its own cores: one run at a time per worker unless --parallel. The driver alone writes the session store:
each finished run becomes the same runs.jsonl line as in a local session the moment it comes back, with the
worker's hostname, CPU model and kernel in its provenance. Model and script files travel once per worker
through Dask. Workers whose CPU models differ are refused unless --allow-mixed-hosts; the summary then
groups by CPU model.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shlex
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harness.analysis.stats import summarize_runs, summary_rows
from harness.core.config import DeviceProfile
from harness.core.errors import BackendError, ConfigError, StorageError
from harness.measure.spec import CpuLimits, RunSpec
from harness.run.parallel import Overlap, confine_runners, no_runners_ahead
from harness.run.session import BaseSession, OnRun, Plan, refused_outcome
from harness.run.slots import SlotPlan, place, plan_slots, run_needs

INSTALL_HINT = "--cluster needs Dask distributed: install the cluster extra, `pip install -e '.[cluster]'`"
CONNECT_TIMEOUT_S = 30.0
NO_WORKER_GRACE_S = 60.0  # with runs left and no worker connected this long, they are marked not run


@dataclass(frozen=True)
class NodeTask:
    """What the driver tells every worker of the session, with each call, so that a worker first asked builds its
    NodeAgent: the session, its profile's variables, what one slot must hold (run_needs) and --parallel."""

    session_id: str
    profile_variables: dict[str, Any]
    needs: tuple[int, int]
    parallel: int | str


class NodeAgent:
    """One per worker process and session: runs that session's runs on this worker's backend and slots."""

    def __init__(self, task: NodeTask) -> None:
        import psutil

        from harness.backends import select_backend
        from harness.core.config import load_profile
        from harness.measure.provenance import collect_metadata

        profile = load_profile(None, task.profile_variables)
        self.backend, self.reason = select_backend(profile)
        self.slots: SlotPlan = plan_slots(task.needs, task.parallel, sorted(os.sched_getaffinity(0)),
                                          psutil.virtual_memory().available, Path(profile.results_dir))
        if self.slots.count > 1:
            confine_runners(self.backend)
        no_runners_ahead(self.backend)  # runs come from Dask's threads, each of which would start one
        self.metadata = collect_metadata()
        self._free = list(range(self.slots.count))
        self._slot_free = threading.Condition()
        self._overlap = Overlap()
        self._files: dict[tuple[str, str], Path] = {}
        self._files_lock = threading.Lock()
        self.cache = Path(tempfile.mkdtemp(prefix="harness-node-"))

    def describe(self) -> dict[str, Any]:
        return {"metadata": self.metadata, "backend": self.backend.describe(), "reason": self.reason,
                "slots": [list(slot) for slot in self.slots.slots], "notes": list(self.slots.notes)}

    def local_copy(self, original: str, data: bytes, model: str | None = None) -> str:
        """This worker's copy of a file, written once per session: a script or model in a folder of its own, or, with
        `model` given, a file of that model (it or an external-data file) at its place relative to the model."""
        anchor = model or original
        with self._files_lock:
            if (anchor, original) not in self._files:
                directory = self.cache / hashlib.sha256(anchor.encode()).hexdigest()[:16]
                copy = directory / os.path.relpath(original, os.path.dirname(anchor))
                copy.parent.mkdir(parents=True, exist_ok=True)
                copy.write_bytes(data)
                self._files[anchor, original] = copy
            return str(self._files[anchor, original])

    def run(self, spec: RunSpec) -> dict[str, Any]:
        """Waits for a free slot (a worker may have more threads than slots), runs there, frees it."""
        with self._slot_free:
            self._slot_free.wait_for(lambda: bool(self._free))
            slot = self._free.pop(0)
        placed = place(spec, self.slots.slots[slot])
        self._overlap.start(spec.run_id)
        started_at = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        try:
            result = self.backend.run(placed)
        finally:
            concurrent = self._overlap.finish(spec.run_id)
            with self._slot_free:
                self._free.append(slot)
                self._slot_free.notify()
        return {"result": result, "cpu": placed.to_dict()["cpu"], "started_at": started_at,
                "concurrent_runs": concurrent}


_AGENTS: dict[str, NodeAgent] = {}  # session id -> this worker process's agent
_AGENTS_LOCK = threading.Lock()


def node_agent(task: NodeTask) -> NodeAgent:
    with _AGENTS_LOCK:
        if task.session_id not in _AGENTS:
            _AGENTS[task.session_id] = NodeAgent(task)
        return _AGENTS[task.session_id]


def describe_node(task: NodeTask) -> dict[str, Any]:
    """Run on every worker (Client.run) before the first run: what it is and which slots it offers."""
    return node_agent(task).describe()


def run_on_node(spec_data: dict[str, Any], model_files: list[bytes], script: bytes, task: NodeTask,
                cpu_model: str | None) -> dict[str, Any]:
    """One run, as a Dask task on whichever worker takes it. `model_files`: the contents of the spec's model_files (the
    model, then its external-data files). `cpu_model`: the session's, when hosts may not mix."""
    from distributed import get_worker

    agent = node_agent(task)
    if cpu_model is not None and agent.metadata["host_cpu_model"] != cpu_model:
        raise ConfigError(f"worker {agent.metadata['hostname']} has CPU {agent.metadata['host_cpu_model']}, the "
                          f"session {cpu_model}; pass --allow-mixed-hosts to mix them")
    spec = RunSpec.from_dict(spec_data)
    copies = [agent.local_copy(path, data, spec.model)
              for path, data in zip(spec.model_files, model_files, strict=True)]
    spec = replace(spec, model=copies[0] if copies else spec.model, script=agent.local_copy(spec.script, script))
    out = agent.run(spec)
    worker = get_worker()
    out["worker"], out["worker_name"] = worker.address, str(worker.name)
    return out


def forget_session(session_id: str) -> None:
    """Run on every worker when the session ends: drop its agent and the model files it was sent."""
    with _AGENTS_LOCK:
        agent = _AGENTS.pop(session_id, None)
    if agent is not None:
        agent.backend.close()
        shutil.rmtree(agent.cache, ignore_errors=True)


def cancel_node(session_id: str) -> None:
    """Run on every worker at Ctrl-C: kill that session's runs in flight there."""
    agent = _AGENTS.get(session_id)
    if agent is not None:
        agent.backend.cancel()


def _first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0]


class ClusterClient:
    """The driver's side of a cluster session: a Dask client of the scheduler, and what each worker said about itself.
    It is no Backend: each worker's own backend runs the runs; this client sends them there and takes them back."""

    name = "cluster"

    def __init__(self, address: str) -> None:
        try:
            from distributed import Client
        except ImportError:
            raise ConfigError(INSTALL_HINT) from None
        self.address = address
        try:
            self.client = Client(address, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
        except (OSError, TimeoutError, ValueError) as err:
            raise BackendError(f"cannot reach the Dask scheduler at {address} ({_first_line(err)}); start it with "
                               "`dask scheduler` and workers with `dask worker ADDRESS` (docs/scaling.md)") from None
        self.workers: dict[str, dict[str, Any]] = {}  # worker address -> describe_node()
        self.task: NodeTask | None = None  # the session the workers run, once start() has told them
        self.cpu_model: str | None = None  # the CPU model every worker must have; None where hosts may mix

    def start(self, task: NodeTask, allow_mixed_hosts: bool) -> list[str]:
        """Tell every worker of the session and ask what it is; refuse mixed CPU models unless allowed. Notes for the
        session."""
        if not self.client.scheduler_info()["workers"]:
            raise BackendError(f"no Dask worker is connected to {self.address}; start one with "
                               f"`dask worker {self.address}`")
        self.task = task
        replies = self.client.run(describe_node, task, on_error="return")
        notes: list[str] = []
        for worker, info in replies.items():
            if isinstance(info, BaseException):
                notes.append(f"cluster worker {worker} left out: {_first_line(info)}")
            else:
                self.workers[worker] = info
                notes += [f"cluster worker {info['metadata']['hostname']}: {note}" for note in info["notes"]]
        cpus: dict[str, list[str]] = {}
        for worker, info in self.workers.items():
            cpus.setdefault(info["metadata"]["host_cpu_model"], []).append(info["metadata"]["hostname"] or worker)
        if not self.workers:
            raise BackendError(f"no worker of {self.address} can run ({'; '.join(notes)})")
        if len(cpus) > 1 and not allow_mixed_hosts:
            listed = "; ".join(f"{model} ({', '.join(hosts)})" for model, hosts in cpus.items())
            raise ConfigError(f"cluster workers have different CPU models, whose results do not compare: {listed}; "
                              "use workers of one model or pass --allow-mixed-hosts (the summary then groups by host)")
        self.cpu_model = None if allow_mixed_hosts else next(iter(cpus))
        return notes

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "isolation": "cluster", "address": self.address,
                "workers": {worker: {"hostname": info["metadata"]["hostname"],
                                     "host_cpu_model": info["metadata"]["host_cpu_model"],
                                     "backend": info["backend"].get("backend"), "slots": info["slots"]}
                            for worker, info in self.workers.items()}}

    def connected_workers(self) -> int:
        with contextlib.suppress(OSError, TimeoutError):
            return len(self.client.scheduler_info()["workers"])
        return 0

    def cancel(self, futures: list[Any]) -> None:
        """Drop the queued runs and kill the ones in flight on every worker."""
        with contextlib.suppress(Exception):  # a cluster going away while we cancel changes nothing here
            self.client.cancel(futures)
            if self.task is not None:
                self.client.run(cancel_node, self.task.session_id, on_error="ignore")

    def close(self) -> None:
        if self.task is not None:
            with contextlib.suppress(Exception):  # a worker already gone has nothing to forget
                self.client.run(forget_session, self.task.session_id, on_error="ignore")
        self.client.close()


class ClusterSession(BaseSession):
    """A session whose runs are Dask tasks; they come back in finishing order and are stored as they do."""

    def __init__(self, profile: DeviceProfile, plan: Plan, cluster: ClusterClient, reason: str, *,
                 parallel: int | str, allow_mixed_hosts: bool) -> None:
        if any(spec.per_op for spec in plan.specs):  # its raw profiler files stay on the worker that wrote them
            raise ConfigError("PER_OP is not available with --cluster: profile per operator on one host (drop "
                              "--cluster, or set PER_OP=0)")
        self.cluster = cluster
        self.task = NodeTask(plan.session_id, profile.as_variables(), run_needs(plan.specs), parallel)
        notes = cluster.start(self.task, allow_mixed_hosts)
        plan.notes.extend(note for note in notes if note not in plan.notes)
        self.mixed = allow_mixed_hosts and len({w["metadata"]["host_cpu_model"]
                                                for w in cluster.workers.values()}) > 1
        super().__init__(profile, plan, cluster.describe(), reason)

    def _session_info(self, state: str) -> dict[str, Any]:
        return {**super()._session_info(state), "not_run": self.not_run}

    def resume_command(self) -> str:
        return f"{super().resume_command()} --cluster {shlex.quote(self.cluster.address)}"

    def write_summary(self) -> dict[str, Any]:
        """As a local session's; with --allow-mixed-hosts and more than one CPU model, grouped by CPU model."""
        if not self.mixed:
            return super().write_summary()
        entries: list[dict[str, Any]] = []
        rows: list[dict[str, Any]] = []
        for host in sorted({run["provenance"]["host_cpu_model"] for run in self.runs}):
            group = summarize_runs(run for run in self.runs if run["provenance"]["host_cpu_model"] == host)
            entries += [{"host_cpu_model": host, **entry.as_dict()} for entry in group]
            rows += [{"host_cpu_model": host, **row} for row in summary_rows(group)]
        summary = {"session_id": self.plan.session_id, "device_name": self.profile.device_name,
                   "backend": "cluster", "isolation": "cluster", "backend_reason": self.backend_reason,
                   "memory_mib": self.profile.memory_mib, "results_dir": str(self.store.path),
                   "grouped_by": "host_cpu_model", "models": entries}
        self.store.write_summary(summary, rows)
        return summary

    def run(self, on_start: Callable[[RunSpec], None] | None = None, on_done: OnRun | None = None) -> dict[str, Any]:
        client = self.cluster.client
        done = {run["run_id"] for run in self.runs}
        todo = [spec for spec in self.plan.specs if spec.run_id not in done]
        paths = {path for spec in todo for path in (*spec.model_files, spec.script)}
        files = {path: client.scatter(Path(path).read_bytes(), hash=True) for path in paths}
        self.store.write_session(self._session_info("running"))
        pending: dict[Any, RunSpec] = {}
        try:
            for spec in todo:
                refused = self._models[spec.model_name].refused
                if refused:  # not run: kept as an error here
                    self._keep(spec, self._record(spec, refused_outcome(refused),
                                                  time.strftime("%Y-%m-%dT%H:%M:%S%z")), on_done)
                    continue
                model_files = [files[path] for path in spec.model_files]
                future = client.submit(run_on_node, spec.to_dict(), model_files, files[spec.script],
                                       self.task, self.cluster.cpu_model, key=f"run-{spec.run_id}",
                                       pure=False)
                pending[future] = spec
                if on_start:
                    on_start(spec)
            lonely_since: float | None = None
            while pending:
                finished = _first_finished(list(pending))
                for future in finished:
                    self._collect(future, pending.pop(future), on_done)
                if finished or self.cluster.connected_workers():
                    lonely_since = None
                elif (lonely_since := lonely_since or time.monotonic()) < time.monotonic() - NO_WORKER_GRACE_S:
                    self._mark_not_run(list(pending.values()), f"no worker was connected for {NO_WORKER_GRACE_S:.0f} s")
                    client.cancel(list(pending))
                    break
        except BaseException as err:
            self.cluster.cancel(list(pending))
            self._interrupted(err)
            raise
        finally:
            self.cluster.close()
        return self._complete("incomplete" if self.not_run else "complete")

    def _collect(self, future: Any, spec: RunSpec, on_done: OnRun | None) -> None:
        """Store a finished run; a run whose workers kept dying is marked not run."""
        from distributed import KilledWorker

        try:
            out = future.result()
        except KilledWorker as err:
            self._mark_not_run([spec], f"its workers died while running it ({_first_line(err)})")
            return
        except (ConfigError, StorageError):  # a worker's full disk: the line names its file and the space left
            raise
        except Exception as err:
            raise BackendError(f"run {spec.run_id} failed on the cluster: {_first_line(err)}") from None
        node = self.cluster.workers.get(out["worker"])
        if node is None:  # a worker that joined after the start: ask it what it is
            node = self.cluster.client.run(describe_node, self.task, workers=[out["worker"]])[out["worker"]]
            self.cluster.workers[out["worker"]] = node
        placed = replace(spec, cpu=CpuLimits(**out["cpu"]))
        location = {"hostname": node["metadata"]["hostname"], "worker": out["worker"],
                    "worker_name": out["worker_name"]}
        record = self._record(placed, out["result"], out["started_at"], concurrent_runs=out["concurrent_runs"],
                              node=node, location=location)
        self._keep(placed, record, on_done)

    def _mark_not_run(self, specs: list[RunSpec], why: str) -> None:
        for spec in specs:
            self.not_run[spec.run_id] = why
        self.store.write_session(self._session_info("running"))


def _first_finished(futures: list[Any], within_s: float = 1.0) -> set[Any]:
    """The futures done within a second (none when the second passes: the loop then checks the workers)."""
    deadline = time.monotonic() + within_s
    while True:
        finished = {future for future in futures if future.done()}
        if finished or time.monotonic() > deadline:
            return finished
        time.sleep(0.05)
