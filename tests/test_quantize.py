"""int8 variants: smaller files that onnxruntime runs with the same signature and close outputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from harness.cli import main
from harness.core.errors import ConfigError, ModelError
from harness.models.facts import onnx_facts
from harness.zoo.quantize import quantize
from tests.zoo_support import make_conv_model


def _run(path: Path, x: np.ndarray) -> tuple[list[tuple[str, list, str]], np.ndarray]:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    signature = [(arg.name, arg.shape, arg.type) for arg in session.get_inputs()]
    return signature, session.run(None, {"x": x})[0]


@pytest.mark.parametrize("mode", ["dynamic", "static"])
def test_quantized_model_is_smaller_runs_and_stays_close(tmp_path: Path, mode: str) -> None:
    source = make_conv_model(tmp_path / "conv.onnx")
    target = quantize(source, mode)
    assert target == tmp_path / f"conv_int8_{mode}.onnx"
    before, after = onnx_facts(source), onnx_facts(target)
    # ~148 KiB of float32 weights become one byte each, plus int32 biases and per-channel scales (static).
    assert after["size_mib"] < 0.45 * before["size_mib"]
    assert after["macs"] == before["macs"] and after["inputs"] == before["inputs"]
    x = np.random.default_rng(3).standard_normal((4, 3, 32, 32)).astype(np.float32)
    (float_sig, want), (int8_sig, got) = _run(source, x), _run(target, x)
    assert int8_sig == float_sig
    assert got.shape == want.shape
    relative = np.linalg.norm(got - want) / np.linalg.norm(want)
    assert relative < 0.1, f"{mode}: int8 output is {relative:.1%} off the float output"
    assert not np.array_equal(got, want)  # it really was quantized


def test_explicit_output_and_bad_input_are_clear_errors(tmp_path: Path) -> None:
    source = make_conv_model(tmp_path / "conv.onnx")
    out = quantize(source, "dynamic", tmp_path / "sub" / "small.onnx")
    assert out.is_file() and not list(out.parent.glob(".*"))
    with pytest.raises(ConfigError, match="--mode dynamic|static"):
        quantize(source, "int4")
    with pytest.raises(ModelError, match="does not exist"):
        quantize(tmp_path / "absent.onnx", "static")
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not onnx")
    with pytest.raises(ModelError, match="quantization failed") as caught:
        quantize(broken, "dynamic")
    assert "\n" not in str(caught.value)
    assert not (tmp_path / "broken_int8_dynamic.onnx").exists()


def test_cli_reports_the_size_change(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = make_conv_model(tmp_path / "conv.onnx")
    assert main(["quantize", str(source), "--mode", "static"]) == 0
    out = capsys.readouterr().out
    target = tmp_path / "conv_int8_static.onnx"
    before, after = onnx_facts(source)["size_mib"], onnx_facts(target)["size_mib"]
    assert f"{before:.2f} MiB -> {after:.2f} MiB ({after / before:.2f}x)" in out
    assert main(["quantize", str(tmp_path / "nope.onnx")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
