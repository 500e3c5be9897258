"""Runs under different conditions are never pooled: summaries split them, rankings and calibration refuse."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.analysis.stats import summarize_runs
from harness.cli import main
from harness.store.results import iter_all_runs
from tests.helpers import profile_json

MIB = 1024**2


@pytest.fixture(scope="module")
def two_memories(tmp_path_factory: pytest.TempPathFactory, tiny_onnx: Path) -> Path:
    """Two sessions of one model that differ only in MEMORY."""
    results = tmp_path_factory.mktemp("pooling") / "results"
    for memory in ("512m", "1g"):
        capsys_free_profile(results, str(tiny_onnx), "--memory", memory)
    return results


def capsys_free_profile(results: Path, *args: str) -> None:
    assert main(["profile", "--json", "--results-dir", str(results), "--backend", "local", "--repeats", "3",
                 "--iterations", "20", "--warmup", "2", "--cpus", "1", *args]) == 0


def test_summaries_split_runs_that_differ_only_in_memory(two_memories: Path) -> None:
    entries = summarize_runs(iter_all_runs(two_memories))
    assert len(entries) == 2 and {e.model_name for e in entries} == {"tiny_mlp"}
    assert sorted(e.conditions["memory_bytes"] for e in entries) == [512 * MIB, 1024 * MIB]
    assert all(e.n_runs == 3 and e.differs_in == ["MEMORY"] for e in entries)


@pytest.mark.parametrize("command", [["rank"], ["rank", "--json"]])
def test_pooling_them_is_refused_with_one_line_naming_memory(two_memories: Path, command: list[str],
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main([*command, "--session", "all", "--results-dir", str(two_memories)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("harness: error: ")
    assert "differ in MEMORY: 512 MiB in session" in err and "1024 MiB in session" in err


def test_one_session_of_them_is_ranked(two_memories: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["rank", "--results-dir", str(two_memories)]) == 0


def test_a_summary_in_one_session_and_one_condition_names_no_difference(capsys: pytest.CaptureFixture[str],
                                                                         tmp_path: Path, tiny_onnx: Path) -> None:
    summary = profile_json(capsys, tmp_path, str(tiny_onnx), "--backend", "local", "--repeats", "1",
                           "--iterations", "5", "--warmup", "1")
    (entry,) = summary["models"]
    assert entry["differs_in"] == [] and entry["conditions"]["memory_bytes"] == 2048 * MIB


def test_runs_stored_before_dims_and_inputs_pool_with_todays(tmp_path: Path, tiny_onnx: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """A session written before DIMS and INPUTS were conditions (its runs lack both keys) pools with a new session
    of the same static model: both read as None."""
    import json

    results = tmp_path / "results"
    for _ in range(2):
        capsys_free_profile(results, str(tiny_onnx))
    older = sorted(results.glob("*/runs.jsonl"))[0]
    runs = [json.loads(line) for line in older.read_text().splitlines()]
    for run in runs:
        assert run["conditions"].pop("dims") is None and run["conditions"].pop("inputs") is None
    older.write_text("".join(json.dumps(run) + "\n" for run in runs))
    (entry,) = summarize_runs(iter_all_runs(results))
    assert entry.n_runs == 6 and entry.differs_in == []
    capsys.readouterr()
    assert main(["rank", "--session", "all", "--results-dir", str(results)]) == 0


def test_runs_at_other_dims_are_not_pooled(in_tmp_cwd: Path) -> None:
    from tests.token_models import make_encoder

    encoder = make_encoder(in_tmp_cwd / "encoder.onnx")
    results = in_tmp_cwd / "results"
    for seq in ("8", "16"):
        capsys_free_profile(results, str(encoder), "--dim", f"seq={seq}")
    entries = summarize_runs(iter_all_runs(results))
    assert sorted(e.conditions["dims"] for e in entries) == ["seq=16", "seq=8"]
    assert all(e.differs_in == ["DIMS (the sizes of the model's dynamic dimensions)"] for e in entries)
    assert sorted(e.condition_label for e in entries) == ["DIMS seq=16", "DIMS seq=8"]
