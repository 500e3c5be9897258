"""The first commands a newcomer types: `make profile` with nothing to bring (the built-in examples), any
script profiled as a whole, and the zoo extra installed on demand. Real runs, real files."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.cli import main
from harness.models.resolve import EXAMPLES_DIR
from harness.report.console import plain_progress
from harness.store.results import list_sessions, load_session_info
from tests.helpers import profile_json, session_runs

JOB = Path(__file__).parent / "workloads" / "job.py"


def recorded_sums() -> dict[str, str]:
    lines = (EXAMPLES_DIR / "SHA256SUMS").read_text().splitlines()
    return {name: digest for digest, name in (line.split() for line in lines)}


def test_examples_are_the_recorded_exports_and_a_few_mib_in_all() -> None:
    sums = recorded_sums()
    files = sorted(EXAMPLES_DIR.glob("*.onnx"))
    assert [f.name for f in files] == sorted(sums)
    assert {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in files} == sums
    assert sum(f.stat().st_size for f in files) < 10 * 1024**2


def test_profile_with_nothing_given_profiles_the_examples_and_says_what_next(
        capsys: pytest.CaptureFixture[str], in_tmp_cwd: Path) -> None:
    results = in_tmp_cwd / "results"
    capsys.readouterr()
    assert main(["profile", "--backend", "local", "--repeats", "1", "--results-dir", str(results)]) == 0
    err = capsys.readouterr().err
    runs = session_runs(results)
    assert sorted(r["model_name"] for r in runs) == sorted(Path(n).stem for n in recorded_sums())
    assert all(r["status"] == "ok" and r["latency_stats_ms"]["p50"] > 0 and r["peak_memory_mib"] > 0 for r in runs)
    # The user's REPEATS wins; the example run's shorter ITERATIONS fills in what the user left at its default.
    assert {r["iterations"] for r in runs} == {50}
    session = list_sessions(results)[-1]
    assert load_session_info(session)["profile_sources"]["ITERATIONS"] == "example run"
    report = session / "report" / "report.html"
    assert report.exists()
    assert "no MODEL given: profiling the 3 built-in examples" in err
    assert f"Next: open the report: {report}" in " ".join(err.split())
    assert "make profile MODEL=" in err and "make profile SCRIPT=" in err


def test_a_session_of_your_own_models_writes_its_report_and_says_what_next(
        capsys: pytest.CaptureFixture[str], in_tmp_cwd: Path) -> None:
    mine = in_tmp_cwd / "my_model.onnx"
    mine.write_bytes((EXAMPLES_DIR / "mobilenet_v1_0.25_128.onnx").read_bytes())
    results = in_tmp_cwd / "results"
    capsys.readouterr()
    assert main(["profile", str(mine), "--backend", "local", "--repeats", "1", "--iterations", "5",
                 "--results-dir", str(results)]) == 0
    err = " ".join(capsys.readouterr().err.split())
    report = list_sessions(results)[-1] / "report" / "report.html"
    assert report.exists() and "my_model" in report.read_text()
    assert f"Next: open the report: {report}" in err
    assert "harness rank" in err and "harness import-device" in err and "make predict" in err
    capsys.readouterr()
    assert main(["profile", str(mine), "--backend", "local", "--repeats", "1", "--iterations", "5",
                 "--results-dir", str(results), "--no-report"]) == 0
    assert "Next:" not in capsys.readouterr().err
    assert not (list_sessions(results)[-1] / "report").exists()


def test_the_report_after_a_session_weighs_accuracy_and_the_latency_budget(
        capsys: pytest.CaptureFixture[str], in_tmp_cwd: Path) -> None:
    """--accuracy and --max-latency-ms on profile reach the report it writes, as on `harness report`; in Python,
    Session.report takes them too. The larger example is the more accurate here, and only the budget that admits it
    names it."""
    import harness

    small, large = (EXAMPLES_DIR / f"mobilenet_v1_0.25_{size}.onnx" for size in (128, 224))
    (in_tmp_cwd / "acc.csv").write_text("model,accuracy\nmobilenet_v1_0.25_128,41.5\nmobilenet_v1_0.25_224,49.8\n")
    results = in_tmp_cwd / "results"
    assert main(["profile", str(small), str(large), "--backend", "local", "--repeats", "1", "--iterations", "20",
                 "--results-dir", str(results), "--accuracy", "acc.csv", "--max-latency-ms", "1000"]) == 0
    capsys.readouterr()
    session = list_sessions(results)[-1]
    answer = " ".join((session / "report" / "report.md").read_text().split("\n## ")[1].split())
    assert "Accuracy against latency" in answer
    assert "Most accurate under 1,000 ms on this host: mobilenet_v1_0.25_224 (49.8%" in answer
    html = harness.open_session(session, results_dir=results).report(in_tmp_cwd / "tight", accuracy="acc.csv",
                                                                      max_latency_ms=0.001)
    tight = " ".join((html.parent / "report.md").read_text().split())
    assert "No model with a known accuracy is under 0.00100 ms on this host" in tight


def test_outside_a_terminal_each_run_is_a_plain_line_with_its_round_and_eta(
        capsys: pytest.CaptureFixture[str]) -> None:
    """rich's live bar draws nothing in a CI log or a notebook cell: there each run says where the session is."""
    now = [100.0]
    planned = [2]
    specs = [SimpleNamespace(model_name=name, cpu=SimpleNamespace(cpus=1.0), repeat=r)
             for r, name in ((0, "a"), (0, "b"), (1, "a"))]
    with plain_progress(lambda: planned[0], clock=lambda: now[0]) as (on_start, on_done):
        for spec, status in zip(specs, ("ok", "oom", "ok"), strict=True):
            if spec.repeat:
                planned[0] = 3  # an adaptive round joins the plan after the planned runs are done
            on_start(spec)
            now[0] += 10
            on_done(spec, {"status": status})
    assert capsys.readouterr().err.splitlines() == [
        "run 1/2: a cpus=1 round 1 · elapsed 0:00:00 · eta ?",
        "run 2/2: b cpus=1 round 1 · elapsed 0:00:10 · eta 0:00:10",
        "b round 1: oom",
        "run 3/3: a cpus=1 round 2 · elapsed 0:00:20 · eta 0:00:10",
        "3 runs done in 0:00:30",
    ]


