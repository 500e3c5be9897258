"""What a finished run container says, in the harness's terms: the runner's result line on its stdout, the limits the
engine held for it, and the outcome both views make together (the engine's OOMKilled flag and exit status count only
for a run that failed)."""

from __future__ import annotations

import json
from typing import Any

from harness.backends.base import RUNNER_KILLED, killed_at_the_limit
from harness.core.errors import BackendError
from harness.core.records import Limits, RunResult
from harness.measure.spec import CPU_PERIOD_US, parse_cpu_list


def last_json_line(stdout: str) -> dict[str, Any] | None:
    """The runner's (or a probe's) last stdout line as JSON; None if it died before writing it."""
    lines = stdout.strip().splitlines()
    if not lines:
        return None
    try:
        result = json.loads(lines[-1])
    except json.JSONDecodeError:
        return None
    return result if isinstance(result, dict) else None


def reported_ok(stdout: str) -> bool:
    """Whether the runner's report says its run went well: the engine then has nothing to add (its OOMKilled flag and
    the exit status matter only for a run that failed), so the container's end need not be waited for."""
    return (last_json_line(stdout) or {}).get("status") == "ok"


def runner_result(stdout: str, image: str) -> RunResult | None:
    """The RunResult the runner printed; None if it died before writing it. A result of another shape comes
    from an image built from other harness sources, which would fail every run: one error, at once."""
    data = last_json_line(stdout)
    if data is None:
        return None
    try:
        return RunResult.from_dict(data)
    except (TypeError, ValueError) as err:
        raise BackendError(f"image {image} runs another version of the harness ({err}); rebuild it with "
                           "`make image`") from None


def applied_limits(host_config: dict[str, Any], swap_capped: bool) -> Limits:
    """The limits the engine holds for a container (its HostConfig), in the harness's terms."""
    nano = host_config.get("NanoCpus") or 0
    quota = round(nano * CPU_PERIOD_US / 1e9) if nano else (host_config.get("CpuQuota") or None)
    period = (host_config.get("CpuPeriod") or CPU_PERIOD_US) if quota else None
    cpuset = host_config.get("CpusetCpus") or None
    memory = host_config.get("Memory") or None
    unenforced = () if swap_capped else (
        "SWAP: the engine reports no swap limit support (SwapLimit false), so the run may swap beyond MEMORY+SWAP",)
    cores = len(parse_cpu_list(cpuset)) if cpuset else None
    return Limits(
        cpus=quota / period if quota and period else (float(cores) if cores else None),
        cpu_mode="quota" if quota else ("pinned" if cpuset else "none"), cpuset=cpuset, cpu_quota_us=quota,
        cpu_period_us=period, memory_bytes=memory,
        memory_swap_bytes=(host_config.get("MemorySwap") or None) if swap_capped else None, unenforced=unenforced)


def outcome(result: RunResult | None, state: dict[str, Any], stderr: str, elapsed_s: float) -> RunResult:
    """Merge the runner's view with the engine's (killed_at_the_limit: on cgroup v1 either can miss a kill)."""
    oom_killed = bool(state.get("OOMKilled"))
    if result is None:
        code = state.get("ExitCode")
        detail = stderr.strip() or state.get("Error") or (
            RUNNER_KILLED if oom_killed else "the runner ended without a result")
        return RunResult.failure("error", elapsed_s, detail, exit_code=code,
                                 signal=code - 128 if isinstance(code, int) and code > 128 else None)
    return killed_at_the_limit(result, oom_killed)
