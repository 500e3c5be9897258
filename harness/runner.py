"""The in-environment measurement: the only module that measures, used unchanged by every backend.

    python -m harness.runner --spec spec.json [--out result.json] [--join-cgroup .../cgroup.procs ...]

It spawns the bench script, times it from spawn to exit on the monotonic clock, samples the cgroup's
working set every SAMPLE_INTERVAL_MS (pread on open fds), and at the end reads the kernel's exact
high-water mark. Stdlib only, so it stays small in memory and starts fast. It writes one JSON RunResult.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import resource
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import cgroups
from harness.metrics import ENV_VAR as METRICS_ENV

STDERR_TAIL_CHARS = 2000
MIB = 1024 * 1024
MAX_CATCH_UP = 10  # samples owed after a stall (a suspended VM, say) beyond which the schedule restarts
THREAD_ENV_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS")


def child_command(spec: dict[str, Any]) -> list[str]:
    """Python scripts run with this interpreter; anything else is executed directly. Model path first, when the
    run has a model (a script profiled as a whole has none)."""
    script = spec["script"]
    head = [sys.executable, script] if script.endswith(".py") else [script]
    return [*head, *([spec["model"]] if spec["model"] else []), *spec.get("script_args", [])]


def child_env(spec: dict[str, Any], metrics_path: str) -> dict[str, str]:
    """What a bench script needs to know, plus thread caps so frameworks don't oversubscribe."""
    env = dict(os.environ)
    threads = str(spec["threads"])
    env.update({name: threads for name in THREAD_ENV_VARS})
    env.update({
        METRICS_ENV: metrics_path,
        "HARNESS_MODEL": spec["model"],
        "HARNESS_THREADS": threads,
        "HARNESS_CPUS": str(spec["cpus"]),
        "HARNESS_ITERATIONS": str(spec["iterations"]),
        "HARNESS_WARMUP": str(spec["warmup"]),
        "HARNESS_BATCH_SIZE": str(spec["batch_size"]),
    })
    return env


def _prepare_child(spec: dict[str, Any]) -> None:
    """Runs in the child between fork and exec (the runner is single-threaded at that point)."""
    # The OOM killer must pick the workload, never the runner that records what happened.
    with contextlib.suppress(OSError):
        Path("/proc/self/oom_score_adj").write_text("1000")
    if spec.get("rlimit_as_bytes"):
        limit = int(spec["rlimit_as_bytes"])
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    if spec.get("affinity"):
        os.sched_setaffinity(0, spec["affinity"])


class _ProcessRss:
    """Fallback sampler when no cgroup is visible: RSS of the direct child from /proc."""

    def __init__(self, pid: int) -> None:
        self._reader = cgroups.FileReader(Path(f"/proc/{pid}/statm"))
        self._page = os.sysconf("SC_PAGE_SIZE")

    def working_set_bytes(self) -> int:
        return int(self._reader.read().split()[1]) * self._page


def time_weighted_mean(times: list[float], values: list[float], start: float, end: float) -> float | None:
    """Mean of a step function (each sample holds until the next) over [start, end]."""
    total = weight = 0.0
    for i, (t, v) in enumerate(zip(times, values, strict=True)):
        t_next = times[i + 1] if i + 1 < len(times) else end
        lo, hi = max(t, start), min(t_next, end)
        if hi > lo:
            total += v * (hi - lo)
            weight += hi - lo
    return total / weight if weight > 0 else None


def read_metrics(path: Path) -> tuple[list[tuple[str, float]], dict[str, Any]]:
    """Phase marks and reported values. A torn or foreign line is skipped, never fatal."""
    phases: list[tuple[str, float]] = []
    values: dict[str, Any] = {}
    if not path.exists():
        return phases, values
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(item, dict):
            continue
        if "phase" in item and "t" in item:
            phases.append((str(item["phase"]), float(item["t"])))
        else:
            values.update(item)
    return phases, values


