"""onnx_facts: MACs, params, layers and signature from the graph, checked against hand-computed shapes and
against the published multiply-add counts of MobileNetV1 and ResNet-18 (within 2%)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from harness.core.errors import ModelError
from harness.models.facts import onnx_facts
from harness.models.resolve import resolve_model
from tests.zoo_support import CONV_MODEL_MACS, make_conv_model, zoo_cache  # noqa: F401  (fixture)


def _mixed_graph(path: Path) -> dict[str, int]:
    """Depthwise conv, ConvTranspose, batched MatMul and Gemm(transA) on a batch of 1: returns their expected MACs.

    (A fixed batch: with a symbolic one the reshape's row count is unknown to shape inference.)"""
    rng = np.random.default_rng(1)
    arrays = {
        "dw": rng.standard_normal((8, 1, 3, 3)), "up": rng.standard_normal((8, 4, 2, 2)),
        "mm": rng.standard_normal((16, 6)), "g": rng.standard_normal((96, 10)),
    }
    inits = [numpy_helper.from_array(a.astype(np.float32), name) for name, a in arrays.items()]
    nodes = [
        helper.make_node("Conv", ["x", "dw"], ["d"], group=8, pads=[1, 1, 1, 1]),  # [1, 8, 16, 16]
        helper.make_node("ConvTranspose", ["d", "up"], ["u"], strides=[2, 2]),  # [1, 4, 32, 32]
        helper.make_node("Slice", ["u", "st", "en", "ax"], ["s"]),  # [1, 4, 32, 16]
        helper.make_node("MatMul", ["s", "mm"], ["m"]),  # [1, 4, 32, 6]
        helper.make_node("Reshape", ["m", "shape"], ["r"]),  # [8, 96]
        helper.make_node("Transpose", ["r"], ["t"], perm=[1, 0]),  # [96, 8]
        helper.make_node("Gemm", ["t", "g"], ["y"], transA=1),  # [8, 10]
    ]
    inits += [numpy_helper.from_array(np.array(v, dtype=np.int64), n)
              for n, v in (("st", [0]), ("en", [16]), ("ax", [3]), ("shape", [-1, 96]))]
    graph = helper.make_graph(nodes, "mixed", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return {
        "Conv": 8 * 16 * 16 * (1 * 9),  # depthwise: one input channel per output channel
        "ConvTranspose": 8 * 16 * 16 * (4 * 2 * 2),  # every input element scattered into 4 channels x 2x2
        "MatMul": 4 * 32 * 6 * 16,
        "Gemm": 8 * 10 * 96,  # 8 rows of 96 after the reshape
    }


def test_facts_of_a_small_convnet(tmp_path: Path) -> None:
    path = make_conv_model(tmp_path / "conv.onnx")
    facts = onnx_facts(path)
    model = onnx.load(path)
    assert facts["macs"] == CONV_MODEL_MACS
    assert facts["flops"] == 2 * CONV_MODEL_MACS
    assert facts["params"] == sum(numpy_helper.to_array(init).size for init in model.graph.initializer)
    assert facts["layers"] == 3
    assert facts["nodes"] == len(model.graph.node)
    assert facts["size_mib"] == pytest.approx(os.path.getsize(path) / 2**20)
    assert facts["inputs"] == [{"name": "x", "shape": ["batch", 3, 32, 32], "dtype": "float32"}]
    assert facts["opset"] == 17


def test_macs_of_depthwise_transpose_matmul_and_gemm(tmp_path: Path) -> None:
    expected = _mixed_graph(tmp_path / "mixed.onnx")
    facts = onnx_facts(tmp_path / "mixed.onnx")
    assert facts["macs"] == sum(expected.values())
    assert facts["layers"] == len(expected)
    # Every node writes one float32 tensor: d, u, s, m, r, t and y, shaped as the comments above say.
    written = [8 * 16 * 16, 4 * 32 * 32, 4 * 32 * 16, 4 * 32 * 6, 8 * 96, 96 * 8, 8 * 10]
    assert facts["activation_mib"] == pytest.approx(4 * sum(written) / 2**20)


def _attention(path: Path, einsum: bool) -> Path:
    """Scores and weighted values of 4 heads over 49 tokens of 32 dims, written as Einsum equations (the second with
    an ellipsis) or as MatMuls."""
    k_t = numpy_helper.from_array(np.ones((1, 4, 32, 49), np.float32), "k_t")
    v = numpy_helper.from_array(np.ones((1, 4, 49, 32), np.float32), "v")
    nodes = ([helper.make_node("Einsum", ["q", "k_t"], ["s"], equation="bhqd,bhdk->bhqk"),
              helper.make_node("Einsum", ["s", "v"], ["y"], equation="...qk,...kd->...qd")] if einsum else
             [helper.make_node("MatMul", ["q", "k_t"], ["s"]), helper.make_node("MatMul", ["s", "v"], ["y"])])
    tokens = [1, 4, 49, 32]
    graph = helper.make_graph(nodes, "attention", [helper.make_tensor_value_info("q", TensorProto.FLOAT, tokens)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, tokens)], [k_t, v])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, path)
    return path


