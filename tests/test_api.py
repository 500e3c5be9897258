"""The harness from Python (harness.profile, rank, compare, predict, Session): the same numbers as the CLI for the
same session, typed errors with the CLI's one-line messages, and what a notebook cell shows."""

from __future__ import annotations

import importlib
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import harness
from harness.core import metric_registry
from tests.helpers import profile_json

ROOT = Path(__file__).resolve().parents[1]
FAST = {"backend": "local", "cpus": 1, "repeats": 3, "iterations": 20, "warmup": 2, "progress": False}
STATISTICS = ("median", "iqr", "mean", "std", "ci95_low", "ci95_high")


def assert_same_summary(cli: dict[str, Any], frame: pd.DataFrame) -> int:
    """Every metric's every statistic of every model in the CLI's JSON summary equals the DataFrame's cell; returns
    how many numbers were compared."""
    compared = 0
    assert sorted(frame["model_name"]) == sorted(entry["model_name"] for entry in cli["models"])
    for entry in cli["models"]:
        row = frame[(frame["model_name"] == entry["model_name"]) & (frame["cpus"] == entry["cpus"])].iloc[0]
        assert (row["n_runs"], row["n_ok"]) == (entry["n_runs"], entry["n_ok"])
        for metric in metric_registry.METRICS:
            summary = entry["metrics"].get(metric.name) or {}
            for stat in STATISTICS:
                cli_value, value = summary.get(stat), row.get(f"{metric.name}_{stat}")
                if cli_value is None:
                    assert value is None or math.isnan(value), f"{metric.name}_{stat}"
                else:
                    assert value == pytest.approx(cli_value, rel=1e-12), f"{metric.name}_{stat}"
                    compared += 1
    return compared


def test_profile_from_python_gives_the_cli_summary_of_its_session(tiny_onnx: Path, tmp_path: Path) -> None:
    session = harness.profile([tiny_onnx], results_dir=tmp_path, **FAST)
    assert isinstance(session, harness.Session) and session.path.parent == tmp_path
    # The CLI's summary of the same session: a resume of a complete session runs nothing and prints its summary.
    done = subprocess.run([sys.executable, "-m", "harness.cli", "profile", "--resume", session.id, "--results-dir",
                           str(tmp_path), "--json"], capture_output=True, text=True, cwd=ROOT, check=True)
    compared = assert_same_summary(json.loads(done.stdout), session.summary)
    assert compared >= 5 * len(STATISTICS)  # latency, memory, runtime, ... each with its statistics
    runs = session.runs
    assert len(runs) == 3 and set(runs["status"]) == {"ok"}
    assert runs["latency_ms"].median() == pytest.approx(session.summary["latency_ms_median"].iloc[0])


