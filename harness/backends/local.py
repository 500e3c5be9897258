"""Local backend: a child cgroup per run under the harness's own cgroup (works wherever cgroups can be
written: root, or a delegated v2 subtree). Without that, sched_setaffinity + RLIMIT_AS, and the result
says so: an address-space limit is much cruder than a memory cgroup (it counts reserved, not used memory).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.backends import warm
from harness.backends.base import RUNNER_KILLED, Elsewhere, cache_model_file, killed_at_the_limit
from harness.core import RESULT_NOT_STORED_EXIT
from harness.core.errors import BackendError, StorageError, free_bytes
from harness.core.records import Limits, RunnerInput, RunOutcome, RunResult
from harness.core.storage import writing
from harness.measure import cgroups, leases
from harness.measure.launch import inside, runner_command
from harness.measure.spec import RunSpec, cpu_list, parse_cpu_list

if TYPE_CHECKING:  # type-only: this backend also runs on a bare board Python (harness.backends.target.agent)
    from harness.models.resolve import ModelInfo

GRACE_S = 15.0  # beyond TIMEOUT_S before the backend itself kills a runner that did not stop its script
PROBE_MEMORY_BYTES = 64 * 1024 * 1024  # limits the probe cgroup is given (it never holds a process)
PROBE_PERIOD_US = 100_000


@dataclass(frozen=True)
class Isolation:
    """How the local backend limits runs on this machine, found by doing it once (see probe_isolation)."""

    mode: str  # 'cgroup-v1', 'cgroup-v2' or 'rlimit'
    reason: str
    parent: cgroups.OwnCgroup | None = None  # where run cgroups go; None under rlimit
    swap_capped: bool = False  # a memory+swap limit exists, so SWAP=0 is enforced
    kernel_peak: bool = False  # run cgroups have the kernel's high-water mark (v2 before 5.19 has none)


def _advice(version: int) -> str:
    if version == 2:
        return ("run as root, or in a delegated scope: systemd-run --user --scope -p Delegate=yes make profile ..."
                " (see docs/isolation.md)")
    return "run as root (cgroup v1 has no delegation to users)"


def probe_isolation(own: cgroups.OwnCgroup) -> Isolation:
    """Create, limit and remove one probe cgroup exactly as a run would: permission bits cannot tell whether
    the kernel accepts it (v2 refuses controllers for a cgroup that holds processes, whatever the owner)."""
    if own.version == 0:
        return Isolation("rlimit", "no memory cgroup controller is visible")
    missing = [c for c in cgroups.V1_CONTROLLERS if c not in own.dirs]
    if missing:
        return Isolation("rlimit", f"cgroup controllers {', '.join(missing)} are not mounted")
    try:
        parent = cgroups.run_parent(own)
        limits = Limits(cpus=0.5, cpu_mode="quota", cpuset=str(min(os.sched_getaffinity(0))),
                        cpu_quota_us=PROBE_PERIOD_US // 2, cpu_period_us=PROBE_PERIOD_US,
                        memory_bytes=PROBE_MEMORY_BYTES, memory_swap_bytes=PROBE_MEMORY_BYTES)
        probe = cgroups.create_run_cgroup(parent, f"{leases.PROBE_PREFIX}{os.getpid()}", limits)
    except OSError as err:
        where = f": {err.filename}" if err.filename else ""
        return Isolation("rlimit", f"cannot create a limited cgroup under {own.dirs['memory']} ({err.strerror}"
                                   f"{where}); {_advice(own.version)}")
    memory = probe.dirs["memory"]
    v2 = own.version == 2
    swap = (memory / ("memory.swap.max" if v2 else "memory.memsw.limit_in_bytes")).exists()
    peak = (memory / ("memory.peak" if v2 else "memory.max_usage_in_bytes")).exists()
    probe.remove()
    return Isolation(f"cgroup-v{own.version}", f"run cgroups created and limited under {parent.dirs['memory']}",
                     parent, swap, peak)


class LocalBackend:
    name = "local"
    elsewhere: Elsewhere | None = None  # its runs run on this host

    def __init__(self, runner_off_workload_cores: bool = True) -> None:
        """`runner_off_workload_cores=False` keeps the runner on a pinned workload's cores (to measure what that
        costs, benchmarks/runner_placement.py)."""
        self.runner_off_workload_cores = runner_off_workload_cores
        self.own = cgroups.discover()
        found = probe_isolation(self.own)
        self.isolation, self.reason, self.parent, self.swap_capped = (
            found.mode, found.reason, found.parent, found.swap_capped)
        self._live: set[subprocess.Popen[bytes]] = set()  # runners in flight, for cancel() (parallel slots)
        # Start each run's runner ahead, during the run before's teardown (harness.backends.warm): one per calling
        # thread. Off where runs share the host (parallel slots, cluster workers: harness.run.parallel), where it
        # would start beside another run's measured script.
        self.warm_runners = self.isolation != "rlimit"
        self._warm: dict[int, warm.WarmRunner] = {}  # thread id -> the runner waiting for that thread's next run
        self._warm_lock = threading.Lock()
        self._warm_count = 0
        self._removals: list[threading.Thread] = []  # cgroups of finished runs being removed (see run)
        self._leases: dict[str, leases.Lease] = {}  # session id -> its lease, held while its cgroups may exist here
        # Sessions whose harness was killed outright left their cgroups: removed now (harness.measure.leases).
        self.swept = leases.sweep(self.cgroup_folders()) if self.parent is not None else {}
        # A backend dropped without close() (a test, a script) still takes its waiting runners down with it.
        weakref.finalize(self, discard_all, self._warm, self._removals, self._leases)

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "isolation": self.isolation, "isolation_reason": self.reason,
                "swap_capped": self.swap_capped if self.isolation != "rlimit" else False}

    def check(self, models: Sequence[ModelInfo]) -> None:
        """The runner reads each model and script as this user (resolve_model has already checked runtimes)."""
        for model in models:
            for path, what in ((model.run_model, "model"), (str(model.script), "bench script")):
                if path and not os.access(path, os.R_OK):
                    raise BackendError(f"{what} {path} is not readable by this user; run `chmod u+r {path}`")

    def run(self, spec: RunSpec) -> RunOutcome:
        started = time.monotonic()
        clock = {"backend_called": started}
        ahead = self._take_warm()
        run_cgroup: cgroups.RunCgroup | None = None
        oom: cgroups.OomWatch | None = None
        workdir: Path | None = None
        try:
            # On v2 the runner stays in the run's one cgroup, whose cpuset allows only the workload's cores.
            apart = self.runner_off_workload_cores and self.isolation != "cgroup-v2"
            runner_affinity = runner_cores(spec.cpu.cpuset) if apart else None
            limits = spec.limits_requested()
            runner_joins: list[Path] = []
            if self.isolation == "rlimit" or self.parent is None:
                runner_input = spec.runner_input(
                    isolation="rlimit", rlimit_as_bytes=spec.memory_bytes + spec.swap_bytes,
                    affinity=parse_cpu_list(spec.cpu.cpuset) if spec.cpu.cpuset else None,
                    runner_affinity=runner_affinity)
                applied = rlimit_applied(spec, runner_input)
            else:
                self._lease(spec.session_id)
                self._clear_earlier_attempt(f"harness-{spec.run_id}")
                if ahead is not None and not self._limit(ahead, limits):
                    ahead = None  # a limit below what it already uses: a cold start in a cgroup of its own
                run_cgroup = ahead.cgroup if ahead else cgroups.create_run_cgroup(
                    self.parent, f"harness-{spec.run_id}", limits)
                oom = cgroups.OomWatch(run_cgroup)
                runner_joins, workload_only = split_cgroups(run_cgroup, bool(runner_affinity))
                runner_input = spec.runner_input(runner_affinity=runner_affinity,
                                                 workload_cgroup_procs=tuple(workload_only))
                applied = cgroup_applied(spec, self.swap_capped)
            spec_text = json.dumps(runner_input.to_dict())
            with writing(Path(tempfile.gettempdir()), len(spec_text)):  # the folder of the runner's files
                workdir = ahead.workdir if ahead else Path(tempfile.mkdtemp(prefix="harness-local-"))
            spec_path, out_path, err_path = workdir / "spec.json", workdir / "result.json", workdir / "runner.err"
            if ahead is None:
                with writing(spec_path, len(spec_text)):
                    spec_path.write_text(spec_text)
            for path in spec.model_files:  # none for a script profiled as a whole
                cache_model_file(path)
            self._removed()  # whatever the runs before left in their cgroups is dead before this script starts
            if ahead is not None:
                warm.handover(ahead, runner_joins, spec_text)
            command = inside(runner_joins, runner_command(spec_path, out_path))
            result = self._wait(ahead, command, spec, out_path, err_path, oom, clock)
        except BaseException:
            clean_up(ahead, run_cgroup, workdir)
            raise
        finally:
            if oom is not None:
                oom.close()
        if self.warm_runners:
            # Beside the next runner's start, removing a memory cgroup takes milliseconds (the kernel drains every
            # CPU's page lists): apart, joined before the next script starts.
            removal = threading.Thread(target=clean_up, args=(ahead, run_cgroup, workdir), daemon=True,
                                       name=f"remove-{spec.run_id}")
            removal.start()
            with self._warm_lock:
                self._removals.append(removal)
        else:
            clean_up(ahead, run_cgroup, workdir)
        clock["backend_returned"] = time.monotonic()
        overhead = max(clock["backend_returned"] - started - (result.runtime_s or 0.0), 0.0)
        return RunOutcome(result, applied, overhead, clock_s=clock)

    def cgroup_folders(self) -> list[Path]:
        """The folders run cgroups are made in (v1: one per controller; v2: one)."""
        return sorted(set(self.parent.dirs.values())) if self.parent is not None else []

    def _lease(self, session_id: str) -> None:
        """Hold `session_id`'s lease before its first cgroup is made here (it tells a sweep this session is alive)."""
        with self._warm_lock:
            if session_id not in self._leases:
                self._leases[session_id] = leases.Lease(session_id, self.cgroup_folders())

    def _removed(self) -> None:
        """Wait until the cgroups of the runs before are removed, with whatever was left in them."""
        with self._warm_lock:
            pending = self._removals[:]
            self._removals.clear()
        for removal in pending:
            removal.join()

    def _take_warm(self) -> warm.WarmRunner | None:
        """This thread's runner started ahead, if it is still waiting (one that died is cleared away)."""
        with self._warm_lock:
            ahead = self._warm.pop(threading.get_ident(), None)
        if ahead is not None and ahead.process.poll() is not None:
            warm.discard(ahead)
            return None
        return ahead

    @staticmethod
    def _limit(ahead: warm.WarmRunner, limits: Limits) -> bool:
        """Write the run's limits into the cgroup of the runner started ahead; False (and it is discarded) if the
        kernel refused one (v1: a memory limit below what the runner already uses)."""
        try:
            cgroups.limit_run_cgroup(ahead.cgroup, limits)
        except OSError:
            warm.discard(ahead)
            return False
        return True

    def _start_warm(self, spec: RunSpec) -> None:
        """Start this thread's next runner now that this run's measurement is over (its script has ended)."""
        if not self.warm_runners or self.parent is None:
            return
        self._lease(spec.session_id)
        with self._warm_lock:
            self._warm_count += 1
            name = f"harness-{spec.session_id}-next-{os.getpid()}-{self._warm_count}"
        try:
            ahead = warm.start_warm(self.parent, name)
        except OSError:
            return  # the next run starts its runner itself
        with self._warm_lock:
            self._warm[threading.get_ident()] = ahead

    def _clear_earlier_attempt(self, name: str) -> None:
        """A run retried on this host after its first attempt's process was killed (a lost cluster worker) finds
        that attempt's cgroup: whatever still runs in it is stopped, so the retry runs alone."""
        parent = self.parent or self.own  # run cgroups live under the parent (v2: beside the harness's leaf)
        earlier = cgroups.RunCgroup(parent.version, {c: d / name for c, d in parent.dirs.items()})
        if any(d.exists() for d in earlier.dirs.values()):
            earlier.remove()

    def _wait(self, ahead: warm.WarmRunner | None, command: list[str], spec: RunSpec, out_path: Path, err_path: Path,
              oom: cgroups.OomWatch | None, clock: dict[str, float]) -> RunResult:
        """The runner's RunResult (one started ahead, else `command` spawned now); `clock` gets when the runner was
        spawned, when it had its spec and when it exited."""
        if ahead is not None:
            clock["runner_spawned"], process = ahead.spawned, ahead.process
            started = clock["spec_handed"] = time.monotonic()
        else:
            started = clock["runner_spawned"] = clock["spec_handed"] = time.monotonic()
            with open(err_path, "wb") as err:
                # A session of its own: Ctrl-C reaches the harness, which then tears the run down in order.
                process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
                                           start_new_session=True)
        self._live.add(process)
        try:
            # The next run's runner starts once this run's measurement is over (the runner closed its stdout).
            if not ended_within(process, spec.timeout_s + GRACE_S, lambda: self._start_warm(spec)):
                process.kill()
                process.wait()
                return RunResult.failure("timeout", time.monotonic() - started, "runner did not stop in time")
        except BaseException:
            process.kill()
            process.wait()
            raise
        finally:
            self._live.discard(process)
            clock["runner_exited"] = time.monotonic()
            if process.stdout is not None:
                process.stdout.close()
        if out_path.exists():
            result = RunResult.from_dict(json.loads(out_path.read_text()))
            return killed_at_the_limit(result, oom is not None and oom.met())
        if process.returncode == RESULT_NOT_STORED_EXIT:
            raise StorageError(out_path, "the disk refused the run's result (full or failing)", None,
                               free_bytes(out_path))
        elapsed = time.monotonic() - started
        detail = err_path.read_text(errors="replace")
        if oom is not None and oom.met():
            detail = f"{RUNNER_KILLED}\n{detail}"
        code = process.returncode
        return RunResult.failure("error", elapsed, detail or "runner ended without a result",
                                 exit_code=code if code >= 0 else None, signal=-code if code < 0 else None)

    def cancel(self) -> None:
        """Kill every runner in flight (from another thread); each run's cgroup removal takes its script down. The
        runners started ahead go too, cgroups and all."""
        for process in list(self._live):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        self.close()

    def close(self) -> None:
        """Kill the runners started ahead that no run took, and remove their cgroups: nothing else persists between
        runs. Then the sessions' leases go back."""
        with self._warm_lock:
            discard_all(self._warm, self._removals, self._leases)