def test_an_einsum_counts_the_macs_of_the_matmul_it_writes(tmp_path: Path) -> None:
    """MaxViT's attention is exported as Einsum equations: they count the MACs of the same products written as
    MatMuls (each 4 × 49 × 49 × 32), where they had counted none."""
    written = onnx_facts(_attention(tmp_path / "einsum.onnx", einsum=True))
    as_matmul = onnx_facts(_attention(tmp_path / "matmul.onnx", einsum=False))
    assert written["macs"] == as_matmul["macs"] == 2 * 4 * 49 * 49 * 32
    assert written["work_dense_macs"] == as_matmul["work_dense_macs"] and written["layers"] == 2


@pytest.mark.parametrize(("op", "gates"), [("RNN", 1), ("GRU", 3), ("LSTM", 4)])
def test_a_recurrent_layer_counts_its_input_and_hidden_products_at_every_step(tmp_path: Path, op: str,
                                                                              gates: int) -> None:
    """A keyword spotter's recurrent layer (49 steps of 40 features, 64 hidden, both directions): each step multiplies
    its input by W and the last hidden state by R, in each direction. It had counted no MACs, so a kernel table put a
    two-layer GRU at a seventh of its time."""
    steps, features, hidden, directions = 49, 40, 64, 2
    weights = [numpy_helper.from_array(np.full(shape, 0.01, np.float32), name) for name, shape in
               (("w", (directions, gates * hidden, features)), ("r", (directions, gates * hidden, hidden)))]
    node = helper.make_node(op, ["x", "w", "r"], ["", "h"], hidden_size=hidden, direction="bidirectional")
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [steps, 1, features])]
    graph = helper.make_graph([node], "kws", inputs, [helper.make_tensor_value_info("h", TensorProto.FLOAT, None)],
                              weights)
    path = tmp_path / f"{op}.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    import onnxruntime as ort

    [h] = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        None, {"x": np.ones((steps, 1, features), np.float32)})
    assert h.shape == (directions, 1, hidden)
    facts = onnx_facts(path)
    assert facts["macs"] == steps * directions * gates * hidden * (features + hidden)
    assert facts["layers"] == 1 and facts["work_dense_macs"] == facts["macs"]


def test_missing_and_corrupt_files_are_one_line_model_errors(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="does not exist"):
        onnx_facts(tmp_path / "absent.onnx")
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\x08\x07not a protobuf at all" * 50)
    with pytest.raises(ModelError) as caught:
        onnx_facts(garbage)
    assert "garbage.onnx" in str(caught.value) and "\n" not in str(caught.value)


