"""One Chrome trace per model and CPUS value of a session: each run's phases plus the operators of its per-op
phase, in the trace-event JSON format that Perfetto (ui.perfetto.dev) and chrome://tracing load.

Each run is a process (pid = its position in the session), starting at 0 µs = the bench script's spawn:
thread 1 holds the phases (load, warmup, steady, profile, ...), thread 2 each profiled inference as a span
with its operators nested inside (name = node, cat = op type, args = shapes, MACs). The framework's clock is
mapped onto the run's by the monotonic start of the first profiled inference, which the bench script records.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from harness.analysis.per_op import RAW_DIR, RawProfile, load_raw, run_dir
from harness.core import metric_registry
from harness.core.errors import DataError
from harness.core.records import RunRecord
from harness.store.results import atomic_write_text

TRACES_DIR = "traces"
PHASES_TID, OPS_TID = 1, 2
US = 1e6


def trace_path(session_dir: Path, model_name: str, cpus: float) -> Path:
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", model_name)
    return Path(session_dir) / TRACES_DIR / f"{safe}_cpus{cpus:g}.trace.json"


def _meta(pid: int, tid: int | None, kind: str, name: str) -> dict[str, Any]:
    event = {"ph": "M", "pid": pid, "name": kind, "args": {"name": name}}
    if tid is not None:
        event["tid"] = tid
    return event


def phase_events(run: RunRecord, pid: int) -> list[dict[str, Any]]:
    """The run's phases as complete events, each lasting until the next mark (the last until the exit)."""
    marks = [("startup", 0.0), *[(str(name), float(t)) for name, t in run.result.phases_s or []]]
    end = metric_registry.get(metric_registry.RUNTIME).value(run.line) or marks[-1][1]
    events = []
    for index, (name, start) in enumerate(marks):
        stop = marks[index + 1][1] if index + 1 < len(marks) else end
        events.append({"name": name, "cat": "phase", "ph": "X", "pid": pid, "tid": PHASES_TID,
                       "ts": round(start * US, 3), "dur": round(max(stop - start, 0.0) * US, 3)})
    return events


def op_events(run: RunRecord, profile: RawProfile, pid: int) -> list[dict[str, Any]]:
    """Profiled inferences and their operators, shifted from the framework's clock onto the run's."""
    profile_start = next((float(t) for name, t in run.result.phases_s or [] if name == "profile"), None)
    if profile_start is None:
        return []
    origin = profile.runs[0][0]
    shift = (profile_start + (profile.phase_offset_s or 0.0)) * US - origin
    events = [{"name": f"inference {i}", "cat": "inference", "ph": "X", "pid": pid, "tid": OPS_TID,
               "ts": round(ts + shift, 3), "dur": round(dur, 3)} for i, (ts, dur) in enumerate(profile.runs)]
    for e in profile.events:
        args: dict[str, Any] = {"op_type": e.op_type, "inference": e.iteration, "node_index": e.seq}
        if e.input_shapes:
            args["input_shapes"] = e.input_shapes
        if e.output_shapes:
            args["output_shapes"] = e.output_shapes
        if e.macs is not None:
            args["macs"] = e.macs
        events.append({"name": e.name, "cat": e.op_type, "ph": "X", "pid": pid, "tid": OPS_TID,
                       "ts": round(e.ts_us + shift, 3), "dur": round(e.dur_us, 3), "args": args})
    return events


def session_trace(session_dir: Path, runs: list[RunRecord]) -> dict[str, Any]:
    """The trace document for these runs (one model at one CPUS value)."""
    events: list[dict[str, Any]] = []
    for pid, run in enumerate(runs, start=1):
        label = f"{run.run_id} · {run.model_name} · CPUS={float(run.cpus):g} · {run.result.status}"
        events += [_meta(pid, None, "process_name", label), _meta(pid, None, "process_sort_index", str(pid)),
                   _meta(pid, PHASES_TID, "thread_name", "phases"),
                   _meta(pid, OPS_TID, "thread_name", "profiled inferences and operators")]
        events += phase_events(run, pid)
        try:
            _, profile = load_raw(run_dir(session_dir, run.run_id) / RAW_DIR)
        except DataError:
            continue
        if profile is not None:
            events += op_events(run, profile, pid)
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"session": Path(session_dir).name, "clock": "microseconds since each run's spawn"}}


def write_session_trace(session_dir: Path, all_runs: list[RunRecord], model_name: str, cpus: float) -> Path:
    """(Re)write the trace of one model and CPUS value from every run of it so far: atomic, so it is always whole."""
    runs = [run for run in all_runs if run.model_name == model_name and float(run.cpus) == cpus]
    path = trace_path(session_dir, model_name, cpus)
    atomic_write_text(path, json.dumps(session_trace(session_dir, runs), separators=(",", ":")))
    return path