def test_script_with_no_model_is_profiled_as_a_whole(capsys: pytest.CaptureFixture[str], in_tmp_cwd: Path) -> None:
    results = in_tmp_cwd / "results"
    summary = profile_json(capsys, results, "--backend", "local", "--repeats", "2", "--script", str(JOB), "--", "3")
    runs = session_runs(results)
    assert [r["model_name"] for r in runs] == ["job", "job"]
    for run in runs:
        assert run["status"] == "ok" and run["model_kind"] == "script"
        assert run["runtime_s"] >= 0.3  # the job sleeps 0.3 s after allocating
        assert run["peak_memory_mib"] >= 48  # 3 x 16 MiB touched
        assert run["metrics"] == {"chunks": 3, "args": "3"}  # the script's argv holds no model path
        assert run["cpu_s"] > 0
    assert summary["models"][0]["n_ok"] == 2


def test_several_scripts_and_the_make_variables(capsys: pytest.CaptureFixture[str], in_tmp_cwd: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    other = in_tmp_cwd / "other job.py"
    other.write_bytes(JOB.read_bytes())
    # What `make profile SCRIPT=... ARGS=...` passes: environment variables split like a shell, never run by one.
    monkeypatch.setenv("HARNESS_SCRIPT", f"{JOB} '{other}'")
    monkeypatch.setenv("HARNESS_ARGS", "1 '; echo no-shell'")
    results = in_tmp_cwd / "results"
    profile_json(capsys, results, "--backend", "local", "--repeats", "1")
    runs = session_runs(results)
    assert sorted(r["model_name"] for r in runs) == ["job", "other job"]
    assert {r["status"] for r in runs} == {"ok"}
    assert all(r["metrics"]["args"] == "1 | ; echo no-shell" for r in runs)


def test_name_overrides_the_script_name(capsys: pytest.CaptureFixture[str], in_tmp_cwd: Path) -> None:
    results = in_tmp_cwd / "results"
    profile_json(capsys, results, "--backend", "local", "--repeats", "1", "--script", str(JOB), "--name", "etl",
                 "--", "1")
    assert [r["model_name"] for r in session_runs(results)] == ["etl"]


def test_name_with_models_is_one_line(capsys: pytest.CaptureFixture[str], in_tmp_cwd: Path) -> None:
    capsys.readouterr()
    assert main(["profile", "--backend", "local", "model.onnx", "--name", "x"]) == 2
    assert capsys.readouterr().err.strip() == ("harness: error: --name names a script profiled as a whole; models "
                                               "are named after their files")


def test_a_missing_script_is_one_line(capsys: pytest.CaptureFixture[str], in_tmp_cwd: Path) -> None:
    capsys.readouterr()
    assert main(["profile", "--backend", "local", "--script", "nope.py"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "harness: error: script nope.py not found: give the path of an existing file with --script " \
                  "(make: SCRIPT=...)"


def test_zoo_extra_is_asked_for_only_when_a_zoo_name_needs_it(monkeypatch: pytest.MonkeyPatch,
                                                               in_tmp_cwd: Path) -> None:
    (in_tmp_cwd / "resnet18").write_text("a file of that name is a file, not a zoo name")
    assert main(["zoo", "needs-extra", "mobilenet_v2_0.5_224"]) == 1  # the extra is installed here
    monkeypatch.setitem(sys.modules, "onnxscript", None)  # as a core install without the extra sees it
    assert main(["zoo", "needs-extra", "mobilenet_v2_0.5_224"]) == 0
    assert main(["zoo", "needs-extra", "resnet18", "model.onnx"]) == 1
    monkeypatch.setenv("HARNESS_MODEL", "a.onnx mobilenet_v1_0.25_128")
    assert main(["zoo", "needs-extra"]) == 0


@pytest.mark.slow
def test_an_example_regenerates_byte_for_byte(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_ZOO_DIR", str(tmp_path / "empty-cache"))
    assert main(["zoo", "export", "mobilenet_v1_0.25_128", "--out", str(tmp_path / "out")]) == 0
    made = tmp_path / "out" / "mobilenet_v1_0.25_128.onnx"
    assert hashlib.sha256(made.read_bytes()).hexdigest() == recorded_sums()["mobilenet_v1_0.25_128.onnx"]