def test_a_cli_session_opened_in_python_gives_the_cli_summary(tiny_onnx: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    cli = profile_json(capsys, tmp_path, str(tiny_onnx), "--backend", "local", "--cpus", "1", "--repeats", "3",
                       "--iterations", "20", "--warmup", "2")
    session = harness.open_session(cli["session_id"], results_dir=tmp_path)
    assert assert_same_summary(cli, session.summary) > 0
    assert session.records["summary"]["session_id"] == cli["session_id"]
    assert len(session.records["runs"]) == 3


def test_rank_and_compare_return_what_the_cli_prints(tiny_onnx: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from tests.conftest import make_matmul_model

    large = make_matmul_model(tmp_path / "large.onnx", size=512, layers=4)
    session = harness.profile([tiny_onnx, large], results_dir=tmp_path / "results", **{**FAST, "repeats": 6})
    ranking = harness.rank(session)
    table = ranking.table
    assert list(table["model"][:2]) == ["tiny_mlp", "large"] and table["rank"].iloc[0] == 1
    assert ranking.best() == ["tiny_mlp"]
    assert "tiny_mlp" in ranking._repr_html_()

    from harness.cli import main

    capsys.readouterr()
    assert main(["rank", "--json", "--results-dir", str(tmp_path / "results")]) == 0
    printed = json.loads(capsys.readouterr().out)["ranking"]
    assert [(r["model"], r["rank"], r["median"]) for r in printed] == \
        list(zip(table["model"], table["rank"], table["median"], strict=True))

    comparison = harness.compare("tiny_mlp", "large", results_dir=tmp_path / "results")
    macs = comparison.table.set_index("key").loc["macs"]
    assert macs["ratio"] == pytest.approx(macs["b"] / macs["a"]) and macs["ratio"] > 4
    assert main(["compare", "tiny_mlp", "large", "--json", "--results-dir", str(tmp_path / "results")]) == 0
    assert json.loads(capsys.readouterr().out)["comparisons"] == json.loads(json.dumps(comparison.comparisons))


def test_session_html_shows_the_device_and_each_model(tiny_onnx: Path, tmp_path: Path) -> None:
    session = harness.profile(tiny_onnx, device="raspberry-pi-4", results_dir=tmp_path, **FAST)
    shown = session._repr_html_()
    assert "raspberry-pi-4" in shown and "tiny_mlp" in shown and "<table" in shown
    median = session.summary["latency_p50_ms_median"].iloc[0]  # the report's summary columns (SHOWN_METRICS)
    assert f"{median:.4g}" in shown
    report = session.report()
    assert report.is_file() and report.read_text(encoding="utf-8").count("tiny_mlp") >= 1


def test_an_empty_session_says_so(tmp_path: Path) -> None:
    folder = tmp_path / "20260101-000000000-abcd"
    folder.mkdir()
    (folder / "session.json").write_text(json.dumps({"schema_version": 4, "session_id": folder.name,
                                                     "state": "running", "profile": {}}), encoding="utf-8")
    assert "no runs yet" in harness.Session(folder)._repr_html_()


@pytest.mark.parametrize(("call", "error", "words"), [
    (lambda tmp: harness.profile(["missing.onnx"], results_dir=tmp), harness.ModelError, "not found"),
    (lambda tmp: harness.profile(["m.onnx"], device="no-such-board"), harness.ConfigError, "raspberry-pi-4"),
    (lambda tmp: harness.profile(["m.onnx"], cpus="lots"), harness.ConfigError, "harness.profile(cpus=...)"),
    (lambda tmp: harness.profile(["m.onnx"], speed=3), harness.ConfigError, "not a profile setting"),
    (lambda tmp: harness.profile([]), harness.ConfigError, "at least one model"),
    (lambda tmp: harness.rank(results_dir=tmp), harness.DataError, "profile"),
    (lambda tmp: harness.compare("a", "b", results_dir=tmp), harness.DataError, "make profile MODEL=a"),
    (lambda tmp: harness.predict([1, 2], device="my-board", results_dir=tmp), harness.ConfigError,
     "device='my-board': cells need measured={cell: ms} of a few cells on it"),
    (lambda tmp: harness.predict(["|bad~0|"], device="nb201-raspi4"), harness.ConfigError, "cell"),
])
def test_errors_are_the_harness_s_typed_one_liners(call: Any, error: type[Exception], words: str,
                                                   tmp_path: Path) -> None:
    with pytest.raises(error) as caught:
        call(tmp_path)
    message = str(caught.value)
    assert isinstance(caught.value, harness.HarnessError) and words in message and "\n" not in message


def test_predict_answers_cells_from_static_facts_and_the_library() -> None:
    cells = list(range(0, 15625, 500))
    predictions = harness.predict(cells, device="nb201-raspi4")
    table = predictions.table
    assert len(table) == len(cells) and (table["pi_low"] < table["predicted"]).all()
    assert (table["predicted"] < table["pi_high"]).all()
    from harness.device.library import shipped_tables

    measured = next(t for t in shipped_tables() if t.name == "nb201-raspi4").values
    truth = measured[[f"nb201_{c}" for c in cells]].to_numpy()
    inside = ((table["pi_low"] <= truth) & (truth <= table["pi_high"])).mean()
    assert inside >= 0.8, f"only {inside:.0%} of the device's cells inside their 95% interval"
    from scipy.stats import spearmanr

    assert spearmanr(table["predicted"], truth).statistic > 0.8
    assert "nb201-raspi4" in predictions._repr_html_()


def test_a_library_call_prints_nothing_unless_progress_is_asked_for(tmp_path: Path, capfd: pytest.CaptureFixture[str],
                                                                     monkeypatch: pytest.MonkeyPatch,
                                                                     tiny_onnx: Path) -> None:
    """Zero-shot preparation profiles in this process (no child harness): silent from Python, its progress on
    stderr once progress is shown (the CLI, or harness.core.progress.show()); a second call profiles nothing."""
    from harness.api.preparing import prepare
    from harness.core import progress
    from harness.device.library import LibraryTable

    csv = tmp_path / "table.csv"
    csv.write_text("model,threads,latency_ms\nno_zoo_model_a,1,3.0\n")  # no zoo model: the user's alone is run
    table = LibraryTable("t", "board", "a test", "onnxruntime", 1, "fp32", "2026", "score", "shipped", csv)
    monkeypatch.setattr(progress.LOGGER, "handlers", [])
    with pytest.raises(harness.ModelError, match="no_such_model"):
        prepare(table, ["no_such_model.onnx"], results_dir=tmp_path / "quiet", backend="local")
    prepared = prepare(table, [str(tiny_onnx)], results_dir=tmp_path / "quiet", backend="local")
    assert capfd.readouterr() == ("", "")
    assert prepared.profiled == (str(tiny_onnx),) and prepared.names == {str(tiny_onnx): "tiny_mlp"}
    assert len(prepared.runs) == 3 and {run.model_name for run in prepared.runs} == {"tiny_mlp"}
    assert prepare(table, [str(tiny_onnx)], results_dir=tmp_path / "quiet", backend="local").profiled == ()
    progress.show()
    prepare(table, [str(tiny_onnx)], results_dir=tmp_path / "shown", backend="local")
    err = capfd.readouterr().err
    assert "zero-shot: profiling 1 models on this host" in err and "3 runs done" in err


def test_names_of_the_python_face_hide_no_package() -> None:
    packages = {path.name for path in (ROOT / "harness").iterdir() if path.is_dir()} | \
        {path.stem for path in (ROOT / "harness").glob("*.py")}
    assert set(harness.API) & packages == set()
    for name, (module, attribute) in harness.API.items():  # each name is the object its module defines
        assert getattr(harness, name) is getattr(importlib.import_module(module), attribute)


SNIPPET = """
from pathlib import Path

import harness

session: harness.Session = harness.profile(["a.onnx"], device="raspberry-pi-4", repeats=3)
again: harness.Session = harness.open_session(session.id)
runs = session.runs
summary = session.summary
page: Path = session.report()
best: list[str] = harness.rank(session).best()
table = harness.compare("a", "b").table
predictions = harness.predict([1, 2], device="nb201-raspi4", fit="auto", library=True)
predictor = harness.load_predictor("nb201-raspi4", fit="auto")
rows: list[harness.Prediction] = predictor.predict([5])
text: str = predictor.explain()
first = predictions.rows[0]
low: float | None = first.pi_low
named: str = first.model + first.reach + first.carried_by
try:
    harness.predict([1], device="x", session=session)
except harness.ConfigError as err:
    message: str = str(err)
"""


def test_a_user_s_snippet_of_every_public_call_type_checks_clean(tmp_path: Path) -> None:
    """mypy over user code that calls every public name: once `"object" not callable` for harness.predict."""
    snippet = tmp_path / "user.py"
    snippet.write_text(SNIPPET)
    done = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "--cache-dir", str(tmp_path / "cache"),
                           "--follow-imports", "silent", "--ignore-missing-imports", str(snippet)],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr


def test_dims_from_python_size_a_dynamic_sequence(tmp_path: Path) -> None:
    from tests.token_models import make_encoder

    encoder = make_encoder(tmp_path / "encoder.onnx")
    with pytest.raises(harness.HarnessError, match="DIMS") as refused:
        harness.profile(encoder, results_dir=tmp_path / "results", **FAST)
    assert "\n" not in str(refused.value) and not (tmp_path / "results").exists()
    session = harness.profile(encoder, dims={"seq": 16}, results_dir=tmp_path / "results", **FAST)
    assert set(session.runs["status"]) == {"ok"}
    assert {run["conditions"]["dims"] for run in session.records["runs"]} == {"seq=16"}
