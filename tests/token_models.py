"""Tiny transformer-like ONNX models built with onnx.helper: token inputs, a dynamic sequence length, attention."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HIDDEN = 8


def make_encoder(path: Path, vocab: int = 7, seq: str | int = "seq") -> Path:
    """input_ids and attention_mask [batch, seq] -> Gather on a [vocab, HIDDEN] embedding, a projection, one
    attention (q @ q^T, masked, softmax, @ q) and a LayerNormalization. onnxruntime stops on an id >= vocab.

    MACs of one sample at sequence length S: S*H*H (projection) + 2*S*S*H (the two attention MatMuls), H = HIDDEN."""
    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.standard_normal((vocab, HIDDEN)).astype(np.float32), "embedding"),
               numpy_helper.from_array(rng.standard_normal((HIDDEN, HIDDEN)).astype(np.float32), "wq"),
               numpy_helper.from_array(np.array([1], dtype=np.int64), "axis1"),
               numpy_helper.from_array(np.ones(HIDDEN, dtype=np.float32), "gamma"),
               numpy_helper.from_array(np.zeros(HIDDEN, dtype=np.float32), "beta")]
    nodes = [helper.make_node("Gather", ["embedding", "input_ids"], ["x"]),
             helper.make_node("MatMul", ["x", "wq"], ["q"]),
             helper.make_node("Transpose", ["q"], ["kt"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["q", "kt"], ["scores"]),
             helper.make_node("Cast", ["attention_mask"], ["mask_f"], to=TensorProto.FLOAT),
             helper.make_node("Unsqueeze", ["mask_f", "axis1"], ["mask_b"]),
             helper.make_node("Mul", ["scores", "mask_b"], ["masked"]),
             helper.make_node("Softmax", ["masked"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "q"], ["context"]),
             helper.make_node("LayerNormalization", ["context", "gamma", "beta"], ["y"], axis=-1)]
    for index, node in enumerate(nodes):
        node.name = f"{node.op_type.lower()}_{index}"  # named, so the per-op table joins the graph's facts
    inputs = [helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", seq])
              for name in ("input_ids", "attention_mask")]
    graph = helper.make_graph(nodes, "encoder", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", seq, HIDDEN])], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


def encoder_macs(seq: int) -> int:
    """make_encoder's MACs by hand: the projection, then scores and context of the attention."""
    return seq * HIDDEN * HIDDEN + 2 * seq * seq * HIDDEN


def make_sequence_projection(path: Path) -> Path:
    """x float [batch, seq, HIDDEN] -> MatMul -> Softmax: a float model with a dynamic sequence length, which the
    engines that need fixed shapes (ncnn, LiteRT) run at the size DIMS gives it."""
    weight = numpy_helper.from_array(np.random.default_rng(0).standard_normal((HIDDEN, HIDDEN)).astype(np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["m"], name="matmul"),
                               helper.make_node("Softmax", ["m"], ["y"], axis=-1, name="softmax")], "projection",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", HIDDEN])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", HIDDEN])],
                              [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path