def test_facts_are_read_once_per_content_then_from_the_cache(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A session starts without onnx for a model seen before: its facts come back from a file named by its content,
    equal to reading the graph; other content is read afresh, and a corrupt model is still refused."""
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path))
    path = make_conv_model(tmp_path / "conv.onnx")
    first = resolve_model(str(path)).facts
    assert first == onnx_facts(path) and len(list((tmp_path / "facts").iterdir())) == 1
    entry = next((tmp_path / "facts").iterdir())
    entry.write_text(json.dumps({**first, "macs": -1}))  # what the cache holds is what a later session sees
    assert resolve_model(str(path)).facts["macs"] == -1
    _mixed_graph(path)  # new content at the same path: a new entry, read from the graph
    assert resolve_model(str(path)).facts["macs"] == sum(_mixed_graph(tmp_path / "twin.onnx").values())
    assert len(list((tmp_path / "facts").iterdir())) == 2
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\x08\x07not a protobuf at all" * 50)
    with pytest.raises(ModelError, match="garbage.onnx"):
        resolve_model(str(garbage))
    assert len(list((tmp_path / "facts").iterdir())) == 2


# Published multiply-adds: MobileNetV1 paper (Howard et al. 2017) Table 8: 569M; ResNet paper (He et al.
# 2016) Table 1: 1.8 GFLOPs (multiply-adds), 1.82G in the usual precise count; MobileNetV2 paper Table 4:
# 300M; ShuffleNetV2 paper Table 8: 146M at 1x, 41M at 0.5x.
PUBLISHED_MACS = [
    ("mobilenet_v1_1.0_224", 569e6, 0.02),
    ("mobilenet_v1_0.5_224", 149e6, 0.02),  # MobileNetV1 paper, Table 6 (width multiplier)
    ("mobilenet_v1_1.0_128", 186e6, 0.02),  # MobileNetV1 paper, Table 7 (resolution)
    ("resnet18", 1.82e9, 0.02),
    ("mobilenet_v2_1.0_224", 300e6, 0.02),
    ("shufflenet_v2_x1_0", 146e6, 0.03),
    ("shufflenet_v2_x0_5", 41e6, 0.03),
]


@pytest.mark.usefixtures("zoo_cache")
@pytest.mark.parametrize(("name", "published", "tolerance"), PUBLISHED_MACS)
def test_zoo_macs_match_published_counts(name: str, published: float, tolerance: float) -> None:
    pytest.importorskip("torchvision", reason="needs the zoo extra: make setup-zoo")
    from harness import zoo

    macs = onnx_facts(zoo.export(name))["macs"]
    assert abs(macs - published) / published < tolerance, f"{name}: {macs / 1e6:.1f}M vs {published / 1e6:.0f}M"


PIXEL1_TABLE = Path(__file__).resolve().parents[1] / "examples" / "pixel1_mobilenet_v2_float.csv"


@pytest.mark.usefixtures("zoo_cache")
@pytest.mark.parametrize("name", ["mobilenet_v2_0.35_96", "mobilenet_v2_1.4_224"])
def test_zoo_mobilenet_v2_matches_the_pixel1_tables_macs_and_params(name: str) -> None:
    """The second published example's calibration rests on the zoo rebuilding its models: the extremes of its
    range (0.35 keeps a 1280-channel last layer, 1.4 widens it) have the table's MACs, which it truncates to whole
    millions (11.93M is listed as 11), and its parameters to two decimals."""
    pytest.importorskip("torchvision", reason="needs the zoo extra: make setup-zoo")
    import pandas as pd

    from harness import zoo

    row = pd.read_csv(PIXEL1_TABLE, comment="#").set_index("model").loc[name]
    facts = onnx_facts(zoo.export(name))
    assert facts["macs"] // 1e6 == row["macs_m"]
    assert round(facts["params"] / 1e6, 2) == row["params_m"]


@pytest.mark.usefixtures("zoo_cache")
def test_quantized_variant_keeps_macs_and_signature() -> None:
    pytest.importorskip("torchvision", reason="needs the zoo extra: make setup-zoo")
    from harness import zoo

    float_facts = onnx_facts(zoo.export("mobilenet_v2_0.25_96"))
    for mode in ("dynamic", "static"):
        int8_facts = onnx_facts(zoo.export(f"mobilenet_v2_0.25_96_int8_{mode}"))
        assert int8_facts["macs"] == float_facts["macs"]
        assert int8_facts["layers"] == float_facts["layers"]
        assert int8_facts["inputs"] == float_facts["inputs"]
        assert int8_facts["size_mib"] < 0.35 * float_facts["size_mib"]
