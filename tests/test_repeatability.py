"""Numbers that repeat: adaptive repeats until a model's median is known to PRECISION (within MAX_REPEATS and
ADAPTIVE_BUDGET_S), warm-up until steady, and a noisy machine said in every run's record and in the summary. Real
sessions of real processes on the local backend."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.cli import main
from harness.measure.host_load import NOISY_OTHER_CORES
from tests.helpers import session_runs

SPREAD_FLAGS = ("--backend", "local", "--repeats", "6", "--iterations", "20", "--warmup", "0", "--no-report")


@pytest.fixture
def two_models(tmp_path: Path, tiny_onnx: Path) -> list[Path]:
    """The same tiny graph as `steady.onnx` (equal latency in every run) and `jumpy.onnx` (up to 50% apart)."""
    models = [tmp_path / "steady.onnx", tmp_path / "jumpy.onnx"]
    for model in models:
        shutil.copy(tiny_onnx, model)
    return models


def spread_session(results: Path, models: list[Path], workloads: Path, monkeypatch: pytest.MonkeyPatch,
                   **variables: str) -> tuple[Counter[str], dict]:
    """A run_spread.py session with `variables` set as make sets them; (runs per model, session.json)."""
    for name, value in variables.items():
        monkeypatch.setenv(f"HARNESS_SET_{name}", value)
    assert main(["profile", *map(str, models), "--script", str(workloads / "run_spread.py"), *SPREAD_FLAGS,
                 "--results-dir", str(results), "--", "0.5"]) == 0
    runs = session_runs(results)
    (session,) = [json.loads(path.read_text()) for path in results.glob("*/session.json")]
    return Counter(run["model_name"] for run in runs), session


def test_a_model_whose_runs_vary_runs_more_rounds_until_max_repeats(
        tmp_path: Path, two_models: list[Path], workloads: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """At REPEATS=6 the steady model's CI is [2.0, 2.0]: no extra round. The jumpy one's is wider than PRECISION=1%,
    so it runs one more round at a time up to MAX_REPEATS=9; the plan in session.json holds those rounds (a resume
    runs them), and the session's notes say the precision was not reached."""
    runs, session = spread_session(tmp_path / "results", two_models, workloads, monkeypatch,
                                   PRECISION="1", MAX_REPEATS="9")
    assert runs == {"steady": 6, "jumpy": 9}
    extra = [spec for spec in session["plan"] if spec["round"] >= 6]
    assert [(spec["model_name"], spec["round"]) for spec in extra] == [("jumpy", 6), ("jumpy", 7), ("jumpy", 8)]
    assert len({spec["run_id"] for spec in session["plan"]}) == len(session["plan"]) == 15
    (note,) = [note for note in session["notes"] if note.startswith("precision: ")]
    assert "jumpy cpus=1" in note and "after 9 runs" in note and "PRECISION=1%" in note
    assert note in capsys.readouterr().err


