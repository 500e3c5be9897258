"""Shared fixtures: real tiny ONNX models built with onnx.helper, and workload scripts with known behaviour."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

WORKLOADS = Path(__file__).parent / "workloads"
# tests/vm rearranges the cgroup tree of the machine it runs on: only inside the VM of tests/vm/run.
collect_ignore = [] if os.environ.get("HARNESS_IN_VM") == "1" else ["vm"]


def save_checked(graph: onnx.GraphProto, path: Path) -> Path:
    """A test graph as a checked opset-17 model file (IR version 8, which every onnxruntime here reads)."""
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


def make_matmul_model(path: Path, size: int = 256, layers: int = 2, seed: int = 0) -> Path:
    """A chain of MatMul+Relu layers with a dynamic batch dimension: real work for onnxruntime."""
    rng = np.random.default_rng(seed)
    nodes, inits, current = [], [], "x"
    for i in range(layers):
        weight = numpy_helper.from_array(rng.standard_normal((size, size)).astype(np.float32) / size, f"w{i}")
        inits.append(weight)
        nodes += [helper.make_node("MatMul", [current, f"w{i}"], [f"m{i}"]),
                  helper.make_node("Relu", [f"m{i}"], [f"r{i}"])]
        current = f"r{i}"
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", size])],
                              [helper.make_tensor_value_info(current, TensorProto.FLOAT, ["batch", size])], inits)
    return save_checked(graph, path)


@pytest.fixture(scope="session")
def tiny_onnx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_matmul_model(tmp_path_factory.mktemp("models") / "tiny_mlp.onnx")


@pytest.fixture(scope="session")
def workloads() -> Path:
    return WORKLOADS


@pytest.fixture
def in_tmp_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run in an empty directory so no env.template/.env of the checkout leaks into a test's profile."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def docker_required() -> bool:
    return os.environ.get("HARNESS_REQUIRE_DOCKER") == "1"
