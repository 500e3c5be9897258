"""Records go both ways through the store, typed: what analysis, calibration and report get from it is a RunRecord
or a SessionInfo, never a raw dict; a line of any schema loads; provenance is stored once per session."""

from __future__ import annotations

import ast
import inspect
import json
import typing
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from pathlib import Path
from typing import Any

import pytest

import harness
from harness.analysis.stats import GroupSummary, Summary, summarize, summarize_runs
from harness.core.metric_registry import METRICS
from harness.core.records import Limits, RunOutcome, RunRecord, RunResult
from harness.store import results
from harness.store.results import SCHEMA_VERSION, SessionStore, load_runs

PACKAGE = Path(harness.__file__).parent
READERS = ("analysis", "calibration", "report")
"""The stages that read the store: what crosses into them must be typed."""


def store_names_used_by_readers() -> set[str]:
    """Names the readers import from harness.store."""
    names = set()
    for folder in READERS:
        for path in (PACKAGE / folder).glob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("harness.store"):
                    names.update(alias.name for alias in node.names)
    return names


def untyped_records(hint: Any) -> bool:
    """Whether `hint` is, or holds (in a list, an iterator, a tuple, a union...), a str-keyed mapping of Any."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (dict, Mapping, MutableMapping) and args == (str, Any):
        return True
    return any(untyped_records(arg) for arg in args)


def raw_signatures(functions: dict[str, Callable[..., Any]]) -> list[str]:
    """`name: parameter` for each parameter (or the return) of these functions annotated with a raw record."""
    found = []
    for name, function in functions.items():
        hints = typing.get_type_hints(function)
        found += [f"{name}: {param}" for param, hint in hints.items() if untyped_records(hint)]
    return found


def store_entry_points() -> dict[str, Callable[..., Any]]:
    """The store's functions and public methods that the readers import."""
    functions: dict[str, Callable[..., Any]] = {}
    for name in store_names_used_by_readers():
        value = getattr(results, name, None) or getattr(harness.store.migrations, name, None)
        if inspect.isfunction(value):
            functions[name] = value
        elif inspect.isclass(value):
            functions.update({f"{name}.{attr}": member for attr, member in vars(value).items()
                              if inspect.isfunction(member) and not attr.startswith("_")})
    return functions


def test_no_raw_record_crosses_from_the_store_into_analysis_calibration_or_report() -> None:
    entry_points = store_entry_points()
    assert {"load_runs", "load_session_info", "iter_all_runs"} <= set(entry_points)  # the walk sees the readers
    assert raw_signatures(entry_points) == []


def test_the_walk_finds_a_raw_record_wherever_it_hides() -> None:
    def takes(runs: list[dict[str, Any]]) -> None: ...

    def returns(path: Path) -> tuple[Path, Iterator[Mapping[str, Any]] | None]: ...

    def typed(runs: list[RunRecord], rows: list[Mapping[str, object]]) -> dict[str, float]: ...

    assert raw_signatures({"takes": takes, "returns": returns, "typed": typed}) == ["takes: runs", "returns: return"]


def a_record(run_id: str, provenance: dict[str, Any], latency_ms: float = 2.0) -> RunRecord:
    limits = Limits(cpus=1.0, cpu_mode="pinned", cpuset="0", cpu_quota_us=None, cpu_period_us=100000,
                    memory_bytes=512 * 1024**2, memory_swap_bytes=512 * 1024**2)
    result = RunResult(status="ok", runtime_s=0.5, latency_stats_ms={"p50": latency_ms, "headline": latency_ms},
                       latency_headline="p50", latencies_ms=[latency_ms] * 3, clock_s={"spawned": 1.0})
    return RunRecord(
        session_id="s", run_id=run_id, device_name="dev", model={"model_name": "net", "model_sha256": "ab" * 32},
        round=0, repeat=int(run_id[-1]), cpus=1.0, memory_mib=512.0, swap_mib=0.0, iterations=3, warmup=1,
        script="bench.py", script_args=[], threads=1, backend="local", isolation="cgroup-v1", started_at="now",
        limits_requested=limits, outcome=RunOutcome(result, limits, overhead_s=0.1, clock_s={"stored": 2.0}),
        conditions={"cpus": 1.0, "memory_bytes": 512 * 1024**2}, provenance=provenance, concurrent_runs=1,
    )


HERE = {"host_cpu_model": "cpu A", "hostname": "here", "seed": 0}
WORKER = {"host_cpu_model": "cpu B", "hostname": "worker-2", "seed": 0}


