"""NAS-Bench-201's CIFAR-10 networks, built as ONNX graphs straight from the paper's definition (torch-free).

Dong & Yang, "NAS-Bench-201: Extending the Scope of Reproducible Neural Architecture Search", ICLR 2020. A
network is a 3x3 stem convolution to 16 channels, three stages of five copies of one cell (16, 32 and 64
channels) with a ResNet basic block of stride 2 between stages, then batch norm, ReLU, global average pooling
and a 10-class linear layer, on a 1x3x32x32 input (the cell itself: harness.zoo.nb201_cells). As in the reference
implementation, the network the published devices ran: `none` multiplies its input by zero, `avg_pool_3x3`
does not count the padding, and each convolution is ReLU, convolution, batch norm. Batch norm is folded into
the convolution before it, as the zoo's torch exports fold it; the one after the last stage follows a sum and
stays a BatchNormalization node. Built in milliseconds, so thousands of them need no torch export.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from harness.zoo.cache import keyed_path, write_model_atomically
from harness.zoo.nb201_cells import EDGES, cell_ops, cell_string
from harness.zoo.registry import ZooSpec

STEM_CHANNELS = 16
CELLS_PER_STAGE = 5
CLASSES = 10
INPUT_SHAPE = (1, 3, 32, 32)
OPSET = 18
SEED = 0
RECIPE_VERSION = 1  # bump when the graph changes, so stale cache entries are never reused


class _Graph:
    """Nodes and initializers of one network as it is built, with fresh names and seeded random weights."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[TensorProto] = []
        self.rng = np.random.default_rng(SEED)
        self._zero: str | None = None

    @property
    def zero(self) -> str:
        """The scalar that `none` multiplies by, made at its first use: an unused initializer draws a warning."""
        if self._zero is None:
            self._zero = self.constant("zero", np.zeros((), np.float32))
        return self._zero

    def name(self, prefix: str) -> str:
        return f"{prefix}_{len(self.nodes)}"

    def constant(self, prefix: str, value: np.ndarray) -> str:
        name = f"{prefix}_w{len(self.initializers)}"
        self.initializers.append(numpy_helper.from_array(value.astype(np.float32), name))
        return name

    def add(self, op: str, inputs: list[str], **attrs: int | list[int]) -> str:
        """A node with its attributes in name order, as onnx's make_node keyword arguments would give them."""
        out = self.name(op.lower())
        node = helper.make_node(op, inputs, [out], name=out)
        node.attribute.extend(helper.make_attribute(key, value) for key, value in sorted(attrs.items()))
        self.nodes.append(node)
        return out

    def conv(self, x: str, cin: int, cout: int, kernel: int, stride: int = 1, bias: bool = True) -> str:
        """A convolution with 'same' padding; He-scaled weights keep activations finite through 17 cells."""
        weight = self.rng.normal(0, (2 / (cin * kernel * kernel)) ** 0.5, (cout, cin, kernel, kernel))
        inputs = [x, self.constant("conv", weight)]
        if bias:  # the folded batch norm's shift
            inputs.append(self.constant("bias", self.rng.normal(0, 0.01, cout)))
        pad = kernel // 2
        return self.add("Conv", inputs, kernel_shape=[kernel, kernel], strides=[stride, stride], pads=[pad] * 4)

    def relu_conv_bn(self, x: str, cin: int, cout: int, kernel: int, stride: int = 1) -> str:
        return self.conv(self.add("Relu", [x]), cin, cout, kernel, stride)


def _edge(graph: _Graph, op: str, x: str, channels: int) -> str | None:
    """One edge's output, or None for an identity (the input tensor itself)."""
    if op == "skip_connect":
        return None
    if op == "none":
        return graph.add("Mul", [x, graph.zero])
    if op == "avg_pool_3x3":
        return graph.add("AveragePool", [x], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1],
                         count_include_pad=0)
    return graph.relu_conv_bn(x, channels, channels, 1 if op == "nor_conv_1x1" else 3)


def _cell(graph: _Graph, ops: tuple[str, ...], x: str, channels: int) -> str:
    nodes = [x]
    for node in (1, 2, 3):
        terms = [_edge(graph, op, nodes[j], channels) or nodes[j]
                 for op, (j, i) in zip(ops, EDGES, strict=True) if i == node]
        total = terms[0]
        for term in terms[1:]:
            total = graph.add("Add", [total, term])
        nodes.append(total)
    return nodes[3]


def _reduction(graph: _Graph, x: str, cin: int, cout: int) -> str:
    """ResNet basic block of stride 2: two ReLU-conv-BN units beside a 2x2 average pool and 1x1 convolution."""
    main = graph.relu_conv_bn(graph.relu_conv_bn(x, cin, cout, 3, 2), cout, cout, 3)
    shortcut = graph.conv(graph.add("AveragePool", [x], kernel_shape=[2, 2], strides=[2, 2]), cin, cout, 1,
                          bias=False)
    return graph.add("Add", [shortcut, main])


def build(ops: tuple[str, ...], name: str) -> onnx.ModelProto:
    """The CIFAR-10 network of one cell, input `input` (dynamic batch) and output `output` (10 logits)."""
    graph = _Graph()
    channels = STEM_CHANNELS
    x = graph.conv("input", INPUT_SHAPE[1], channels, 3)
    for stage in range(3):
        if stage:
            x = _reduction(graph, x, channels, channels * 2)
            channels *= 2
        for _ in range(CELLS_PER_STAGE):
            x = _cell(graph, ops, x, channels)
    rng = graph.rng
    norm = [graph.constant("bn", value) for value in (rng.uniform(0.5, 1.5, channels), rng.normal(0, 0.1, channels),
                                                       rng.normal(0, 0.1, channels), rng.uniform(0.5, 1.5, channels))]
    x = graph.add("Relu", [graph.add("BatchNormalization", [x, *norm])])
    x = graph.add("Flatten", [graph.add("GlobalAveragePool", [x])])
    weight = graph.constant("fc", rng.normal(0, channels**-0.5, (CLASSES, channels)))
    bias = graph.constant("fc_bias", np.zeros(CLASSES))
    graph.nodes.append(helper.make_node("Gemm", [x, weight, bias], ["output"], name="classifier", transB=1))
    inputs = [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", *INPUT_SHAPE[1:]])]
    outputs = [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", CLASSES])]
    model = helper.make_model(helper.make_graph(graph.nodes, name, inputs, outputs, graph.initializers),
                              opset_imports=[helper.make_opsetid("", OPSET)], producer_name="harness.zoo.nb201")
    model.doc_string = cell_string(ops)
    onnx.checker.check_model(model)
    return model


def export_onnx(spec: ZooSpec) -> Path:
    """The cached ONNX file of a NAS-Bench-201 zoo name, built on first use."""
    recipe = {"spec": spec.as_dict(), "recipe": RECIPE_VERSION, "opset": OPSET, "seed": SEED, "onnx": onnx.__version__,
              "numpy": np.__version__}
    path = keyed_path(spec.name, ".onnx", recipe)
    if not path.exists():
        model = build(cell_ops(int(spec.params["index"])), spec.name)
        write_model_atomically(path, lambda tmp: onnx.save(model, str(tmp)))
    return path
