"""The in-environment measurement: the only module that measures, used unchanged by every backend.

    python -m harness.measure.runner --spec spec.json [--out result.json]

It spawns the bench script, times it from spawn to exit on the monotonic clock, samples the cgroup's
working set every SAMPLE_INTERVAL_MS (pread on open fds), and at the end reads the kernel's exact
high-water mark. It writes one JSON RunResult.

Its start is part of every run's cost, so it imports little: the lighter half of the standard library (no
subprocess, pathlib, argparse, typing, statistics, tempfile or dataclasses, which together cost more than the rest of
its start; _signal rather than signal; gzip and base64 only for a per-op run), and harness.core.records not at all: it
reads the spec as the JSON form of a RunnerInput and writes the JSON form of a RunResult, which the harness then
checks. json and contextlib cost it about 1.6 ms and 0.1 MiB (docs/decisions.md).
"""

from __future__ import annotations

import json
import math
import os
import resource
import select
import sys
import time
from _signal import SIG_DFL, SIGKILL, SIGPIPE, SIGXFSZ  # type: ignore[import-not-found]  # no stubs; signal: enums
from _signal import signal as set_signal_handler  # type: ignore[import-not-found]  # no stubs for _signal
from array import array
from contextlib import suppress
from types import SimpleNamespace

from harness.core import RESULT_NOT_STORED_EXIT, STDERR_TAIL_CHARS, STORAGE_ERRNOS
from harness.core.errors import HarnessError
from harness.core.external_data import confine
from harness.measure.cgroup_probe import MemoryProbe, own_cgroup_dirs
from harness.measure.host_load import host_load, script_affinity, snapshot
from harness.measure.process_tree import ProcessTree
from harness.measure.report_protocol import (
    BATCH_SIZE_KEY,
    ENERGY_KEY,
    INPUTS_ENV,
    LATENCIES_ENV_VAR,
    LOAD_KEY,
    MAX_LATENCIES,
    PROFILE_DIR_ENV,
)
from harness.measure.report_protocol import ENV_VAR as METRICS_ENV
from harness.measure.script_output import latency_summary, read_latencies, read_metrics

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from harness.core.records import RunnerInput

MIB = 1024 * 1024
MAX_CATCH_UP = 10  # samples owed after a stall (a suspended VM, say) beyond which the schedule restarts
NO_ENERGY = "the script did not report it: only the harness's timed_loop reads the host's RAPL counters"
THREAD_ENV_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS")


def child_command(spec: RunnerInput) -> list[str]:
    """Python scripts run with this interpreter; anything else is executed directly. Model path first, when the
    run has a model (a script profiled as a whole has none)."""
    head = [sys.executable, spec.script] if spec.script.endswith(".py") else [spec.script]
    return [*head, *([spec.model] if spec.model else []), *spec.script_args]


def child_env(spec: RunnerInput, metrics_path: str, latencies_path: str,
              profile_dir: str | None = None) -> dict[str, str]:
    """What a bench script needs to know, plus thread caps so frameworks don't oversubscribe."""
    env = dict(os.environ)
    threads = str(spec.threads)
    env.update({name: threads for name in THREAD_ENV_VARS})
    env.update({
        METRICS_ENV: metrics_path, LATENCIES_ENV_VAR: latencies_path, "HARNESS_MODEL": spec.model,
        "HARNESS_THREADS": threads, "HARNESS_CPUS": str(spec.cpus), "HARNESS_CPU_MODE": spec.cpu_mode,
        "HARNESS_ITERATIONS": str(spec.iterations), "HARNESS_WARMUP": str(spec.warmup),
        "HARNESS_BATCH_SIZE": str(spec.batch_size), **dict(spec.script_env),
    })
    if spec.inputs_file:
        env[INPUTS_ENV] = spec.inputs_file
    if spec.cpu_mode == "quota":
        # OpenMP threads (torch's intra-op pool) sleep at once instead of spinning through the quota.
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if profile_dir is not None:
        env[PROFILE_DIR_ENV] = profile_dir
    return env


