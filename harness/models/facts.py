"""Static facts about an ONNX model, read from its graph after shape inference (onnx only, no runtime).

MACs are multiply-accumulates of one sample (symbolic dimensions such as the batch count as 1), counted
for the layers that dominate CNN, transformer and recurrent cost: convolutions, Gemm and MatMul (attention's batched
MatMuls of two activations included), RNN, GRU and LSTM layers (every step's products); elementwise ops, Softmax,
pooling and normalisation (LayerNormalization too) are left out, as in the published counts (MobileNetV1 1.0/224:
569M; ResNet-18: 1.82G). FLOPs = 2 x MACs.
A model with named dynamic dimensions (a sequence length, an image size) is counted at the sizes DIMS gives them:
they are fixed in the graph's inputs before shape inference, so every later shape follows.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import external_data_helper, helper

from harness.core.errors import ModelError
from harness.core.external_data import ExternalData, confine, data_files
from harness.models.shapes import inferred, static_shapes
from harness.models.token_inputs import input_values
from harness.models.work_kinds import WORK_FACTS, work_kind

Shape = list[int]
MIB = 2**20
# Nodes counted as layers: those that carry learned weights and do the arithmetic.
WEIGHTED_OPS = frozenset(
    {"Conv", "ConvInteger", "QLinearConv", "ConvTranspose", "Gemm", "MatMul", "MatMulInteger", "QLinearMatMul",
     "Einsum", "RNN", "GRU", "LSTM"}
)
_CONV_OPS = frozenset({"Conv", "ConvInteger", "QLinearConv"})
QUANTIZED_OPS = frozenset({"QuantizeLinear", "DequantizeLinear", "QLinearConv", "QLinearMatMul", "ConvInteger",
                           "MatMulInteger", "DynamicQuantizeLinear"})
"""ONNX op types of a quantized graph (QDQ, QOperator or dynamic): what makes it an int8 model, whatever its other
nodes are (harness.analysis.op_kinds makes a QLinearConv a Conv)."""
# Where the weight / second operand sits among a node's inputs (QLinear ops put scales in between).
_WEIGHT_INPUT = {"QLinearConv": 3, "QLinearMatMul": 3}


def _dims(value_info: onnx.ValueInfoProto) -> Shape | None:
    """Static dims of a tensor; a symbolic or unknown dim counts as 1 (one sample); None if rank unknown."""
    tensor_type = value_info.type.tensor_type
    if not tensor_type.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else 1 for d in tensor_type.shape.dim]


def _conv_macs(node: onnx.NodeProto, shapes: dict[str, Shape]) -> int:
    """Each output element costs (input channels per group) x kernel volume MACs; depthwise is groups = C."""
    weight = shapes.get(node.input[_WEIGHT_INPUT.get(node.op_type, 1)])
    out = shapes.get(node.output[0])
    if weight is None or out is None:
        return 0
    return math.prod(out) * math.prod(weight[1:])


def _conv_transpose_macs(node: onnx.NodeProto, shapes: dict[str, Shape]) -> int:
    """Each input element is scattered through (output channels per group) x kernel volume MACs."""
    x, weight = shapes.get(node.input[0]), shapes.get(node.input[1])
    if x is None or weight is None:
        return 0
    return math.prod(x) * math.prod(weight[1:])


def _recurrent_macs(node: onnx.NodeProto, shapes: dict[str, Shape]) -> int:
    """An RNN, GRU or LSTM: every step of the sequence multiplies the step's input by W and the last hidden state by R
    (W: directions × gates·hidden × input, R: directions × gates·hidden × hidden), for each sample."""
    x, w, r = (shapes.get(name) for name in node.input[:3])
    if x is None or w is None or r is None or len(x) < 2:
        return 0
    return x[0] * x[1] * (math.prod(w) + math.prod(r))


def _matmul_macs(node: onnx.NodeProto, shapes: dict[str, Shape]) -> int:
    """Output elements x the contracted dimension (the last dim of A), broadcast batch dims included."""
    a, out = shapes.get(node.input[0]), shapes.get(node.output[0])
    if a is None or out is None or not a:
        return 0
    return math.prod(out) * a[-1]


def _einsum_macs(node: onnx.NodeProto, shapes: dict[str, Shape]) -> int:
    """The product of every index's size, summed or kept (a MatMul written as an equation: MaxViT's attention); the
    dims an ellipsis stands for, broadcast across the inputs, count once."""
    equation = next((attr.s.decode() for attr in node.attribute if attr.name == "equation"), "")
    terms = equation.replace(" ", "").split("->")[0].split(",")
    inputs = [shapes.get(name) for name in node.input]
    if not equation or len(terms) != len(inputs):
        return 0
    sizes: dict[str, int] = {}
    spans: list[Shape] = []
    for term, shape in zip(terms, inputs, strict=True):
        if shape is None:
            return 0
        head, _, tail = term.partition("...")
        end = len(shape) - len(tail)
        spans.append(shape[len(head):end])
        for letter, size in zip(head + tail, [*shape[:len(head)], *shape[end:]], strict=False):
            sizes[letter] = max(sizes.get(letter, 1), size)
    width = max(len(span) for span in spans)
    broadcast = [max([1, *(span[k - width + len(span)] for span in spans if k - width + len(span) >= 0)])
                 for k in range(width)]
    return math.prod(sizes.values()) * math.prod(broadcast)


def _taps_inside(node: onnx.NodeProto, shapes: dict[str, Shape]) -> float:
    """The share of a convolution's kernel taps, over all its outputs, that read its input rather than its padding;
    1.0 for any other node. An engine's direct convolution skips the taps that land in the padding (onnxruntime's
    NCHWc kernels do), so a dilated convolution on a small map does a fraction of the MACs its shapes count: a
    960→256 3×3 convolution on a 14×14 map took 7.8 ms at dilation 1 and 1.3 ms at DeepLab's atrous rate 24, where
    only the centre tap lands inside."""
    if node.op_type not in _CONV_OPS:
        return 1.0
    x, out = shapes.get(node.input[0]), shapes.get(node.output[0])
    weight = shapes.get(node.input[_WEIGHT_INPUT.get(node.op_type, 1)])
    if not x or not out or not weight or not len(x) == len(out) == len(weight) > 2:
        return 1.0
    spatial = len(x) - 2
    ints = {attr.name: list(attr.ints) for attr in node.attribute if attr.ints}
    auto_pad = next((attr.s.decode() for attr in node.attribute if attr.name == "auto_pad"), "NOTSET")
    strides, dilations = ints.get("strides", [1] * spatial), ints.get("dilations", [1] * spatial)
    pads = ints.get("pads", [0] * 2 * spatial)
    share = 1.0
    for axis in range(spatial):
        size, taps, count = x[2 + axis], weight[2 + axis], out[2 + axis]
        begin = pads[axis]
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            total = max(0, (count - 1) * strides[axis] + (taps - 1) * dilations[axis] + 1 - size)
            begin = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
        read = (np.arange(count)[:, None] * strides[axis] - begin + np.arange(taps)[None, :] * dilations[axis])
        share *= float(np.mean((read >= 0) & (read < size)))
    return share


def _is_depthwise(node: onnx.NodeProto, shapes: dict[str, Shape]) -> bool:
    """A convolution whose groups equal its input channels (each channel filtered alone): the layer kind whose
    speed differs most between engines, since it does little arithmetic per byte it moves."""
    if node.op_type not in _CONV_OPS:
        return False
    group = next((attr.i for attr in node.attribute if attr.name == "group"), 1)
    x = shapes.get(node.input[0])
    return group > 1 and x is not None and len(x) > 1 and x[1] == group


def _perm(node: onnx.NodeProto, shapes: dict[str, Shape]) -> list[int]:
    """A Transpose's permutation (its input's axes reversed where it names none); [] for any other node."""
    if node.op_type != "Transpose":
        return []
    given = next((list(attr.ints) for attr in node.attribute if attr.name == "perm"), None)
    x = shapes.get(node.input[0])
    return given if given is not None else list(reversed(range(len(x)))) if x else []


def _gemm_macs(node: onnx.NodeProto, shapes: dict[str, Shape]) -> int:
    a, out = shapes.get(node.input[0]), shapes.get(node.output[0])
    if a is None or out is None or len(a) != 2:
        return 0
    trans_a = next((attr.i for attr in node.attribute if attr.name == "transA"), 0)
    return math.prod(out) * (a[0] if trans_a else a[1])


_MACS: dict[str, Callable[[onnx.NodeProto, dict[str, Shape]], int]] = {
    "Conv": _conv_macs,
    "ConvInteger": _conv_macs,
    "QLinearConv": _conv_macs,
    "ConvTranspose": _conv_transpose_macs,
    "Gemm": _gemm_macs,
    "MatMul": _matmul_macs,
    "MatMulInteger": _matmul_macs,
    "QLinearMatMul": _matmul_macs,
    "Einsum": _einsum_macs,
    "RNN": _recurrent_macs,
    "GRU": _recurrent_macs,
    "LSTM": _recurrent_macs,
}


def external_data(model: onnx.ModelProto) -> list[tuple[str, str]]:
    """(tensor name, location) of every tensor kept outside the file: initializers of the graph and of its subgraphs
    (If/Loop bodies) and the tensors of node attributes (Constant), as onnx's own loader walks them."""
    return [(tensor.name, external_data_helper.ExternalDataInfo(tensor).location)
            for tensor in external_data_helper._get_all_tensors(model)
            if external_data_helper.uses_external_data(tensor)]