def latency_summary(latencies_ms: list[float]) -> dict[str, float] | None:
    if not latencies_ms:
        return None
    ordered = sorted(latencies_ms)
    cuts = statistics.quantiles(ordered, n=100, method="inclusive") if len(ordered) > 1 else [ordered[0]] * 99
    return {
        "p50": statistics.median(ordered), "p90": cuts[89], "p99": cuts[98],
        "mean": statistics.fmean(ordered), "std": statistics.stdev(ordered) if len(ordered) > 1 else 0.0,
        "min": ordered[0], "max": ordered[-1], "n": len(ordered),
    }


def _status(timed_out: bool, returncode: int, oom_kills: int, stderr_tail: str, rlimited: bool) -> str:
    if timed_out:
        return "timeout"
    if returncode == -signal.SIGKILL and oom_kills > 0:
        return "oom"
    if returncode != 0 and rlimited and "MemoryError" in stderr_tail:
        return "oom"
    return "ok" if returncode == 0 else "error"


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    """Run the script once under whatever limits this process already sits in; return the RunResult."""
    cgroup = cgroups.discover()
    probe = cgroups.MemoryProbe(cgroup) if cgroup.version else None
    oom_before = probe.oom_kills() if probe else 0
    cpu_before = probe.cpu_stat() if probe else {}
    workdir = Path(tempfile.mkdtemp(prefix="harness-run-"))
    metrics_path, stderr_path = workdir / "metrics.jsonl", workdir / "stderr.txt"
    interval = float(spec["sample_interval_ms"]) / 1000.0
    times: list[float] = []
    values: list[float] = []
    self_before = resource.getrusage(resource.RUSAGE_SELF)
    with open(stderr_path, "wb") as stderr_file:
        t0 = time.monotonic()
        child = subprocess.Popen(
            child_command(spec), env=child_env(spec, str(metrics_path)), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=stderr_file, start_new_session=True,
            preexec_fn=lambda: _prepare_child(spec),  # noqa: PLW1509 - single-threaded here
        )
    sampler = probe or _ProcessRss(child.pid)
    pidfd = os.pidfd_open(child.pid)
    poller = select.epoll()
    poller.register(pidfd, select.EPOLLIN)
    deadline, next_sample, timed_out = t0 + float(spec["timeout_s"]), t0, False
    while True:
        now = time.monotonic()
        if now >= deadline:
            timed_out = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            break
        if now >= next_sample:
            with contextlib.suppress(OSError, ValueError):
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
    _, wait_status, usage = os.wait4(child.pid, 0)
    self_after = resource.getrusage(resource.RUSAGE_SELF)
    poller.close()
    os.close(pidfd)
    returncode = os.waitstatus_to_exitcode(wait_status)
    peak = probe.peak_bytes() if probe else None
    oom_kills = (probe.oom_kills() - oom_before) if probe else 0
    cpu_after = probe.cpu_stat() if probe else {}
    if probe:
        probe.close()
    stderr_tail = stderr_path.read_bytes()[-STDERR_TAIL_CHARS:].decode(errors="replace")
    phases, reported = read_metrics(metrics_path)
    for path in (metrics_path, stderr_path):
        path.unlink(missing_ok=True)
    workdir.rmdir()
    return assemble_result(
        spec=spec, t0=t0, t_exit=t_exit, times=times, values=values, phases=phases, reported=reported,
        peak_bytes=peak, usage=usage, returncode=returncode, timed_out=timed_out, oom_kills=oom_kills,
        stderr_tail=stderr_tail, cgroup_version=cgroup.version,
        cpu_delta={k: cpu_after.get(k, 0) - cpu_before.get(k, 0) for k in cpu_after},
        runner_cpu_s=(self_after.ru_utime + self_after.ru_stime) - (self_before.ru_utime + self_before.ru_stime),
    )