def ended_within(process: subprocess.Popen[bytes], timeout_s: float,
                 measured: Callable[[], None] | None = None) -> bool:
    """Whether `process` ended (and was reaped) within timeout_s. A pidfd says so the moment it ends, where
    Popen.wait(timeout) polls in sleeps that grow to 50 ms: half of that, on average, added to every run. `measured`
    is called once, when the process's stdout (a pipe) closes: a runner closes it once its measurement is over, and at
    the latest when it ends."""
    deadline = time.monotonic() + timeout_s
    pidfd = os.pidfd_open(process.pid)
    out = process.stdout.fileno() if measured is not None and process.stdout is not None else None
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        if out is not None:
            poller.register(out, select.POLLIN)
        ended = False
        while not ended and (left := deadline - time.monotonic()) > 0:
            for fd, _ in poller.poll(left * 1000):
                if fd == pidfd:
                    ended = True
                elif fd == out and not os.read(out, 4096):  # end of file: the runner closed its stdout
                    poller.unregister(out)
                    out = None
                    measured()  # type: ignore[misc]
    finally:
        os.close(pidfd)
    if ended:
        process.wait()
    return ended


def discard_all(waiting: dict[int, warm.WarmRunner], removals: list[threading.Thread],
                held: dict[str, leases.Lease]) -> None:
    """Kill the runners started ahead in `waiting` and remove their cgroups; wait for the removals under way; then
    give back the sessions' leases in `held`."""
    for ahead in list(waiting.values()):
        warm.discard(ahead)
    waiting.clear()
    for removal in list(removals):
        removal.join()
    removals.clear()
    for lease in held.values():
        lease.release()
    held.clear()


