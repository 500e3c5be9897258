"""The typed records, the metric registry, the store's schema migration, and what a record says was applied."""

from __future__ import annotations

import ast
import contextlib
import json
from pathlib import Path

import pytest

from harness.backends.local import rlimit_applied
from harness.core import metric_registry
from harness.core.records import RunnerInput, RunResult
from harness.measure.spec import RunSpec, plan_cpu_limits
from harness.store.results import SCHEMA_VERSION, list_sessions, load_runs, load_session_info
from tests.conftest import make_matmul_model
from tests.helpers import profile_json, session_runs

PACKAGE = Path(__file__).resolve().parent.parent / "harness"
# Modules that may spell a metric name: the registry itself, and the bench-script protocol whose report keys
# (latency_ms=[...], load_s=...) are what scripts write, not metrics; and the migrations of old field names.
DEFINERS = {PACKAGE / "core" / "metric_registry.py", PACKAGE / "measure" / "report_protocol.py",
            PACKAGE / "store" / "migrations.py"}


def test_every_metric_name_in_the_code_comes_from_the_registry() -> None:
    """No module outside the registry writes a metric's name as a literal: it takes it from the registry."""
    names = set(metric_registry.BY_NAME) | {family.name for family in metric_registry.FAMILIES}
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path in DEFINERS:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and node.value in names:
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {node.value!r}")
    assert found == []


def test_the_registry_lists_only_registered_metrics_and_paths_that_a_result_has() -> None:
    for group in (metric_registry.CONSOLE_METRICS, metric_registry.COMPARE_METRICS,
                  metric_registry.REPORT_SUMMARY_METRICS, metric_registry.SCALING_METRICS,
                  (metric_registry.DEFAULT_METRIC,)):
        assert set(group) <= set(metric_registry.BY_NAME), group
    result_fields = set(RunResult.__dataclass_fields__)
    assert all(metric.path[0] in result_fields for metric in metric_registry.METRICS)
    assert metric_registry.get("op_time_ms.Conv").path == ("op_time_ms", "Conv")


def test_a_metric_reads_its_value_from_a_record() -> None:
    run = RunResult("ok", runtime_s=2.5, latency_stats_ms={"p50": 3.0, "p99": float("nan")}).to_dict()
    assert metric_registry.get("runtime_s").value(run) == 2.5
    assert metric_registry.get("latency_p50_ms").value(run) == 3.0
    assert metric_registry.get("latency_p99_ms").value(run) is None  # not a finite number
    assert metric_registry.get("peak_memory_mib").value(run) is None


def test_runner_input_round_trips_and_refuses_unknown_keys() -> None:
    given = RunnerInput(model="m", script="s.py", script_args=("a",), threads=1, cpus=0.5, iterations=3, warmup=1,
                        batch_size=1, sample_interval_ms=10.0, timeout_s=5.0, affinity=(1,))
    assert RunnerInput.from_dict(json.loads(json.dumps(given.to_dict()))) == given
    with pytest.raises(ValueError, match="does not know"):
        RunnerInput.from_dict({**given.to_dict(), "gpu": 1})


def test_a_failure_has_every_field_of_a_measured_result() -> None:
    failed = RunResult.failure("oom", 1.5, "x" * 5000, signal=9)
    assert set(failed.to_dict()) == set(RunResult.__dataclass_fields__)
    assert failed.status == "oom" and failed.latency_stats_ms is None and len(failed.stderr_tail) == 2000


def _spec(cpus: float, cpuset_cores: list[int]) -> RunSpec:
    return RunSpec(run_id="r", session_id="s", round=0, repeat=0, model_name="m", model="/m", script="/s.py",
                   script_args=(), cpu=plan_cpu_limits(cpus, "auto", cpuset_cores), memory_bytes=512 * 1024**2,
                   swap_bytes=0, iterations=1, warmup=0, batch_size=1, sample_interval_ms=10, timeout_s=5)


@pytest.mark.parametrize(("cpus", "cores", "mode", "applied_cpus", "unenforced"), [
    (1.0, [0, 1], "affinity", 1.0, ["MEMORY"]),
    (2.0, [0, 1], "affinity", 2.0, ["MEMORY"]),
    (0.5, [0, 1], "none", None, ["CPUS=0.5", "MEMORY"]),
    (3.0, [0, 1], "none", None, ["CPUS=3", "MEMORY"]),  # more than the cores: planned as a quota
])
def test_the_rlimit_fallback_records_what_it_could_not_enforce(
    cpus: float, cores: list[int], mode: str, applied_cpus: float | None, unenforced: list[str]
) -> None:
    spec = _spec(cpus, cores)
    runner_input = spec.runner_input(rlimit_as_bytes=spec.memory_bytes,
                                     affinity=tuple(cores[-int(cpus):]) if spec.cpu.cpuset else None)
    applied = rlimit_applied(spec, runner_input)
    requested = spec.limits_requested()
    assert requested.memory_bytes == 512 * 1024**2 and requested.cpus == cpus
    assert (applied.cpu_mode, applied.cpus, applied.cpu_quota_us, applied.memory_bytes) == (mode, applied_cpus,
                                                                                           None, None)
    assert applied.address_space_bytes == 512 * 1024**2
    assert [line.split(":")[0] for line in applied.unenforced] == unenforced


