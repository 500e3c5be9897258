"""Designed kernels at a graph's own configurations (`harness probe --for`): its convolutions and fully connected
layers, each measured alone in a probe graph, never the graph itself.

A table's regressors read a kernel from the designed and zoo kernels nearest it; a user's model whose convolutions
lie where neither sampled (a keyword spotter's 10×4 taps over 49×10 frames of MFCCs, a search space's own widths)
is read from kernels that run otherwise. nn-Meter and LitePred sample each kind's space densely, for hours; probing
the configurations a user's graphs (or a search space's exemplars) hold costs a probe graph of a few dozen kernels a
model, and every graph that shares them is then predicted from kernels measured where it runs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

from harness.kernels.designed import CONV, MAX_MACS, Kernel, macs, out_size
from harness.kernels.graph import CONV_TYPES, Graph


def _conv(node: dict) -> dict[str, int] | None:
    """A 2-D convolution's designed settings, or None where a designed convolution cannot stand for it (dilated,
    batched, shapes unknown, rows and columns at different strides). A padding that is not taps // 2 on each side is
    the one per side that makes the graph's output size (an asymmetric one, as TensorFlow's SAME pads, is taken as
    even)."""
    shapes = node["input_shapes"]
    x, weight = (shapes[0] if shapes else None), (shapes[1] if len(shapes) > 1 else None)
    out = node["output_shapes"][0] if node["output_shapes"] else None
    if (not x or not weight or not out or len(x) != 4 or len(weight) != 4 or len(out) != 4 or x[0] != 1
            or int(node.get("dilation", 1)) != 1
            or not all(isinstance(d, int) and d > 0 for d in (*x, *weight, *out))):
        return None
    (cin, h, w), (cout, per_group, kh, kw) = x[1:], weight
    stride = max(1, round(h / max(1, out[2])))
    settings = {"kernel": kh, "stride": stride, "groups": max(1, cin // per_group), "cin": cin, "cout": cout, "hw": h}
    if (w, kw) != (h, kh):
        settings |= {"w": w, "kw": kw}
    for axis, size, taps, made in (("ph", h, kh, out[2]), ("pw", w, kw, out[3])):
        if out_size(size, taps, stride) != made:  # padded otherwise than taps // 2 on each side
            settings[axis] = max(0, math.ceil(((made - 1) * stride + taps - size) / 2))
            if settings[axis] >= taps:  # no padding makes it at this stride
                return None
    return settings


def _dense(node: dict) -> tuple[str, dict[str, int]] | None:
    """A Gemm's or a MatMul's by a weight as a designed gemm or matmul: its rows, inputs and outputs."""
    shapes = node["input_shapes"]
    x, weight = (shapes[0] if shapes else None), (shapes[1] if len(shapes) > 1 else None)
    if not x or not weight or len(weight) != 2 or not node["weights"] or not all(
            isinstance(d, int) and d > 0 for d in (*x, *weight)):
        return None
    rows = math.prod(x[:-1])
    if node["op_type"] == "Gemm" and len(x) == 2:
        return "gemm", {"rows": rows, "cin": x[1], "cout": weight[0] if weight[1] == x[1] else weight[1]}
    if node["op_type"] == "MatMul" and weight[0] == x[-1]:
        return "matmul", {"rows": rows, "cin": x[-1], "cout": weight[1]}
    return None


def graph_configs(path: str | Path) -> list[tuple[str, tuple[tuple[str, int], ...]]]:
    """The (kind, configuration) of each convolution and fully connected layer of the graph at `path`, in node order,
    each once."""
    found: dict[tuple[str, tuple[tuple[str, int], ...]], None] = {}
    for node in Graph.load(path).nodes:
        kind_settings = ((CONV, conv) if node["op_type"] in CONV_TYPES and (conv := _conv(node)) else
                         _dense(node) if node["op_type"] in ("Gemm", "MatMul") else None)
        if kind_settings is not None:
            found[(kind_settings[0], tuple(sorted(kind_settings[1].items())))] = None
    return list(found)


def kernels_for(graphs: Mapping[str, str | Path], start: int) -> tuple[list[Kernel], dict[str, list[str]]]:
    """Designed kernels at the configurations of `graphs` (a name -> its ONNX file), each configuration once across
    them, named from k<start>; and each graph's kernels by name, for the table's provenance. A configuration over
    MAX_MACS is left out (it would make its probe graph run for seconds)."""
    kernels: dict[tuple[str, tuple[tuple[str, int], ...]], Kernel] = {}
    names: dict[str, list[str]] = {}
    for label, path in graphs.items():
        names[label] = []
        for kind, config in graph_configs(path):
            if macs(Kernel("", kind, config)) > MAX_MACS:
                continue
            if (kind, config) not in kernels:
                kernels[(kind, config)] = Kernel(f"k{start + len(kernels):04d}_{kind}", kind, config)
            names[label].append(kernels[(kind, config)].name)
    return list(kernels.values()), names