def test_a_record_written_reads_back_as_the_same_record(tmp_path: Path) -> None:
    record = a_record("r0", HERE)
    SessionStore(tmp_path, "s").append_run(record.to_dict())
    (loaded,) = load_runs(tmp_path / "s")
    assert loaded.to_dict() == record.to_dict() and loaded.extra == {}
    assert loaded.limits_requested == record.limits_requested and loaded.outcome.applied == record.outcome.applied
    assert loaded.result.latencies_ms == [2.0] * 3 and loaded.result.clock_s == {"spawned": 1.0, "stored": 2.0}
    assert loaded.line["schema_version"] == SCHEMA_VERSION and loaded["model_sha256"] == "ab" * 32


def test_code_that_walks_a_line_by_names_reads_a_record_as_its_line(tmp_path: Path) -> None:
    """A record is a Mapping of its stored names: the metric registry's walk of a nested path (which passes over
    whatever is not a mapping as a missing value) gives a record's figures, not None."""
    SessionStore(tmp_path, "s").append_run(a_record("r0", HERE).to_dict())
    (loaded,) = load_runs(tmp_path / "s")
    for metric in METRICS:
        assert metric.value(loaded) == metric.value(loaded.line)
    assert METRICS[0].value(loaded) is not None and dict(loaded) == loaded.line


def test_keys_no_field_holds_are_kept_not_dropped() -> None:
    line = {**a_record("r0", HERE).to_dict(), "per_op": {"depthwise_share": 0.25}, "op_time_ms": {"Conv": 1.0}}
    record = RunRecord.from_dict(line)
    assert record.extra == {"per_op": {"depthwise_share": 0.25}, "op_time_ms": {"Conv": 1.0}}
    assert record.to_dict() == line


def test_provenance_is_stored_once_unless_a_run_differs(tmp_path: Path) -> None:
    store = SessionStore(tmp_path, "s")
    for index, provenance in enumerate((HERE, HERE, WORKER)):
        store.append_run(a_record(f"r{index}", provenance).to_dict())
    SessionStore(tmp_path, "s").append_run(a_record("r3", HERE).to_dict())  # resumed: the first line still counts
    lines = [json.loads(line) for line in (tmp_path / "s" / "runs.jsonl").read_text().splitlines()]
    assert [line.get("provenance") for line in lines] == [HERE, None, WORKER, None]
    assert "provenance" not in lines[1] and "provenance" not in lines[3]
    assert [run.provenance for run in load_runs(tmp_path / "s")] == [HERE, HERE, WORKER, HERE]


def test_a_version_3_session_with_provenance_on_every_line_still_loads(tmp_path: Path) -> None:
    (tmp_path / "s").mkdir()
    lines = [{**a_record(f"r{i}", p).to_dict(), "schema_version": 3} for i, p in enumerate((HERE, WORKER, HERE))]
    (tmp_path / "s" / "runs.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    runs = load_runs(tmp_path / "s")
    assert [run.provenance for run in runs] == [HERE, WORKER, HERE]
    assert all(run.line["schema_version"] == SCHEMA_VERSION and run.ok for run in runs)


def test_a_summary_names_its_figures_and_gives_the_stored_dict() -> None:
    summary = summarize([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, None, float("nan")])
    assert isinstance(summary, Summary) and summary.n == 6 and summary.median == 3.5
    assert summary.as_dict() == {"n": 6, "median": 3.5, "iqr": 2.5, "mean": 3.5, "std": pytest.approx(1.8708287),
                                 "ci95_low": 1.0, "ci95_high": 6.0, "ci95_level": 0.96875, "unstable": True}
    with pytest.raises(AttributeError):
        summary.median = 0.0  # type: ignore[misc]  # frozen: proved by the assignment it refuses


def test_a_group_summary_gives_the_entry_summary_json_holds() -> None:
    runs = [RunRecord.from_dict({**a_record(f"r{i}", HERE, latency_ms=v).to_dict(), "schema_version": SCHEMA_VERSION})
            for i, v in enumerate((2.0, 2.2, 2.4))]
    (entry,) = summarize_runs(runs)
    assert isinstance(entry, GroupSummary) and entry.n_ok == 3 and entry.metrics["latency_ms"].median == 2.2
    stored = entry.as_dict()
    assert list(stored) == ["model_name", "cpus", "n_runs", "n_ok", "statuses", "throttled_runs",
                            "shorter_than_quota_window_runs", "noisy_runs", "latency_headline", "unstable_metrics",
                            "metrics", "conditions", "differs_in", "condition_label"]
    assert stored["metrics"]["latency_ms"] == entry.metrics["latency_ms"].as_dict()
    assert (stored["statuses"], stored["differs_in"], stored["condition_label"]) == ({"ok": 3}, [], "")
