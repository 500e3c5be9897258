"""TensorFlow Lite / LiteRT `benchmark_model` logs, as the tool prints them (stdout, or logcat on Android).

The wording, from tensorflow/tensorflow:
- `Graph: [/data/local/tmp/mobilenet.tflite]`, always logged (tools/benchmark/benchmark_tflite_model.cc,
  LogParams): the model is the file's name without `.tflite`;
- `Num threads: [4]` (benchmark_model.cc) or `#threads used for CPU inference: [4]`
  (tools/delegates/default_execution_provider.cc): the thread count; -1 means the tool's default, not stated;
- `Inference timings in us: Init: 3862, First inference: 54186, Warmup (avg): 54186, Inference (avg): 11094.1`
  (benchmark_model.cc, BenchmarkLoggingListener::OnBenchmarkEnd); older tools print `Average inference timings in
  us: Warmup: 83235, Init: 38467, Inference: 79760.9` (the tool's README). Without either, the op profiler's
  `Timings (microseconds): count=50 first=79449 curr=81350 min=77385 max=88213 avg=79732 std=1929`
  (core/util/stats_calculator.cc, GetShortSummary; `count=1 curr=X` when every run took the same);
- `Memory footprint delta from the start of the tool (MB): init=2.85938 overall=9.67969`, in older tools
  `Peak memory footprint (MB): init=0 overall=0`: getrusage's ru_maxrss (KiB) growth / 1024.0, so MiB;
- `Overall peak memory footprint (MB) via periodic monitoring: 12.5` (--report_peak_memory_footprint=true):
  the largest ru_maxrss sampled (profiling/memory_usage_monitor.h: KiB / 1024.0; bytes / 1024 / 1024 in newer
  trees), MiB: the process's peak resident set, the same kernel figure as the harness's peak_rss_mib;
- `The input model file size (MB): 4.27635`: bytes / 1e6, decimal megabytes;
- with --enable_op_profiling=true, after `Operator-wise Profiling Info for Regular Benchmark Runs:`
  (tools/benchmark/profiling_listener.cc), the `Summary by node type` table (stats_calculator.cc,
  GetStatsByNodeType): `[Node type] [count] [avg ms] [avg %] [cdf %] [mem KB] [times called]`, tab-separated
  (`node type, count, avg_ms, avg %, cdf %, mem KB, times called` from the CSV formatter). One table per
  subgraph; `Delegate internal:` tables profile inside a delegate's node and are not added again.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath, PureWindowsPath

from harness.core import metric_registry
from harness.core.errors import DataError
from harness.device.readings import MIB_PER_MB, MS_PER_US, OpTime, Reading, checked_number, first_match, tool_lines

NAME = "benchmark_model"
GRAPH = re.compile(r"^Graph: \[(?P<path>[^\]]+)\]")
THREADS = re.compile(r"^(?:Num threads|#threads used for CPU inference): \[(?P<n>-?\d+)\]")
INFERENCE = re.compile(r"^Inference timings in us: .*\bInference \(avg\): (?P<us>[\d.e+]+)")
INIT = re.compile(r"^(?:Average )?[Ii]nference timings in us: .*\bInit: (?P<us>[\d.e+]+)")
OLD_INFERENCE = re.compile(r"^Average inference timings in us: .*\bInference: (?P<us>[\d.e+]+)")
PROFILER_TIMINGS = re.compile(r"^Timings \(microseconds\): count=(?P<count>\d+)(?P<rest>.*)")
FOOTPRINT = re.compile(r"^(?:Memory footprint delta from the start of the tool|Peak memory footprint) \(MB\): "
                       r"init=(?P<init>[\d.e+-]+) overall=(?P<overall>[\d.e+-]+)")
PEAK = re.compile(r"^Overall peak memory footprint \(MB\) via periodic monitoring: (?P<mb>[\d.e+-]+)")
MODEL_SIZE = re.compile(r"^The input model file size \(MB\): (?P<mb>[\d.e+]+)")
REGULAR_RUNS = "Operator-wise Profiling Info for Regular Benchmark Runs"
INITIALIZATION = "Profiling Info for Benchmark Initialization"
BY_TYPE = "Summary by node type"
DELEGATE_INTERNAL = "Delegate internal:"
_FIELD = r"[\s,]+"
BY_TYPE_ROW = re.compile(
    rf"^\s*(?P<type>\S.*?){_FIELD}(?P<count>\d+){_FIELD}(?P<ms>\d+(?:\.\d+)?){_FIELD}(?P<pct>\d+(?:\.\d+)?)%"
    rf"{_FIELD}\d+(?:\.\d+)?%{_FIELD}-?\d+(?:\.\d+)?{_FIELD}-?\d+\s*$"
)
MARKERS = ("Inference timings in us:", "Average inference timings in us:", REGULAR_RUNS, "Summary by node type")
MODEL_EXTENSION = ".tflite"


def looks_like(text: str) -> bool:
    return any(marker in text for marker in MARKERS)


def _model_name(path: str) -> str:
    """The graph file's name without `.tflite`, whichever separator the device's paths use."""
    name = (PureWindowsPath(path) if "\\" in path else PurePosixPath(path)).name
    return name[: -len(MODEL_EXTENSION)] if name.lower().endswith(MODEL_EXTENSION) else name


def _profiler_mean_us(lines: list[str], source: str, start: int) -> float | None:
    """The op profiler's mean run time: `avg=` of its Timings line, or `curr=` when every run took the same."""
    found = first_match(PROFILER_TIMINGS, lines, source, start)
    if found is None:
        return None
    fields = dict(re.findall(r"(\w+)=([\d.e+-]+)", found["rest"]))
    value = fields.get("avg", fields.get("curr"))
    return checked_number(value, found.where) if value is not None else None


