"""DIMS on the engines that need fixed shapes: ncnn (pnnx's inputshape) and LiteRT (onnx2tf on the graph with its
dimensions fixed) convert a dynamic-seq model at the size given; what they cannot run is refused in one line; token
ids fed to LiteRT stay in the vocabulary read from the ONNX graph."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from harness.core.errors import ModelError
from harness.models.litert_convert import converter_versions
from tests.helpers import profile_json, session_runs
from tests.test_inputs import QUICK, refused
from tests.token_models import make_encoder, make_sequence_projection


def litert_missing() -> bool:
    if importlib.util.find_spec("ai_edge_litert") is None:
        return True
    try:
        converter_versions()
    except ModelError:
        return True
    return False


needs_ncnn = pytest.mark.skipif(importlib.util.find_spec("ncnn") is None, reason="the ncnn extra is not installed")
needs_litert = pytest.mark.skipif(litert_missing(), reason="the litert extra or onnx2tf's venv is not installed")


@pytest.fixture(autouse=True)
def conversion_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    cache = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HARNESS_CACHE_DIR", str(cache))
        yield cache


@needs_ncnn
def test_ncnn_converts_a_dynamic_sequence_at_the_dims_size(capsys, in_tmp_cwd: Path) -> None:
    model = make_sequence_projection(in_tmp_cwd / "projection.onnx")
    make_encoder(in_tmp_cwd / "encoder.onnx")
    results = in_tmp_cwd / "results"
    profile_json(capsys, results, str(model), "encoder.onnx", *QUICK, "--runtime", "ncnn", "--dim", "seq=16")
    runs = {run["model_name"]: run for run in session_runs(results)}
    assert runs["projection"]["status"] == "ok", runs["projection"]["stderr_tail"]
    assert runs["projection"]["conditions"]["dims"] == "seq=16"
    inputs = [line.split() for line in Path(runs["projection"]["model_converted"]).read_text().splitlines()
              if line.startswith("Input")]
    assert inputs and "0=8" in inputs[0] and "1=16" in inputs[0]  # w = HIDDEN, h = seq
    assert runs["encoder"]["status"] == "error"  # its int64 token inputs, in one line
    assert runs["encoder"]["stderr_tail"].strip().endswith("ncnn runs float32 inputs only (use RUNTIME=onnxruntime)")


@needs_litert
def test_litert_converts_a_dynamic_sequence_and_feeds_token_ids_in_range(capsys, in_tmp_cwd: Path) -> None:
    from ai_edge_litert.interpreter import Interpreter

    make_encoder(in_tmp_cwd / "encoder.onnx", vocab=7)
    results = in_tmp_cwd / "results"
    profile_json(capsys, results, "encoder.onnx", *QUICK, "--runtime", "litert", "--dim", "seq=16")
    (run,) = session_runs(results)[:1]
    assert run["status"] == "ok", run["stderr_tail"]  # random ids in [0, 10) would stop LiteRT's Gather
    assert run["conditions"]["dims"] == "seq=16"
    details = Interpreter(model_path=run["model_converted"]).get_input_details()
    assert [list(detail["shape_signature"][1:]) for detail in details] == [[16], [16]]


def test_inputs_are_refused_on_engines_that_do_not_read_them(capsys, in_tmp_cwd: Path) -> None:
    make_encoder(in_tmp_cwd / "encoder.onnx")
    np.savez(in_tmp_cwd / "inputs.npz", input_ids=np.zeros((1, 4), np.int64), attention_mask=np.ones((1, 4), np.int64))
    err = refused(capsys, "encoder.onnx", *QUICK, "--runtime", "ncnn", "--inputs", "inputs.npz")
    assert "INPUTS=inputs.npz is fed by onnxruntime only" in err and "RUNTIME=ncnn" in err
    assert not (in_tmp_cwd / "results").exists()