def fix_dims(graph: onnx.GraphProto, dims: Mapping[str, int]) -> None:
    """Every input dimension named in `dims` (a dim_param such as `seq`) set to its size, in place. An exporter's
    intermediate shapes (symbolic expressions of those dims, which shape inference keeps rather than recomputes) and
    the outputs' symbolic dims are dropped, so inference computes them at the sizes."""
    for info in graph.input:
        for dim in info.type.tensor_type.shape.dim:
            if dim.HasField("dim_param") and dim.dim_param in dims:
                dim.dim_value = dims[dim.dim_param]
    del graph.value_info[:]
    for info in graph.output:
        for dim in info.type.tensor_type.shape.dim:
            if dim.HasField("dim_param"):
                dim.Clear()


def _load(path: Path, dims: Mapping[str, int] | None = None) -> tuple[onnx.ModelProto, ExternalData]:
    """The graph, shapes inferred (with the named dimensions of `dims` fixed to their sizes first), without the
    external data, and the (tensor, location) of each external-data file, every one checked to be a file in the
    model's folder (harness.core.external_data)."""
    if not path.is_file():
        raise ModelError(f"model file {path} does not exist; give the path of an .onnx file or a zoo name")
    try:
        model = onnx.load(str(path), load_external_data=False)
        locations = external_data(model)
    except Exception as err:  # onnx raises DecodeError, ValueError, ... for a file that is not ONNX
        raise ModelError(f"{path} is not a readable ONNX model ({type(err).__name__}); re-export it") from err
    external = confine(str(path), locations)
    if dims:
        fix_dims(model.graph, dims)
    try:
        return inferred(model), external
    except Exception as err:
        raise ModelError(f"{path}: ONNX shape inference failed ({err}); check the model with onnx.checker") from err