def regular_runs_start(lines: list[str]) -> int | None:
    """Where the regular runs' profile starts: after its header, or at the top in tools that printed no header and
    no initialization profile; None when the initialization's is the only one."""
    start = next((i + 1 for i, line in enumerate(lines) if REGULAR_RUNS in line), None)
    if start is None and not any(INITIALIZATION in line for line in lines):
        return 0
    return start


def op_times(lines: list[str], source: str) -> tuple[OpTime, ...]:
    """The regular runs' per-node-type profile, summed over the subgraphs' `Summary by node type` tables."""
    start = regular_runs_start(lines)
    if start is None:
        return ()
    totals: dict[str, tuple[int, float]] = {}
    in_table = False
    for number_in_file, line in enumerate(lines[start:], start=start + 1):
        if DELEGATE_INTERNAL in line:
            break
        if BY_TYPE in line:
            in_table = True
            continue
        found = BY_TYPE_ROW.match(line) if in_table else None
        if found:
            where = f"{source}:{number_in_file}"
            nodes, ms = totals.get(found["type"], (0, 0.0))
            totals[found["type"]] = (nodes + int(checked_number(found["count"], where)),
                                     ms + checked_number(found["ms"], where))
        elif in_table and not line.strip():
            in_table = False
    return tuple(OpTime(node_type, nodes, ms) for node_type, (nodes, ms) in totals.items())


def parse(text: str, source: str) -> Reading:
    """The model, thread count, latency, load time, memory and per-op profile of one benchmark_model run."""
    lines = tool_lines(text)
    start = regular_runs_start(lines)
    latency = first_match(INFERENCE, lines, source) or first_match(OLD_INFERENCE, lines, source)
    if latency:
        latency_us: float | None = latency.number("us")
    else:
        latency_us = _profiler_mean_us(lines, source, start) if start is not None else None
    if latency_us is None:
        raise DataError(f"{source}: no `Inference timings in us: ... Inference (avg)` line nor an op profiler "
                        "`Timings (microseconds)` line; is it the whole output of a benchmark_model run?")
    metrics = {metric_registry.LATENCY: latency_us * MS_PER_US}
    if (init := first_match(INIT, lines, source)) is not None:
        metrics[metric_registry.LOAD] = init.number("us", scale=1e-6)  # µs to s
    if (footprint := first_match(FOOTPRINT, lines, source)) is not None:
        metrics["rss_delta_mib"] = footprint.number("overall", negative=True)
    if (peak := first_match(PEAK, lines, source)) is not None and (peak_mib := peak.number("mb")) > 0:
        metrics[metric_registry.PEAK_RSS] = peak_mib
    if (size := first_match(MODEL_SIZE, lines, source)) is not None:
        metrics["size_mib"] = size.number("mb", scale=MIB_PER_MB)
    graph = first_match(GRAPH, lines, source)
    threads = first_match(THREADS, lines, source)
    threads_n = threads.number("n", negative=True) if threads else -1.0  # -1: the tool's default
    notes = [] if latency else ["latency from the op profiler's Timings line (no `Inference timings` line)"]
    return Reading(source, NAME, metrics, model=_model_name(graph["path"]) if graph else None,
                   cpus=threads_n if threads_n > 0 else None,
                   ops=op_times(lines, source), notes=notes)