V1_RUN = {
    "schema_version": 1, "session_id": "old", "run_id": "old-r000-0000", "device_name": "generic",
    "model_name": "net", "model_sha256": "ab" * 32, "round": 0, "repeat": 0, "cpus": 1.0, "memory_mib": 512.0,
    "swap_mib": 0.0, "iterations": 10, "warmup": 2, "threads": 1,
    "limits": {"cpuset": "1", "cpu_quota_us": None, "cpu_period_us": 100000, "cpu_mode": "pinned",
               "memory_bytes": 536870912, "memory_swap_bytes": 536870912},
    "backend": "local", "isolation": "cgroup-v2", "status": "ok", "runtime_s": 1.0, "batch_size": 1,
    "latency_ms": {"p50": 2.0, "mean": 2.5, "n": 10}, "peak_memory_mib": 40.0,
    "provenance": {"host_cpu_model": "cpu", "backend": {"backend": "local", "isolation": "cgroup-v2"}},
}


def test_a_version_1_session_is_migrated_on_reading(tmp_path: Path) -> None:
    session = tmp_path / "old"
    session.mkdir()
    (session / "runs.jsonl").write_text(json.dumps(V1_RUN) + "\n")
    (session / "session.json").write_text(json.dumps(
        {"schema_version": 1, "session_id": "old", "profile": {"MEMORY": "536870912", "CPUS": "1.0"}}))
    (run,) = load_runs(session)
    assert run["schema_version"] == SCHEMA_VERSION
    assert run["latency_stats_ms"]["p50"] == run["latency_stats_ms"]["headline"] == 2.0 and "latency_ms" not in run
    assert run["limits_requested"]["cpu_mode"] == "pinned" and run["limits_applied"] is None
    assert run.limits_requested.cpu_mode == "pinned" and run.outcome.applied is None and run.model_name == "net"
    assert run["conditions"]["memory_bytes"] == 536870912 and run["conditions"]["model_sha256"] == "ab" * 32
    assert metric_registry.get("latency_ms").value(run.line) == 2.0 and run.result.latency_headline == "p50"
    assert load_session_info(session)["profile"] == {"MEMORY": 536870912, "CPUS": 1.0}


def test_a_newer_schema_is_refused_with_one_line(tmp_path: Path) -> None:
    from harness.core.errors import DataError

    session = tmp_path / "new"
    session.mkdir()
    (session / "runs.jsonl").write_text(json.dumps({**V1_RUN, "schema_version": SCHEMA_VERSION + 1}) + "\n")
    with pytest.raises(DataError, match="upgrade the harness"):
        load_runs(session)


def test_two_models_with_one_file_name_are_never_merged(capsys: pytest.CaptureFixture[str], in_tmp_cwd: Path) -> None:
    """a/model.onnx and b/model.onnx differ in content: each is its own model, with its own runs. The script
    reports through the protocol module's former name, which existing scripts still use."""
    script = in_tmp_cwd / "bench.py"
    script.write_text("from harness.metrics import report\nreport(load_s=0.25)\n")
    paths = []
    for folder, seed in (("a", 1), ("b", 2)):
        (in_tmp_cwd / folder).mkdir()
        paths.append(make_matmul_model(in_tmp_cwd / folder / "model.onnx", size=16, layers=1, seed=seed))
    results = in_tmp_cwd / "results"
    summary = profile_json(capsys, results, *map(str, paths), str(paths[0]), "--repeats", "2", "--backend", "local",
                           "--script", str(script))
    runs = session_runs(results)
    by_name: dict[str, set[str]] = {}
    for run in runs:
        by_name.setdefault(run["model_name"], set()).add(run["model_path"])
    assert len(by_name) == 2 and all(name.startswith("model@") for name in by_name)
    assert sorted(paths_ for names in by_name.values() for paths_ in names) == sorted(str(p.resolve()) for p in paths)
    assert sorted(e["n_runs"] for e in summary["models"]) == [2, 2]  # the repeated path is profiled once
    assert all(run["status"] == "ok" and run["load_s"] == 0.25 for run in runs)
    notes = load_session_info(list_sessions(results)[-1])["notes"]
    assert sum("is named model@" in note for note in notes) == 2 and any("more than once" in n for n in notes)


def test_a_result_from_another_harness_version_is_one_error_naming_the_fix() -> None:
    from harness.backends.docker_results import runner_result
    from harness.core.errors import BackendError

    assert runner_result(json.dumps(RunResult("ok", runtime_s=1.0).to_dict()), "img").runtime_s == 1.0
    with pytest.raises(BackendError, match=r"image img runs another version of the harness .*`make image`"):
        runner_result('{"status": "ok", "latency_ms": null}', "img")


def test_package_versions_are_what_importlib_metadata_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Provenance reads versions from the installed distributions' directory names, not through importlib.metadata
    (slow to import): the same answer for every package it records, and none for one that is not installed."""
    import importlib.metadata

    from harness.measure.provenance import RUNTIME_PACKAGES, installed_versions

    expected = {}
    for name in (*RUNTIME_PACKAGES, "not-a-package-here"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            expected[name] = importlib.metadata.version(name)
    assert installed_versions([*RUNTIME_PACKAGES, "not-a-package-here"]) == expected
    (tmp_path / "Old_Egg-0.9-py3.11.egg-info").mkdir()
    monkeypatch.syspath_prepend(str(tmp_path))
    assert installed_versions(["old-egg"]) == {"old-egg": "0.9"}
