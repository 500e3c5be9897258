"""Shared by the zoo, model-facts, quantize and compare tests: one export cache per test session, and a small
convolutional ONNX model built with onnx.helper (torch-free) whose weights dominate its size."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.conftest import save_checked


@pytest.fixture(scope="session")
def zoo_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """HARNESS_ZOO_DIR for the whole session, so each zoo model is exported once however many tests use it."""
    path = tmp_path_factory.getbasetemp() / "zoo-cache"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HARNESS_ZOO_DIR", str(path))
        yield path


def make_conv_model(path: Path, classes: int = 1000, seed: int = 0) -> Path:
    """conv 3->16 (3x3) -> relu -> conv 16->32 (3x3, stride 2) -> relu -> global pool -> gemm 32->classes.

    Input `x` is [batch, 3, 32, 32] with a symbolic batch, like the zoo's exports."""
    rng = np.random.default_rng(seed)

    def weight(name: str, *shape: int) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.2).astype(np.float32), name)

    inits = [weight("w1", 16, 3, 3, 3), weight("b1", 16), weight("w2", 32, 16, 3, 3), weight("b2", 32),
             weight("fc", classes, 32), weight("fcb", classes)]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "fc", "fcb"], ["y"], transB=1),
    ]
    graph = helper.make_graph(
        nodes, "convnet", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 32, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", classes])], inits,
    )
    return save_checked(graph, path)


# MACs of make_conv_model per sample, from the layer shapes: out elements x (in channels x kernel) each.
CONV_MODEL_MACS = 16 * 32 * 32 * (3 * 9) + 32 * 16 * 16 * (16 * 9) + 1000 * 32
