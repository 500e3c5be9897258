"""Shared fixtures: real tiny ONNX models built with onnx.helper, and workload scripts with known behaviour."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, external_data_helper, helper, numpy_helper

from harness.core.config import load_profile
from tests.boards import BoardFactory

WORKLOADS = Path(__file__).parent / "workloads"
EXTERNAL_WEIGHT = np.arange(16, dtype=np.float32).reshape(4, 4)
"""The weight W of make_external_data_model: with an input of ones, the model's first output is 0+4+8+12 = 24."""
ESCAPES = ("dotdot", "symlink", "absolute")
"""The ways out of a model's folder that make_escaping_model builds."""
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


def make_hardmax_model(path: Path) -> Path:
    """One Hardmax node: a standard ONNX op that pnnx leaves unconverted and ncnn has no layer for."""
    graph = helper.make_graph([helper.make_node("Hardmax", ["x"], ["y"])], "hardmax",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 8, 8])])
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


@pytest.fixture(scope="session")
def board_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BoardFactory]:
    """SSH boards in containers (tests/boards.py): `.shared(kind)` for the session's board of a kind, `.start(kind,
    cpus=, memory=)` for a test's own. Every container it started is removed at the end of the session."""
    factory = BoardFactory(tmp_path_factory.mktemp("boards"))
    yield factory
    factory.close()


def docker_required() -> bool:
    return os.environ.get("HARNESS_REQUIRE_DOCKER") == "1"


def make_external_data_model(path: Path, location: str, data_at: Path | None = None) -> Path:
    """y = x @ W (x: batch x 4) with W's 16 floats kept outside the model file, at `location` as written into the model
    (relative to its folder, or absolute), as an exporter writes a large model: data_location EXTERNAL and
    external_data entries location, offset and length. The bytes go to `data_at`, else to where the location points."""
    weight = numpy_helper.from_array(EXTERNAL_WEIGHT, "W")
    target = data_at or path.parent / location
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(weight.raw_data)
    external_data_helper.set_external_data(weight, location, offset=0, length=len(weight.raw_data))
    weight.ClearField("raw_data")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"])], "external",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, path)
    return path


def make_escaping_model(root: Path, how: str) -> tuple[Path, str]:
    """(model, location): a model under root/models/<how>/ whose W is read from root/models/secret/weights.bin, a
    sibling folder, by `how` (ESCAPES): '../secret/weights.bin', a symlinked folder 'data' -> ../secret, or the
    absolute path."""
    secret = root / "models" / "secret" / "weights.bin"
    folder = root / "models" / how
    location = {"dotdot": "../secret/weights.bin", "symlink": "data/weights.bin", "absolute": str(secret)}[how]
    model = make_external_data_model(folder / "model.onnx", location, data_at=secret)
    if how == "symlink":
        (folder / "data").symlink_to(secret.parent, target_is_directory=True)
    return model, location


def docker_image() -> str:
    """The image Docker tests use: the profile's IMAGE as the harness selects it (env.template, .env, and
    HARNESS_SET_IMAGE, which `make ... IMAGE=tag` exports), so a test can be pointed at an image built under a tag."""
    return load_profile().image