def _shapes(graph: onnx.GraphProto) -> dict[str, Shape]:
    shapes = {init.name: list(init.dims) for init in graph.initializer}
    for info in (*graph.input, *graph.value_info, *graph.output):
        dims = _dims(info)
        if dims is not None:
            shapes.setdefault(info.name, dims)
    return shapes


def _written_bytes(graph: onnx.GraphProto) -> int:
    """Bytes of the tensors the nodes write for one sample (symbolic dims as 1), by their inferred shapes and
    element types: the activations one inference streams through memory, a proxy for its memory traffic.
    Tensors whose shape or type inference could not tell are left out."""
    sizes = {}
    for info in (*graph.value_info, *graph.output):
        dims, elem_type = _dims(info), info.type.tensor_type.elem_type
        if dims is not None and elem_type:
            sizes[info.name] = math.prod(dims) * helper.tensor_dtype_to_np_dtype(elem_type).itemsize
    return sum(sizes.get(output, 0) for node in graph.node for output in node.output)


def _file_size(path: Path, external: ExternalData) -> int:
    """The .onnx file plus the external-data files it points to."""
    return path.stat().st_size + sum(Path(name).stat().st_size for name in data_files(str(path), external))


def _inputs(graph: onnx.GraphProto) -> list[dict[str, Any]]:
    """Graph inputs that are not initializers: the data a caller feeds, each with the values it accepts where the
    graph tells them (harness.models.token_inputs)."""
    weights = {init.name for init in graph.initializer}
    values = input_values(graph)
    inputs = []
    for info in graph.input:
        if info.name in weights:
            continue
        tensor_type = info.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tensor_type.shape.dim]
        dtype = helper.tensor_dtype_to_np_dtype(tensor_type.elem_type).name if tensor_type.elem_type else None
        inputs.append({"name": info.name, "shape": shape, "dtype": dtype,
                       **({"values": values[info.name]} if info.name in values else {})})
    return inputs


