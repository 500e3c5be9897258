"""The LiteRT path for real: a .tflite model written by the tests, run by the interpreter and by the harness."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.helpers import profile_json, session_runs
from tests.tflite_model import dense_relu_weights, make_tflite_model

Interpreter = pytest.importorskip("ai_edge_litert.interpreter", reason="LiteRT not installed (.[dev])").Interpreter


@pytest.fixture(scope="module")
def dense_tflite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tflite_model(tmp_path_factory.mktemp("tflite") / "dense.tflite")


@pytest.mark.parametrize("batch", [1, 3])
def test_model_computes_what_numpy_computes(dense_tflite: Path, batch: int) -> None:
    interpreter = Interpreter(model_path=str(dense_tflite), num_threads=1)
    (x_detail,) = interpreter.get_input_details()
    assert list(x_detail["shape_signature"]) == [-1, 64] and x_detail["dtype"] is np.float32
    interpreter.resize_tensor_input(x_detail["index"], [batch, 64])
    interpreter.allocate_tensors()
    x = np.random.default_rng(1).standard_normal((batch, 64)).astype(np.float32)
    interpreter.set_tensor(x_detail["index"], x)
    interpreter.invoke()
    y = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
    weights, bias = dense_relu_weights()
    expected = np.maximum(x @ weights.T + bias, 0)
    assert y.shape == (batch, 32)
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)
    assert 0 < np.count_nonzero(y) < y.size  # the RELU clipped some outputs and kept others


@pytest.mark.parametrize("batch", [1, 2])
def test_harness_profiles_tflite(capsys, in_tmp_cwd: Path, dense_tflite: Path, batch: int) -> None:
    results = in_tmp_cwd / "results"
    profile_json(capsys, results, str(dense_tflite), "--backend", "local", "--repeats", "1",
                 "--iterations", "30", "--batch-size", str(batch))
    run = session_runs(results)[0]
    assert run["status"] == "ok", run["stderr_tail"]
    assert run["model_kind"] == "tflite" and run["load_s"] > 0
    assert run["latency_stats_ms"]["n"] == 30 and len(run["latencies_ms"]) == 30
    assert run["batch_size"] == batch and run["metrics"]["input_shapes"] == f"x={batch}x64"
    assert run["metrics"]["threads"] == 1
