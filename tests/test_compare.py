"""`harness compare` end to end: a float model and its int8 variant profiled for real, then compared; every
number in the comparison is checked against the stored runs and the model files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.cli import main
from harness.models.facts import onnx_facts
from harness.store.results import list_sessions, load_runs
from harness.zoo.quantize import quantize
from tests.helpers import profile_json
from tests.zoo_support import make_conv_model

PROFILE = ("--backend", "local", "--cpus", "1", "--memory", "1g", "--iterations", "40", "--warmup", "5")


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A float model and its static int8 variant, and an empty results directory."""
    root = tmp_path_factory.mktemp("compare")
    float_model = make_conv_model(root / "convnet.onnx")
    int8_model = quantize(float_model, "static")
    results = root / "results"
    return {"root": root, "float": float_model, "int8": int8_model, "results": results}


def _profile(capsys: pytest.CaptureFixture[str], results: Path, *args: str) -> str:
    profile_json(capsys, results, *args, *PROFILE)
    return list_sessions(results)[-1].name


def _compare(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["compare", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _row(comparison: dict[str, Any], key: str) -> dict[str, Any]:
    return next(row for row in comparison["rows"] if row["key"] == key)


def test_int8_variant_shows_size_and_latency_change(
    measured: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    results, a, b = measured["results"], measured["float"], measured["int8"]
    first = _profile(capsys, results, str(a), str(b), "--repeats", "3")
    newest = _profile(capsys, results, str(a), "--repeats", "2")
    code, out, _ = _compare(capsys, "convnet", "convnet_int8_static", "--results-dir", str(results), "--json")
    assert code == 0
    (comparison,) = json.loads(out)["comparisons"]
    assert comparison["cpus"] == 1.0
    assert comparison["a"]["session"] == newest and comparison["b"]["session"] == first
    runs = {name: [r for r in load_runs(results / session) if r["model_name"] == name]
            for name, session in (("convnet", newest), ("convnet_int8_static", first))}
    assert [len(runs["convnet"]), len(runs["convnet_int8_static"])] == [2, 3]

    size = _row(comparison, "size_mib")
    assert size["a"] == pytest.approx(onnx_facts(a)["size_mib"])
    assert size["b"] == pytest.approx(onnx_facts(b)["size_mib"])
    assert size["ratio"] == pytest.approx(size["b"] / size["a"]) and size["ratio"] < 0.45
    assert _row(comparison, "macs")["ratio"] == pytest.approx(1.0)
    readers = {"latency_p50_ms": lambda r: r["latency_stats_ms"]["p50"],
               "peak_memory_mib": lambda r: r["peak_memory_mib"]}
    for key, read in readers.items():
        row = _row(comparison, key)
        want_a = float(np.median([read(r) for r in runs["convnet"]]))
        want_b = float(np.median([read(r) for r in runs["convnet_int8_static"]]))
        assert (row["a"], row["b"]) == (pytest.approx(want_a), pytest.approx(want_b))
        assert row["ratio"] == pytest.approx(want_b / want_a)

    code, out, _ = _compare(capsys, "convnet", str(b), "--results-dir", str(results))
    assert code == 0
    assert "B/A" in out and "convnet_int8_static" in out
    assert f"{size['ratio']:.3f}x" in out
    latency = _row(comparison, "latency_p50_ms")
    assert f"{latency['ratio']:.3f}x" in out


def test_unknown_model_and_missing_cpus_are_one_line_errors(measured: dict[str, Any],
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    results = measured["results"]
    if not list_sessions(results):
        _profile(capsys, results, str(measured["float"]), str(measured["int8"]), "--repeats", "1")
    code, _, err = _compare(capsys, "convnet", "nothing_here", "--results-dir", str(results))
    assert code == 2 and err.count("\n") == 1 and "no runs of model 'nothing_here'" in err
    code, _, err = _compare(capsys, "convnet", "convnet_int8_static", "--cpus", "2", "--results-dir", str(results))
    assert code == 2 and err.count("\n") == 1 and "--cpus 2" in err


def test_files_are_matched_by_content_not_by_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for folder in ("one", "two"):
        (tmp_path / folder).mkdir()
    small = make_conv_model(tmp_path / "one" / "convnet.onnx", classes=10)
    large = make_conv_model(tmp_path / "two" / "convnet.onnx", classes=2000)
    results = tmp_path / "results"
    _profile(capsys, results, str(small), "--repeats", "1")
    _profile(capsys, results, str(large), "--repeats", "1")
    code, out, _ = _compare(capsys, str(small), str(large), "--results-dir", str(results), "--json")
    assert code == 0
    (comparison,) = json.loads(out)["comparisons"]
    size = _row(comparison, "size_mib")
    assert (size["a"], size["b"]) == (pytest.approx(onnx_facts(small)["size_mib"]),
                                      pytest.approx(onnx_facts(large)["size_mib"]))
    assert _row(comparison, "macs")["ratio"] > 1
