"""int8 variants of an ONNX model through onnxruntime.quantization, for before/after comparisons.

dynamic: weights become uint8 once; activations are quantized on the fly at every inference
  (ConvInteger / MatMulInteger). uint8 weights because ORT's CPU ConvInteger kernel takes uint8 only.
static:  weights int8 per channel and activations uint8 with ranges calibrated beforehand, written as
  QDQ pairs that ORT fuses into integer kernels (its recommended format and U8S8 types for CPUs).
  Calibration feeds random normal data shaped by the model's input signature: no data set is needed, and
  latency, memory and size do not depend on it, but the accuracy of the result does (not measured here).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
from onnxruntime.quantization import (
    CalibrationDataReader,
    QuantFormat,
    QuantType,
    quantize_dynamic,
    quantize_static,
)
from onnxruntime.quantization.shape_inference import quant_pre_process

from harness.core.errors import ConfigError, ModelError, StorageError
from harness.zoo.cache import write_model_atomically

MODES = ("dynamic", "static")
CALIBRATION_SAMPLES = 8
CALIBRATION_SEED = 0
# Everything besides the mode and onnxruntime's version that shapes the output (the zoo's cache key uses it).
RECIPE = {"calibration_samples": CALIBRATION_SAMPLES, "calibration_seed": CALIBRATION_SEED, "format": "QDQ",
          "static_types": "U8S8 per-channel", "dynamic_weights": "U8"}


def random_feeds(path: Path, count: int, seed: int = CALIBRATION_SEED) -> Iterator[dict[str, np.ndarray]]:
    """`count` input dicts matching the model's signature; symbolic dims (the batch) become 1."""
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(seed)
    specs = [
        (arg.name, [d if isinstance(d, int) and d > 0 else 1 for d in arg.shape], arg.type)
        for arg in session.get_inputs()
    ]
    for _ in range(count):
        feed: dict[str, np.ndarray] = {}
        for name, shape, onnx_type in specs:
            if "float" not in onnx_type:
                raise ModelError(
                    f"{path}: input {name!r} is {onnx_type}; static quantization calibrates float inputs only, "
                    "use --mode dynamic"
                )
            dtype = np.float16 if onnx_type == "tensor(float16)" else np.float32
            feed[name] = rng.standard_normal(shape).astype(dtype)
        yield feed


class _RandomReader(CalibrationDataReader):
    def __init__(self, feeds: Iterator[dict[str, np.ndarray]]) -> None:
        self._feeds = feeds

    def get_next(self) -> dict[str, Any] | None:
        return next(self._feeds, None)


def default_output(path: Path, mode: str) -> Path:
    return path.with_name(f"{path.stem}_int8_{mode}.onnx")


def _quantize_into(source: Path, mode: str, target: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="harness-quant-") as tmp:
        prepared = Path(tmp) / "prepared.onnx"
        # Shape inference + graph optimisation first, as onnxruntime's quantization guide asks.
        quant_pre_process(str(source), str(prepared))
        if mode == "dynamic":
            quantize_dynamic(str(prepared), str(target), weight_type=QuantType.QUInt8)
        else:
            reader = _RandomReader(random_feeds(prepared, CALIBRATION_SAMPLES))
            quantize_static(
                str(prepared),
                str(target),
                reader,
                quant_format=QuantFormat.QDQ,
                per_channel=True,
                activation_type=QuantType.QUInt8,
                weight_type=QuantType.QInt8,
            )


def quantize(path: str | Path, mode: str, out: Path | None = None) -> Path:
    """Write the int8 variant of the ONNX model at `path` (default: <stem>_int8_<mode>.onnx beside it)."""
    source = Path(path)
    if mode not in MODES:
        raise ConfigError(f"quantization mode {mode!r} is not one of {', '.join(MODES)}; pass --mode dynamic|static")
    if not source.is_file():
        raise ModelError(f"model file {source} does not exist; give the path of an .onnx file or a zoo name")
    target = Path(out) if out else default_output(source, mode)
    try:
        write_model_atomically(target, lambda tmp: _quantize_into(source, mode, tmp))
    except (ModelError, StorageError):
        raise
    except Exception as err:  # ORT raises many types for graphs it cannot quantize
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ModelError(f"{source}: {mode} quantization failed ({reason}); try the other --mode") from err
    return target