def test_no_extra_round_past_the_budget_off_or_below_six_repeats(
        tmp_path: Path, two_models: list[Path], workloads: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ADAPTIVE_BUDGET_S=0 leaves no time for an extra round; PRECISION=0 turns them off; PRECISION=60 is met by a
    spread of 50%; at REPEATS below 6 no CI of the median exists to narrow, and the session runs exactly REPEATS."""
    for index, variables in enumerate(({"PRECISION": "1", "ADAPTIVE_BUDGET_S": "0"}, {"PRECISION": "0"},
                                       {"PRECISION": "60"})):
        runs, _ = spread_session(tmp_path / f"results{index}", two_models, workloads, monkeypatch, **variables)
        assert runs == {"steady": 6, "jumpy": 6}, variables
    monkeypatch.setenv("HARNESS_SET_PRECISION", "1")
    monkeypatch.delenv("HARNESS_SET_ADAPTIVE_BUDGET_S")
    assert main(["profile", *map(str, two_models), "--script", str(workloads / "run_spread.py"), "--backend", "local",
                 "--repeats", "3", "--iterations", "20", "--no-report", "--results-dir", str(tmp_path / "three"),
                 "--", "0.5"]) == 0
    assert Counter(run["model_name"] for run in session_runs(tmp_path / "three")) == {"steady": 3, "jumpy": 3}


def test_warm_up_goes_on_until_two_windows_agree(tmp_path: Path, tiny_onnx: Path, workloads: Path) -> None:
    """A call that speeds up over its first 30 or so calls: WARMUP=5 fixed calls would time the slow ones; the warm-up
    goes on in windows of 5 until two agree within 2%, and the run's metrics say how many calls it made. WARMUP=0
    makes none."""
    calls = {}
    for warmup in ("5", "0"):
        results = tmp_path / f"warmup{warmup}"
        assert main(["profile", str(tiny_onnx), "--script", str(workloads / "warming.py"), "--backend", "local",
                     "--repeats", "1", "--no-report", "--results-dir", str(results), "--", warmup]) == 0
        (run,) = session_runs(results)
        calls[warmup] = (run["metrics"]["warmup_calls"], run["latency_stats_ms"]["p50"])
    (made, p50), (cold, _) = calls["5"], calls["0"]
    assert 20 <= made <= 80 and made % 5 == 0, made
    assert p50 < 1.25 * min(1.0 + 4 * 0.85**made, 5.0) + 0.5, p50  # timed after the slow calls
    assert cold == 0


@pytest.fixture
def busy_machine() -> Iterator[None]:
    """Two processes that spin for as long as the test lasts: the other work a noisy machine does."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    yield
    for spinner in spinners:
        spinner.kill()
        spinner.wait()


def test_a_run_on_a_busy_machine_says_so(tmp_path: Path, tiny_onnx: Path, busy_machine: None,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """With two spinning processes beside it, each run's host_load counts about a core busy besides the run (two
    spinners share the machine's second core and take turns on the run's; 0.80 measured on a 2-core host), twice the
    noisy threshold at least, and calls the run noisy; the summary counts the noisy runs and the session says so."""
    results = tmp_path / "results"
    assert main(["profile", str(tiny_onnx), "--backend", "local", "--repeats", "2", "--iterations", "2000",
                 "--no-report", "--results-dir", str(results)]) == 0
    runs = session_runs(results)
    for run in runs:
        load = run["host_load"]
        assert load["other_cores"] >= 2 * NOISY_OTHER_CORES and load["steal"] >= 0, load
        assert any("cores busy besides the run" in reason for reason in load["noisy"]), load
    (summary,) = [json.loads(path.read_text()) for path in results.glob("*/summary.json")]
    assert summary["models"][0]["noisy_runs"] == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"noisy: 2 of 2 runs shared the machine with other work: {tiny_onnx.stem} (2)" in err


def test_the_5th_percentile_headline_is_a_condition_of_its_own(tmp_path: Path, tiny_onnx: Path) -> None:
    """LATENCY_STATISTIC=p05 makes each run's headline its 5th-percentile inference (interpolated, as numpy's
    percentile), records it among the run's conditions, and never pools those runs with the median's."""
    import numpy as np

    from harness.analysis.stats import summarize_runs
    from harness.store.results import list_sessions, load_runs

    results = tmp_path / "results"
    for statistic in ("p05", "p50"):
        assert main(["profile", str(tiny_onnx), "--backend", "local", "--repeats", "2", "--iterations", "200",
                     "--latency-statistic", statistic, "--no-report", "--results-dir", str(results)]) == 0
    runs = [run for session in list_sessions(results) for run in load_runs(session)]
    by_statistic = {run["conditions"]["latency_statistic"]: run for run in runs}
    low, median = by_statistic["p05"], by_statistic[None]
    assert low["latency_headline"] == "p05" and median["latency_headline"] == "p50"
    stats = low["latency_stats_ms"]
    assert stats["headline"] == stats["p05"] == pytest.approx(np.percentile(low["latencies_ms"], 5))
    assert stats["min"] <= stats["p05"] <= stats["p50"]
    entries = summarize_runs(runs)
    assert len(entries) == 2 and all(entry.n_ok == 2 for entry in entries)
    assert {label for entry in entries for label in entry.differs_in} == {
        "LATENCY_STATISTIC (each run's headline latency: p05, or the median where unset)"}