def pack_profile(directory: str) -> dict[str, str]:
    """The per-op phase's files (raw framework trace, meta), gzip + base64, to travel inside the RunResult:
    out of a container they can only leave on the runner's stdout. Read after the kernel's peak, so packing is
    never charged to the run; the directory is removed."""
    import base64  # per-op runs only: the others never pay for these imports
    import gzip
    import shutil

    packed = {}
    for entry in sorted(os.scandir(directory), key=lambda entry: entry.name):
        if entry.is_file():
            with open(entry.path, "rb") as handle:
                packed[entry.name] = base64.b64encode(gzip.compress(handle.read())).decode("ascii")
    shutil.rmtree(directory, ignore_errors=True)
    return packed


def _write(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


def _prepare_child(spec: RunnerInput) -> None:
    """Runs in the child between fork and exec (the runner is single-threaded at that point)."""
    # The OOM killer must pick the workload, never the runner that records what happened.
    with suppress(OSError):
        _write("/proc/self/oom_score_adj", "1000")
    if spec.rlimit_as_bytes:
        resource.setrlimit(resource.RLIMIT_AS, (spec.rlimit_as_bytes, spec.rlimit_as_bytes))
    if spec.affinity:
        os.sched_setaffinity(0, spec.affinity)
    # The workload's own cgroups (the pinned cores), which the runner itself stays out of: see place_runner().
    for procs in spec.workload_cgroup_procs:
        _write(procs, str(os.getpid()))


def spawn(command: list[str], env: dict[str, str], stderr_path: str, prepare: Callable[[], None]) -> int:
    """Start `command` as a session leader with stdin and stdout on /dev/null and stderr into `stderr_path`, after
    `prepare` has run in the child between fork and exec; return its pid. It is what subprocess.Popen(...,
    start_new_session=True, preexec_fn=prepare) does, default signals restored, without importing subprocess (a
    fifth of the runner's start): the runner is single-threaded, so forking it is safe. Whatever stops the child
    before its program runs (no such file, a failed `prepare`) is raised here, as Popen raises it."""
    stderr_fd = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    failure_read, failure_write = os.pipe()  # closed by a successful exec: nothing read means it ran
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            null = os.open(os.devnull, os.O_RDWR)
            for source, target in ((null, 0), (null, 1), (stderr_fd, 2)):
                os.dup2(source, target)
            for number in (SIGPIPE, SIGXFSZ):  # Python ignores them; the program must not inherit that
                set_signal_handler(number, SIG_DFL)
            prepare()
            os.execvpe(command[0], command, env)
        except BaseException as err:  # the child must end here, never return into the runner
            with suppress(BaseException):
                os.write(failure_write, f"{getattr(err, 'errno', None) or 0}:{err}".encode())
        finally:
            os._exit(127)
    os.close(failure_write)
    os.close(stderr_fd)
    failure = b""
    while chunk := os.read(failure_read, 4096):
        failure += chunk
    os.close(failure_read)
    if failure:
        os.waitpid(pid, 0)
        code, _, message = failure.decode(errors="replace").partition(":")
        raise OSError(int(code), f"cannot start {command[0]}: {message}") if int(code) else OSError(message)
    return pid


def place_runner(spec: RunnerInput) -> list[int]:
    """Move the runner onto the cores the backend set aside for it (off a pinned workload's cores); its cores."""
    if spec.runner_affinity:
        os.sched_setaffinity(0, spec.runner_affinity)
    return sorted(os.sched_getaffinity(0))


def time_weighted_mean(times: array, values: array, start: float, end: float) -> float | None:
    """Mean of a step function (each sample holds until the next) over [start, end]."""
    total = weight = 0.0
    for i, (t, v) in enumerate(zip(times, values, strict=True)):
        t_next = times[i + 1] if i + 1 < len(times) else end
        lo, hi = max(t, start), min(t_next, end)
        if hi > lo:
            total += v * (hi - lo)
            weight += hi - lo
    return total / weight if weight > 0 else None


def _status(timed_out: bool, returncode: int, oom_kills: int, stderr_tail: str, rlimited: bool) -> str:
    """A non-zero exit after an OOM kill in the run is `oom` even when the killed process was a grandchild and the
    script exited with an error of its own."""
    if timed_out:
        return "timeout"
    if returncode != 0 and oom_kills > 0:
        return "oom"
    if returncode != 0 and rlimited and "MemoryError" in stderr_tail:
        return "oom"
    return "ok" if returncode == 0 else "error"


def read_tail(path: str, size: int) -> bytes:
    """The last `size` bytes of a file, without reading the rest into memory."""
    with open(path, "rb") as handle:
        handle.seek(max(handle.seek(0, os.SEEK_END) - size, 0))
        return handle.read()


def scratch_dir(near: str | None) -> str:
    """A new private directory for the run's files: beside the result file when there is one (in the backend's own
    directory), else in $TMPDIR or /tmp (a container's own tmpfs)."""
    base = os.path.dirname(os.path.abspath(near)) if near else os.environ.get("TMPDIR") or "/tmp"
    for attempt in range(100):
        path = os.path.join(base, f"harness-run-{os.getpid()}-{attempt}")
        with suppress(FileExistsError):
            os.mkdir(path, 0o700)
            return path
    raise FileExistsError(f"no free scratch directory name under {base}")


def measure(spec: RunnerInput, near: str | None = None, measured: Callable[[], None] | None = None) -> dict[str, Any]:
    """Run the script once under whatever limits this process already sits in; return the RunResult's JSON form.
    Its scratch files go beside `near` (the result file) when given; `measured` is called once the script has ended
    and the cgroup's figures are read, before the result is put together.

    With a cgroup of the run's own (local cgroup backend, container) memory comes from that cgroup. In rlimit mode
    the runner shares the harness's cgroup, whose usage and high-water mark are not the run's: memory then comes
    from the script's process tree (ProcessTree, and the kernel's RSS high-water mark of its largest process)."""
    if spec.model:  # the last guard: its external data only from the model's folder, as the runner sees it
        confine(spec.model, spec.external_data)
    tree_mode = spec.isolation == "rlimit"
    version, dirs = (0, {}) if tree_mode else own_cgroup_dirs()
    probe = MemoryProbe(version, dirs) if version else None
    runner_cores = place_runner(spec)
    oom_before = probe.oom_kills() if probe else 0
    cpu_before = probe.cpu_stat() if probe else {}
    workdir = scratch_dir(near)
    metrics_path, stderr_path = os.path.join(workdir, "metrics.jsonl"), os.path.join(workdir, "stderr.txt")
    latencies_path = os.path.join(workdir, "latencies.f64")
    profile_dir = os.path.join(workdir, "profile") if spec.per_op else None
    if profile_dir is not None:
        os.mkdir(profile_dir)
    interval = spec.sample_interval_ms / 1000.0
    times, values = array("d"), array("d")  # 16 bytes a sample: a 600 s run at 100 Hz adds under 1 MiB
    self_before = resource.getrusage(resource.RUSAGE_SELF)
    env = child_env(spec, metrics_path, latencies_path, profile_dir)
    t0 = time.monotonic()
    child_pid = spawn(child_command(spec), env, stderr_path, lambda: _prepare_child(spec))
    script_cores = script_affinity(child_pid)
    load_before = snapshot(script_cores)
    sampler = probe or ProcessTree(child_pid)
    pidfd = os.pidfd_open(child_pid)
    poller = select.epoll()
    poller.register(pidfd, select.EPOLLIN)
    deadline, next_sample, timed_out = t0 + spec.timeout_s, t0, False
    while True:
        now = time.monotonic()
        if now >= deadline:
            timed_out = True
            with suppress(ProcessLookupError):
                os.killpg(child_pid, SIGKILL)
            break
        if now >= next_sample:
            with suppress(OSError, ValueError):
                values.append(float(sampler.working_set_bytes()))
                times.append(now)
            # A fixed schedule, caught up after a late wake-up, keeps the mean rate at 1/interval.
            next_sample += interval
            if now - next_sample > MAX_CATCH_UP * interval:
                next_sample = now
            continue
        if poller.poll(min(next_sample, deadline) - now):
            break
    t_exit = time.monotonic()
    load_after = snapshot(script_cores)
    _, wait_status, usage = os.wait4(child_pid, 0)
    self_after = resource.getrusage(resource.RUSAGE_SELF)
    runner_cpu_s = (self_after.ru_utime + self_after.ru_stime) - (self_before.ru_utime + self_before.ru_stime)
    poller.close()
    os.close(pidfd)
    returncode = os.waitstatus_to_exitcode(wait_status)
    peak = probe.peak_bytes() if probe else None
    oom_kills = (probe.oom_kills() - oom_before) if probe else 0
    cpu_after = probe.cpu_stat() if probe else {}
    if probe:
        probe.close()
    if measured is not None:
        measured()
    stderr_tail = read_tail(stderr_path, STDERR_TAIL_CHARS).decode(errors="replace")
    phases, reported, notes = read_metrics(metrics_path)
    latencies, reported_count = read_latencies(latencies_path, reported)
    for path in (metrics_path, stderr_path, latencies_path):
        with suppress(FileNotFoundError):
            os.unlink(path)
    profile_files = pack_profile(profile_dir) if profile_dir is not None else None
    os.rmdir(workdir)
    result = assemble_result(
        spec=spec, t0=t0, t_exit=t_exit, times=times, values=values, phases=phases, reported=reported,
        latencies=latencies, reported_count=reported_count, notes=notes,
        peak_bytes=peak, usage=usage, returncode=returncode, timed_out=timed_out, oom_kills=oom_kills,
        stderr_tail=stderr_tail, cgroup_version=version, tree_mode=tree_mode, runner_cores=runner_cores,
        cpu_delta={k: cpu_after.get(k, 0) - cpu_before.get(k, 0) for k in cpu_after},
        runner_cpu_s=runner_cpu_s,
    )
    result["host_load"] = host_load(load_before, load_after, t_exit - t0,
                                    usage.ru_utime + usage.ru_stime + runner_cpu_s)
    result["clock_s"] = {"script_spawned": t0, "script_exited": t_exit}
    if profile_files is not None:
        result["per_op_files"] = profile_files
        result["phases_s"] = [[name, round(t - t0, 6)] for name, t in phases]
    return result


def peak_figures(peak_bytes: int | None, sampled_peak: float | None, maxrss_bytes: int,
                 tree_mode: bool) -> tuple[float, str]:
    """(peak_memory_mib, peak_source). `kernel`: the run cgroup's high-water mark. `sampled`: its largest working-set
    sample (no peak file). `process-tree`: rlimit mode, the larger of the largest summed-RSS sample of the script's
    process tree and the kernel's RSS high-water mark of its largest single process (both can miss a short spike
    of a tree of several processes)."""
    if peak_bytes is not None:
        return peak_bytes / MIB, "kernel"
    if tree_mode:
        return max(sampled_peak or 0.0, float(maxrss_bytes)) / MIB, "process-tree"
    return (sampled_peak or 0.0) / MIB, "sampled"


def quota_notes(spec: RunnerInput, summary: dict[str, float] | None) -> list[str]:
    """Under a fractional CFS quota, inferences shorter than the quota's run window mostly run at full speed, and a
    few absorb each period's stall: p50 then shows the unlimited figure, and only the mean, p99 and throughput show
    the limit. The run window is the wall time ceil(CPUS) busy threads take to spend one period's quota."""
    cpus = spec.cpus
    if spec.cpu_mode != "quota" or not summary or not spec.cpu_period_us or cpus.is_integer():
        return []
    period_ms = spec.cpu_period_us / 1000.0
    window_ms = cpus * period_ms / math.ceil(cpus)
    if summary["p50"] >= window_ms:
        return []
    return [f"CFS quota: the median inference ({summary['p50']:.3g} ms) is shorter than the quota's run window "
            f"({window_ms:.3g} ms of every {period_ms:g} ms period at CPUS={cpus:g}), so most inferences run at full "
            "speed and a few absorb the stall: p50 shows the unlimited speed; the mean (the headline latency of "
            "quota runs) and throughput show the limit"]


def headline_statistic(spec: RunnerInput) -> str:
    """The per-run latency that ranking and calibration use: the median, or under a CFS quota the mean. A quota
    stalls the process once per period; the inferences between stalls run at full speed, so whenever an inference
    is shorter than the quota's run window the median shows the unlimited speed, while the mean carries the stalls
    in proportion (the throughput the limit allows). One rule per CPU mode keeps every model at one CPUS value on
    the same statistic. Elsewhere LATENCY_STATISTIC chooses: the median, or the 5th percentile, which the machine's
    other work moves least (it slows some inferences, never speeds one up)."""
    return "mean" if spec.cpu_mode == "quota" else spec.latency_statistic


def assemble_result(
    *, spec: RunnerInput, t0: float, t_exit: float, times: array, values: array,
    phases: list[tuple[str, float]], reported: dict[str, Any], latencies: array, reported_count: int, notes: list[str],
    peak_bytes: int | None, usage: resource.struct_rusage, returncode: int, timed_out: bool, oom_kills: int,
    stderr_tail: str, cgroup_version: int, tree_mode: bool, runner_cores: list[int], cpu_delta: dict[str, int],
    runner_cpu_s: float,
) -> dict[str, Any]:
    """Turn raw observations into the RunResult's JSON form (units in every name)."""
    runtime_s = t_exit - t0
    summary = latency_summary(latencies, reported.pop("latency_all", None))
    if summary and summary["n"] > len(latencies):
        notes = [*notes, f"latency percentiles from a uniform sample of {len(latencies)} of {summary['n']} "
                         f"inferences (at most {MAX_LATENCIES} are kept per run); n, mean, min and max cover all"]
    elif reported_count > len(latencies):
        notes = [*notes, f"latencies: the first {len(latencies)} of {reported_count} kept (at most {MAX_LATENCIES} "
                         "per run)"]
    quota_warning = quota_notes(spec, summary)
    notes = [*notes, *quota_warning]
    headline = headline_statistic(spec)
    if summary:
        summary["headline"] = summary[headline]
    batch = int(reported.pop(BATCH_SIZE_KEY, spec.batch_size))
    bounds = [("startup", t0), *phases]
    by_phase: dict[str, float] = {}
    for i, (name, start) in enumerate(bounds):
        end = bounds[i + 1][1] if i + 1 < len(bounds) else t_exit
        mean = time_weighted_mean(times, values, start, end)
        if mean is not None:
            by_phase[name] = mean / MIB
    avg = time_weighted_mean(times, values, t0, t_exit)
    sampled_peak = max(values) if values else None
    peak_mib, peak_source = peak_figures(peak_bytes, sampled_peak, usage.ru_maxrss * 1024, tree_mode)
    periods = cpu_delta.get("nr_periods", 0)
    status = _status(timed_out, returncode, oom_kills, stderr_tail, bool(spec.rlimit_as_bytes))
    load_s = reported.pop(LOAD_KEY, None)
    energy = reported.pop(ENERGY_KEY) if isinstance(reported.get(ENERGY_KEY), dict) else {"absent": NO_ENERGY}
    return dict(
        status=status,
        exit_code=returncode if returncode >= 0 else None,
        signal=-returncode if returncode < 0 else None,
        stderr_tail=stderr_tail if status != "ok" else "",
        runtime_s=runtime_s,
        load_s=load_s,
        energy=energy,
        latency_stats_ms=summary,
        latency_headline=headline if summary else None,
        shorter_than_quota_window=bool(quota_warning),
        latencies_ms=latencies.tolist(),
        batch_size=batch,
        throughput_ips=batch * 1000.0 / summary["mean"] if summary and summary["mean"] > 0 else None,
        peak_memory_mib=peak_mib,
        peak_source=peak_source,
        peak_rss_mib=usage.ru_maxrss / 1024.0,
        avg_memory_mib=avg / MIB if avg is not None else None,
        avg_memory_mib_by_phase=by_phase,
        sampled_peak_mib=sampled_peak / MIB if sampled_peak is not None else None,
        cpu_s=usage.ru_utime + usage.ru_stime,
        cpu_nr_periods=periods,
        cpu_nr_throttled=cpu_delta.get("nr_throttled", 0),
        cpu_throttled_s=cpu_delta.get("throttled_ns", 0) / 1e9,
        samples=len(values),
        sample_rate_hz=(len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 and times[-1] > times[0] else 0.0,
        runner_cpu_s=runner_cpu_s,
        runner_cores=runner_cores,
        oom_kills=oom_kills,
        cgroup_version=cgroup_version,
        notes=notes,
        memory_samples={"t_s": [round(t - t0, 4) for t in times], "mib": [round(v / MIB, 3) for v in values]}
        if spec.keep_samples else None,
        metrics={k: v for k, v in reported.items() if isinstance(v, (int, float, str, bool)) and not (
            isinstance(v, float) and not math.isfinite(v))},
    )


USAGE = "usage: python -m harness.measure.runner --spec SPEC.json|- [--out RESULT.json]"


def parse_args(argv: list[str]) -> tuple[str, str | None]:
    """(spec file or "-" for stdin, result file or None for stdout). A backend calls the runner, never a person, so
    two options are parsed by hand: argparse would cost every run's start more than the runner's own code."""
    options = dict(zip(argv[::2], argv[1::2], strict=False))
    if len(argv) % 2 or "--spec" not in options or set(options) - {"--spec", "--out"}:
        raise SystemExit(USAGE)
    return options["--spec"], options.get("--out")


def read_spec(path: str) -> str:
    """The spec's text. "-": from stdin, where a runner started ahead of its run (harness.backends.warm) waits for it
    until the backend has written it and closed the pipe; empty if the backend closed it without one."""
    if path != "-":
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    chunks = []
    while chunk := os.read(0, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks).decode("utf-8")


def release_stdout() -> None:
    """With the result going to a file, stdout carries nothing: closing it (onto /dev/null) tells a backend that holds
    its other end that the run's measurement is over, and it may start the next run's runner (harness.backends.warm)
    while this one puts its result together."""
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)


def main(argv: list[str] | None = None) -> int:
    """The runner starts already inside the run's cgroup (harness.measure.launch; a container's own cgroup)."""
    started = time.monotonic()
    spec_path, out = parse_args(sys.argv[1:] if argv is None else argv)
    text = read_spec(spec_path)
    if not text:  # a runner started ahead that the backend let go: no run, no result
        return 0
    spec_read = time.monotonic()
    try:
        # The JSON form of a RunnerInput, read as attributes: harness.core.records stays unimported (its dataclasses
        # would slow every start), so the checker cannot see that the two match; RunnerInput.from_dict checks the
        # same form on the harness's side.
        spec = SimpleNamespace(**json.loads(text))
        result = measure(spec, out, release_stdout if out else None)  # type: ignore[arg-type]
    except HarnessError as err:  # a model the run must not read: its one line is the run's error, and no result
        sys.stderr.write(f"{err}\n")
        return err.exit_code
    result["clock_s"] = {"runner_started": started, "spec_read": spec_read, **result["clock_s"],
                         "result_ready": time.monotonic()}
    text = json.dumps(result)
    if out:
        try:
            _write(out + ".tmp", text)
            os.replace(out + ".tmp", out)
        except OSError as err:  # a full disk: the backend says so, rather than keep an `error` run
            with suppress(OSError):
                os.unlink(out + ".tmp")
            if err.errno in STORAGE_ERRNOS:
                return RESULT_NOT_STORED_EXIT
            raise
    else:
        sys.stdout.write(text + "\n")
    return 0


def entry() -> None:
    """main(), then leave at once: the result is out, and the interpreter's own teardown (tens of milliseconds, freeing
    every object one by one) would only keep the backend waiting for this process to end."""
    code = main()
    sys.stdout.flush()
    os._exit(code)


if __name__ == "__main__":
    entry()