def _work(graph: onnx.GraphProto, shapes: dict[str, Shape]) -> dict[str, int]:
    """Per-kind work of one sample (harness.models.work_kinds): MACs of the weighted nodes as onnx_facts counts
    them, output elements of the others (a node whose output shape inference could not tell counts none)."""
    work = dict.fromkeys(WORK_FACTS, 0)
    for node in graph.node:
        weighted = node.op_type in WEIGHTED_OPS
        if weighted:
            weight = shapes.get(node.input[_WEIGHT_INPUT.get(node.op_type, 1)]) if len(node.input) > 1 else None
            kernel = math.prod(weight[2:]) if node.op_type in _CONV_OPS and weight else 1
            amount = _MACS[node.op_type](node, shapes)
        else:
            out = shapes.get(node.output[0]) if node.output else None
            kernel, amount = 1, math.prod(out) if out else 0
        work[work_kind(node.op_type, weighted, _is_depthwise(node, shapes), kernel)] += amount
    return work


def onnx_facts(path: str | Path, dims: Mapping[str, int] | None = None) -> dict[str, Any]:
    """size_mib, params, macs, flops (= 2 x macs), activation_mib, layers, nodes, inputs, opset and the work per
    operator kind (WORK_FACTS) of an ONNX model, and its external_data: [tensor, location] per file its tensors'
    data is kept in (harness.core.external_data).

    params counts the elements of every initializer (weights and biases as exported, BatchNorm usually
    folded in); activation_mib the tensors the nodes write (see _written_bytes); layers counts the weighted
    nodes (WEIGHTED_OPS). `dims` sizes named dynamic dimensions (DIMS) before shapes are inferred."""
    path = Path(path)
    model, external = _load(path, dims)
    graph = model.graph
    shapes = _shapes(graph)
    weighted = [node for node in graph.node if node.op_type in WEIGHTED_OPS]
    macs = sum(_MACS[node.op_type](node, shapes) for node in weighted)
    opset = next((entry.version for entry in model.opset_import if entry.domain in ("", "ai.onnx")), None)
    return {
        "size_mib": _file_size(path, external) / MIB,
        "params": sum(math.prod(init.dims) for init in graph.initializer),
        "macs": macs,
        "flops": 2 * macs,
        "activation_mib": _written_bytes(graph) / MIB,
        "layers": len(weighted),
        "nodes": len(graph.node),
        "inputs": _inputs(graph),
        "opset": opset,
        **_work(graph, shapes),
        "external_data": [list(entry) for entry in external],
    }


def node_facts(path: str | Path, dims: Mapping[str, int] | None = None) -> list[dict[str, Any]]:
    """One entry per graph node: index, name, op type, input/output names and shapes, MACs (as onnx_facts
    counts them, 0 for unweighted ops), the bytes of the initializers it reads (its parameters), whether it is a
    depthwise convolution, a convolution's share of taps inside its input (`taps_inside`) and largest dilation
    (`dilation`, 1 for any other node), a Transpose's `perm`,
    with the named dimensions of `dims` at their sizes; `weights` lists its inputs that are initializers;
    `static_inputs`, whether every input's dims are known before the graph runs (an engine folds a Shape node of such
    an input into a constant)."""
    model, _ = _load(Path(path), dims)
    graph = model.graph
    shapes = _shapes(graph)
    static = {init.name for init in graph.initializer} | set(static_shapes(model))
    weight_bytes = {init.name: math.prod(init.dims) * helper.tensor_dtype_to_np_dtype(init.data_type).itemsize
                    for init in graph.initializer}
    return [{
        "index": index, "name": node.name, "op_type": node.op_type,
        "inputs": list(node.input), "outputs": list(node.output),
        "input_shapes": [shapes.get(name) for name in node.input if name],
        "output_shapes": [shapes.get(name) for name in node.output if name],
        "macs": _MACS[node.op_type](node, shapes) if node.op_type in _MACS else 0,
        "param_bytes": sum(weight_bytes.get(name, 0) for name in node.input),
        "weights": [name for name in node.input if name in weight_bytes],
        "depthwise": _is_depthwise(node, shapes),
        "taps_inside": _taps_inside(node, shapes),
        "dilation": max((max(attr.ints, default=1) for attr in node.attribute if attr.name == "dilations"), default=1),
        "perm": _perm(node, shapes),
        "static_inputs": all(name in static for name in node.input if name),
    } for index, node in enumerate(graph.node)]