def clean_up(ahead: warm.WarmRunner | None, run_cgroup: cgroups.RunCgroup | None, workdir: Path | None) -> None:
    """Remove a finished run's cgroup (killing whatever is left in it) and its files."""
    if ahead is not None:
        warm.discard(ahead)  # the runner has exited (else it is killed); its cgroup and files go
        return
    if run_cgroup is not None:
        run_cgroup.remove()
    if workdir is not None:  # with the runner's scratch files, should it have died
        shutil.rmtree(workdir, ignore_errors=True)


def cgroup_applied(spec: RunSpec, swap_capped: bool) -> Limits:
    """A run cgroup holds every limit of the plan (a failed write aborts the run), except a swap cap where
    the kernel does not account swap."""
    requested = spec.limits_requested()
    if swap_capped:
        return requested
    return replace(requested, memory_swap_bytes=None, unenforced=(
        "SWAP: the kernel does not account swap here (no memory.swap.max / memory.memsw.*), so the run may swap "
        "beyond MEMORY+SWAP",))


def rlimit_applied(spec: RunSpec, runner_input: RunnerInput) -> Limits:
    """Without a cgroup the CPU limit is at best a core affinity, and memory only an address-space cap."""
    affinity = runner_input.affinity
    cpuset = cpu_list(sorted(affinity)) if affinity else None
    cores = f"cores {cpuset}" if cpuset else "every core this process may use"
    unenforced = [f"MEMORY: no memory limit without a writable cgroup; RLIMIT_AS caps the script's address space "
                  f"at {runner_input.rlimit_as_bytes} bytes (reserved, not resident memory)"]
    if spec.cpu.quota_us is not None:
        unenforced.insert(0, f"CPUS={spec.cpu.cpus:g}: no CFS quota without a writable cgroup; the script may use "
                             f"{cores} at full speed")
    if spec.swap_bytes:
        unenforced.append("SWAP: not limited without a writable cgroup")
    return Limits(cpus=float(len(affinity)) if affinity else None, cpu_mode="affinity" if affinity else "none",
                  cpuset=cpuset, cpu_quota_us=None, cpu_period_us=None, memory_bytes=None, memory_swap_bytes=None,
                  address_space_bytes=runner_input.rlimit_as_bytes, unenforced=tuple(unenforced))


