"""`onnxruntime_perf_test` output, as microsoft/onnxruntime prints it (onnxruntime/test/perftest/).

performance_runner.cc, PerformanceRunner::Run, after the timed runs:
    Session creation time cost: 0.0418 s
    Total inference requests: 1000
    Average inference time cost: 5.123 ms
    Peak working set size: 35135488 bytes
and PerformanceResult::DumpToFile, with -s or without a result file:
    Min Latency: 0.0049 s      P50 Latency: 0.0051 s      (also P90, P95, P99, P999, Max)
Older builds (the tool's README) print `Average time cost:58.8053 ms` and `P50 Latency is 0.0587108sec`.
The peak working set is getrusage's ru_maxrss * 1024 on Linux and Android (posix/utils.cc,
GetPeakWorkingSetSize), so bytes of the process's peak resident set: the harness's peak_rss_mib.
The output does not name the model (the path is an argument): the import takes it from the command line.
"""

from __future__ import annotations

import re

from harness.core import metric_registry
from harness.core.errors import DataError
from harness.device.readings import MIB, Reading, line_matches, tool_lines

NAME = "onnxruntime_perf_test"
AVERAGE = re.compile(r"^Average (?:inference )?time cost: ?(?P<ms>[\d.e+-]+) ms")
SESSION = re.compile(r"^Session creation time cost: (?P<s>[\d.e+-]+) s")
PEAK_WORKING_SET = re.compile(r"^Peak working set size: ?(?P<bytes>\d+)")
LATENCY = re.compile(r"^(?P<which>Min|Max|P50|P90|P95|P99|P999) Latency(?:: | is )(?P<s>[\d.e+-]+) ?s(?:ec)?\b")
PERCENTILE_METRICS = {"Min": "latency_min_ms", "Max": "latency_max_ms", "P50": metric_registry.LATENCY_P50,
                      "P90": metric_registry.LATENCY_P90, "P95": "latency_p95_ms", "P99": metric_registry.LATENCY_P99,
                      "P999": "latency_p999_ms"}
MARKERS = ("Average inference time cost:", "Average time cost:", "Total inference requests:")


def looks_like(text: str) -> bool:
    return any(marker in text for marker in MARKERS)


def parse(text: str, source: str) -> Reading:
    """Mean and percentile latency, session creation time and peak working set of one perf_test run."""
    metrics: dict[str, float] = {}
    lines = tool_lines(text)
    for found in line_matches(AVERAGE, lines, source):
        metrics[metric_registry.LATENCY] = found.number("ms")
    for found in line_matches(SESSION, lines, source):
        metrics[metric_registry.LOAD] = found.number("s")
    for found in line_matches(PEAK_WORKING_SET, lines, source):
        metrics[metric_registry.PEAK_RSS] = found.number("bytes", scale=1 / MIB)
    for found in line_matches(LATENCY, lines, source):
        metrics[PERCENTILE_METRICS[found["which"]]] = found.number("s", scale=1000.0)
    if metric_registry.LATENCY not in metrics:
        raise DataError(f"{source}: no `Average inference time cost: X ms` line; is it the whole output of an "
                        "onnxruntime_perf_test run?")
    return Reading(source, NAME, metrics)