def assemble_result(
    *, spec: dict[str, Any], t0: float, t_exit: float, times: list[float], values: list[float],
    phases: list[tuple[str, float]], reported: dict[str, Any], peak_bytes: int | None,
    usage: resource.struct_rusage, returncode: int, timed_out: bool, oom_kills: int, stderr_tail: str,
    cgroup_version: int, cpu_delta: dict[str, int], runner_cpu_s: float,
) -> dict[str, Any]:
    """Turn raw observations into the RunResult fields (units in every name)."""
    runtime_s = t_exit - t0
    latencies = [float(x) for x in reported.pop("latency_ms", []) or []]
    summary = latency_summary(latencies)
    batch = int(reported.pop("batch_size", spec["batch_size"]))
    bounds = [("startup", t0), *phases]
    by_phase: dict[str, float] = {}
    for i, (name, start) in enumerate(bounds):
        end = bounds[i + 1][1] if i + 1 < len(bounds) else t_exit
        mean = time_weighted_mean(times, values, start, end)
        if mean is not None:
            by_phase[name] = mean / MIB
    avg = time_weighted_mean(times, values, t0, t_exit)
    sampled_peak = max(values) if values else None
    periods = cpu_delta.get("nr_periods", 0)
    status = _status(timed_out, returncode, oom_kills, stderr_tail, bool(spec.get("rlimit_as_bytes")))
    load_s = reported.pop("load_s", None)
    return {
        "status": status,
        "exit_code": returncode if returncode >= 0 else None,
        "signal": -returncode if returncode < 0 else None,
        "stderr_tail": stderr_tail if status != "ok" else "",
        "runtime_s": runtime_s,
        "load_s": load_s,
        "latency_ms": summary,
        "latencies_ms": latencies,
        "batch_size": batch,
        "throughput_ips": batch * 1000.0 / summary["mean"] if summary and summary["mean"] > 0 else None,
        "peak_memory_mib": (peak_bytes if peak_bytes is not None else sampled_peak or 0) / MIB,
        "peak_source": "kernel" if peak_bytes is not None else "sampled",
        "peak_rss_mib": usage.ru_maxrss / 1024.0,
        "avg_memory_mib": avg / MIB if avg is not None else None,
        "avg_memory_mib_by_phase": by_phase,
        "sampled_peak_mib": sampled_peak / MIB if sampled_peak is not None else None,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "cpu_nr_periods": periods,
        "cpu_nr_throttled": cpu_delta.get("nr_throttled", 0),
        "cpu_throttled_s": cpu_delta.get("throttled_ns", 0) / 1e9,
        "samples": len(values),
        "sample_rate_hz": (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 and times[-1] > times[0] else 0.0,
        "runner_cpu_s": runner_cpu_s,
        "oom_kills": oom_kills,
        "cgroup_version": cgroup_version,
        "memory_samples": {"t_s": [round(t - t0, 4) for t in times], "mib": [round(v / MIB, 3) for v in values]}
        if spec.get("keep_samples") else None,
        "metrics": {k: v for k, v in reported.items() if isinstance(v, (int, float, str, bool)) and not (
            isinstance(v, float) and not math.isfinite(v))},
    }


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m harness.runner")
    parser.add_argument("--spec", required=True, help="JSON file with the run's spec")
    parser.add_argument("--out", help="where to write the RunResult JSON (default: stdout)")
    parser.add_argument("--join-cgroup", action="append", default=[], help="cgroup.procs file to enter first")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    if args.join_cgroup:
        # Enter the run's cgroup, then exec a fresh interpreter so all of the runner's memory is charged there.
        for procs in args.join_cgroup:
            Path(procs).write_text(str(os.getpid()))
        rest = ["--spec", args.spec, *(["--out", args.out] if args.out else [])]
        os.execv(sys.executable, [sys.executable, "-m", "harness.runner", *rest])
    spec = json.loads(Path(args.spec).read_text())
    result = measure(spec)
    text = json.dumps(result)
    if args.out:
        tmp = Path(args.out + ".tmp")
        tmp.write_text(text)
        os.replace(tmp, args.out)
    else:
        sys.stdout.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