def runner_cores(cpuset: str | None) -> tuple[int, ...] | None:
    """Cores for the runner away from a pinned workload's, when this process may use any other (on 2 cores, a
    CPUS=1 run pinned to core 1 leaves core 0): its 100 Hz sampling then never preempts the model. None: no such
    core (CPUS equals the cores, or a quota without pinning), and the runner shares the workload's cores."""
    if not cpuset:
        return None
    free = sorted(set(os.sched_getaffinity(0)) - set(parse_cpu_list(cpuset)))
    return tuple(free) or None


def split_cgroups(run_cgroup: cgroups.RunCgroup, runner_apart: bool) -> tuple[list[Path], list[str]]:
    """(cgroup.procs files the runner joins, those only its script joins). On cgroup v1, where each controller has
    a cgroup of its own, a runner set apart joins the run's memory cgroup alone (its memory is still charged to the
    run) and its script also enters the cpu and cpuset cgroups (the quota and pinned cores are the workload's). On
    v2 one cgroup holds every controller, and the runner stays in it."""
    if run_cgroup.version != 1 or not runner_apart:
        return run_cgroup.procs_files, []
    workload_only = [run_cgroup.dirs[c] / "cgroup.procs" for c in ("cpu", "cpuset")]
    return [run_cgroup.dirs["memory"] / "cgroup.procs"], [str(path) for path in workload_only]
