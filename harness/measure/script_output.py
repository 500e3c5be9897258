"""What a bench script reported to the runner: its metrics lines and per-inference latencies, read with bounded
memory (the runner reads them inside the run's limits), and the per-run latency summary.

Imported by the runner at every run's start: standard library only, and none of its heavier modules (paths are
strings here, since pathlib costs the runner's start more than this module; typing is for the type checker only).
"""

from __future__ import annotations

import math
import os
from array import array
from json import loads

from harness.measure.report_protocol import LATENCIES_KEY, MAX_LATENCIES

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:
    from typing import Any

MIB = 1024 * 1024
MAX_METRICS_LINE_CHARS = 8 * MIB  # a longer line (a huge JSON latency list) is skipped, not parsed into memory
MAX_METRICS_CHARS = 64 * MIB
"""The most of a script's report file (HARNESS_METRICS, its channel to the runner in place of its stdout) the runner
reads: phase marks and a few values take a few KiB, a JSON latency list a few MiB. What comes after is left unread and
the run's notes say so in one line, so a script that reports in a loop cannot grow the runner inside the measured
memory."""


def read_metrics(path: str) -> tuple[list[tuple[str, float]], dict[str, Any], list[str]]:
    """Phase marks, reported values and notes. A torn or foreign line is skipped, never fatal; a line longer than
    MAX_METRICS_LINE_CHARS is skipped unread, and nothing past MAX_METRICS_CHARS is read, so a script cannot make the
    runner grow inside the measured memory."""
    phases: list[tuple[str, float]] = []
    values: dict[str, Any] = {}
    notes: list[str] = []
    if not os.path.exists(path):
        return phases, values, notes
    read = 0
    with open(path, encoding="utf-8", errors="replace") as handle:
        while line := handle.readline(MAX_METRICS_LINE_CHARS):
            read += len(line)
            if read > MAX_METRICS_CHARS:
                notes.append(f"the script's HARNESS_METRICS file was read up to {MAX_METRICS_CHARS // MIB} MiB, the "
                             "bound on it (MAX_METRICS_CHARS); report fewer lines")
                break
            if not line.endswith("\n") and len(line) == MAX_METRICS_LINE_CHARS:
                while (rest := handle.readline(MAX_METRICS_LINE_CHARS)) and not rest.endswith("\n"):
                    pass
                notes.append(f"a metrics line longer than {MAX_METRICS_LINE_CHARS // MIB} MiB was skipped; report "
                             "long latency series with harness.measure.report_protocol.report_latencies "
                             "(binary) instead")
                continue
            try:
                item = loads(line)
            except ValueError:
                continue
            if not isinstance(item, dict):
                continue
            if "phase" in item and "t" in item:
                phases.append((str(item["phase"]), float(item["t"])))
            else:
                values.update(item)
    return phases, values, notes


def read_latencies(path: str, reported: dict[str, Any]) -> tuple[array, int]:
    """The per-inference latencies (ms): the binary file if the script wrote one, else a reported JSON list.

    At most MAX_LATENCIES are kept (the binary file's first ones; a uniform seeded sample of a longer JSON list), so
    the runner's footprint is bounded. Returns them and how many the script reported in all."""
    listed = reported.pop(LATENCIES_KEY, None)
    latencies = array("d")
    size = os.path.getsize(path) if os.path.exists(path) else 0
    if size:
        count = size // latencies.itemsize
        with open(path, "rb") as handle:
            latencies.fromfile(handle, min(count, MAX_LATENCIES))
        return latencies, count
    if not isinstance(listed, list):
        return latencies, 0
    numbers = [float(x) for x in listed if isinstance(x, (int, float)) and math.isfinite(x)]
    if len(numbers) > MAX_LATENCIES:
        import random  # only for a script that reports more latencies than are kept, as a JSON list

        keep = sorted(random.Random(0).sample(range(len(numbers)), MAX_LATENCIES))
        numbers = [numbers[i] for i in keep]
    latencies.extend(numbers)
    return latencies, len(listed)


def percentile(ordered: list[float], percent: int) -> float:
    """Linear interpolation between order statistics, as statistics.quantiles(method="inclusive") and numpy's default
    percentile compute it, without their import cost."""
    low, part = divmod(percent * (len(ordered) - 1), 100)
    return ordered[low] if not part else (ordered[low] * (100 - part) + ordered[low + 1] * part) / 100


def latency_summary(latencies_ms: array, exact: dict[str, Any] | None = None) -> dict[str, float] | None:
    """p05/p50/p90/p99/mean/std/min/max/n. `exact` (the bench loop's `latency_all`) replaces n, mean, min and max with
    the figures over every call when the latencies are a sample of a longer run."""
    if not latencies_ms:
        return None
    ordered = sorted(latencies_ms)
    n, middle = len(ordered), len(ordered) // 2
    mean = math.fsum(ordered) / n
    summary = {
        "p05": percentile(ordered, 5), "p50": ordered[middle] if n % 2 else (ordered[middle - 1] + ordered[middle]) / 2,
        "p90": percentile(ordered, 90), "p99": percentile(ordered, 99), "mean": mean,
        "std": math.sqrt(math.fsum((x - mean) ** 2 for x in ordered) / (n - 1)) if n > 1 else 0.0,
        "min": ordered[0], "max": ordered[-1], "n": n,
    }
    if isinstance(exact, dict):
        summary.update({key: exact[key] for key in ("n", "mean", "min", "max") if isinstance(exact.get(key),
                                                                                              (int, float))})
    return summary
