"""A kernel's configuration as numbers a regressor reads: MACs, bytes moved (activations in and out, weights),
arithmetic intensity, for a convolution its channels, kernel size, stride, groups and output resolution, and whether
the kernel runs in the engine's blocked layout (onnxruntime's NCHWc, as harness.kernels.detect decides it: set by
detect and harness.kernels.training.join_kernels, 0 where no layout was decided).

Activations count 4 bytes an element (float32, the precision kernels are probed at); weights their stored bytes
(harness.models.facts.node_facts). A kernel the engine inserted (a layout conversion) has only the tensor it
converts: read once, written once."""

from __future__ import annotations

import math
from typing import Any

from harness.kernels.graph import CONV_TYPES, Graph, Kernel, conv_config, elements, transpose_layout

ACTIVATION_BYTES = 4
FEATURES = ("macs", "bytes", "in_bytes", "out_bytes", "weight_bytes", "intensity", "cin", "cout", "kernel", "stride",
            "groups", "resolution", "inputs", "fused", "blocked", "activation_pass", "axes", "run")
"""Every kernel has every feature (0 where it does not apply), so one regressor can pool kinds. `blocked`: a
depthwise convolution whose channels are not a multiple of 4 runs in the plain layout, about 3.5 times slower a MAC
than a blocked one of the same size (CPUS=1 on this host), which no size feature tells apart. `activation_pass`:
whether the kernel's fused activation runs as a pass of its own over the output (any fused node not in INLINE_FUSED).
`axes` and `run`: a Transpose's permuted axes and the elements it copies in one run (harness.kernels.graph.
transpose_layout): an NCHW to NHWC conversion (2 axes) has a fast path in an engine such as onnxruntime, a window
partition (5 axes) gathers element by element, and rows of 32 elements copy slower a byte than rows of 784."""
TAPS_INSIDE = "taps_inside"
"""Not a feature a regressor reads: the share of a dilated dense 2-D convolution's taps inside its input
(dilated_dense), 1 for any other kernel, which set_layout applies to a blocked kernel's MACs."""
INLINE_FUSED = frozenset({"Relu", "Add", "Sum"})
"""Fused nodes an engine applies inside the kernel's own loop: onnxruntime's MLAS kernels take a Relu and a residual
sum as flags (RELU_ACTIVATION, ACCUMULATE_OUTPUT); any other fused activation (Clip, HardSigmoid, HardSwish, Sigmoid,
LeakyRelu) goes through MLAS_CONV_KERNEL_FLAG_OTHER_ACTIVATION, a second pass over each output block. On an AVX-512
host at CPUS=1 the same depthwise configuration ran 1.46 times slower with a fused Clip than with a fused Relu (10
configurations met with both), a dense convolution 1.11 times (Clip) and 1.27 times (HardSwish); no other feature
tells them apart (docs/kernels.md)."""
METADATA_READERS = frozenset({"Shape", "Size"})
"""Nodes that read only their input's dims, not its elements: a dynamic-batch export's ShuffleNetV2 has 77 Shape
nodes, each of a feature map of 0.55 MB, which counted as read put the pooled regressor at 5.6 µs a node (0.43 ms of a
3.4 ms model) where the engine spent about nothing."""


def _shape_bytes(shapes: list[list[int]]) -> int:
    return sum(elements(shape) for shape in shapes) * ACTIVATION_BYTES


def with_features(graph: Graph, kernel: Kernel) -> Kernel:
    """The kernel with its features: a covered node's inputs that another covered node wrote stay inside the kernel;
    its outputs that another covered node reads never leave it."""
    if not kernel.nodes:
        kernel.features = inserted_features(kernel.shape)
        return kernel
    covered = set(kernel.nodes)
    inside = {out for index in kernel.nodes for out in graph.nodes[index]["outputs"]
              if out and set(graph.consumers.get(out, [])) <= covered and out not in graph.outputs}
    ins, outs, weight_bytes, macs = [], [], 0, 0
    for index in kernel.nodes:
        node = graph.nodes[index]
        names = [name for name in node["inputs"] if name]
        for position, (name, shape) in enumerate(zip(names, node["input_shapes"], strict=False)):
            produced_inside = name in graph.producer and graph.producer[name] in covered
            if (shape is not None and not produced_inside and (name in graph.producer or position == 0)
                    and node["op_type"] not in METADATA_READERS):
                ins.append(shape)
        outs += [shape for name, shape in zip([n for n in node["outputs"] if n], node["output_shapes"], strict=False)
                 if shape is not None and name not in inside]
        weight_bytes += int(node["param_bytes"] or 0)
        macs += int(node["macs"] or 0)
    anchor = graph.nodes[kernel.nodes[0]]
    in_bytes, out_bytes = _shape_bytes(ins), _shape_bytes(outs)
    moved = in_bytes + out_bytes + weight_bytes
    conv = conv_config(anchor) if anchor["op_type"] in CONV_TYPES else {}
    out_shape = outs[0] if outs else None
    axes, run = transpose_layout(anchor)
    kernel.features = {
        "macs": macs, "bytes": moved, "in_bytes": in_bytes, "out_bytes": out_bytes, "weight_bytes": weight_bytes,
        "intensity": macs / moved if moved else 0.0,
        "cin": conv.get("cin", ins[0][1] if ins and len(ins[0]) > 1 else 0),
        "cout": conv.get("cout", out_shape[1] if out_shape and len(out_shape) > 1 else 0),
        "kernel": conv.get("kernel", 0), "stride": conv.get("stride", 0), "groups": conv.get("groups", 0),
        "resolution": conv.get("resolution", out_shape[2] if out_shape and len(out_shape) > 2 else 0),
        "inputs": len(ins), "fused": len(kernel.nodes) - 1,
        "activation_pass": float(any(graph.nodes[index]["op_type"] not in INLINE_FUSED for index in kernel.nodes[1:])),
        "axes": axes, "run": run, TAPS_INSIDE: anchor.get("taps_inside", 1.0) if dilated_dense(anchor) else 1.0,
    }
    return kernel


def skips_padding(node: dict[str, Any]) -> bool:
    """A 2-D convolution of one group: run blocked, the engine's direct kernel (onnxruntime's NCHWc) skips its taps
    that land in the padding (node_facts' `taps_inside` is the share it computes; dilated_dense, where it counts).
    The others compute every tap (benchmarks/padding_taps.py): at a dilation that leaves a ninth of the taps inside, a
    dense 960→256 3×3 convolution on a 14×14 map took 0.16 of its time, a depthwise one on 28×28 0.98, a grouped one
    0.99; 1-D and 3-D ones, and plain ones, run as a matrix product of their unfolded input, padding included."""
    shapes = node["input_shapes"]
    return (node["op_type"] in CONV_TYPES and bool(shapes) and shapes[0] is not None and len(shapes[0]) == 4
            and conv_config(node).get("groups", 0) == 1)


def dilated_dense(node: dict[str, Any]) -> bool:
    """A dilated convolution whose padding the engine skips (skips_padding): most of its taps can land in the
    padding, which no feature shows (DeepLabV3's atrous rates 12 to 36 on a 14×14 map). An undilated one's padding is
    a border of a tap or two, whose share follows its map's size, a feature the regressors read: counting it too moved
    the own models' large ResNets 2–4% up (docs/kernels.md)."""
    return skips_padding(node) and int(node.get("dilation", 1)) > 1


def reads_graph_input(graph: Graph, kernel: Kernel) -> bool:
    """Whether the kernel's anchor reads a tensor no node writes: the graph's input, which (with the buffer the first
    kernel writes) was last touched an inference ago, so it is still in the cache only in a model that touches
    little in between."""
    if not kernel.nodes:
        return False
    inputs = [name for name in graph.nodes[kernel.nodes[0]]["inputs"] if name]
    return bool(inputs) and inputs[0] not in graph.producer


def set_layout(features: dict[str, float], blocked: bool, block: int) -> None:
    """The kernel's layout as the feature `blocked`, and a blocked kernel's MACs and activation bytes at its channels
    padded up to the block, as the engine computes and moves them (a convolution reading fewer input channels than a
    block reads them plain, unpadded): at block 16 (onnxruntime on an AVX-512 host) a 24-channel output is computed
    as 32 channels. A blocked dilated dense 2-D convolution's MACs are of its taps inside its input
    (dilated_dense)."""
    features["blocked"] = float(blocked)
    if not blocked or block <= 0:
        return
    def grown(channels: float) -> float:
        return math.ceil(channels / block) * block / channels if channels > 0 else 1.0
    cin, cout = features["cin"], features["cout"]
    depthwise = features["groups"] > 1 and features["groups"] == cin
    grow_out = grown(cout)
    grow_in = grow_out if depthwise else grown(cin) if cin >= block else 1.0
    convolution = features["kernel"] > 0
    features["macs"] *= grow_out * (grow_in if convolution and not depthwise else 1.0) * features.get(TAPS_INSIDE, 1.0)
    features["in_bytes"] *= grow_in
    features["out_bytes"] *= grow_out
    features["bytes"] = features["in_bytes"] + features["out_bytes"] + features["weight_bytes"]
    features["intensity"] = features["macs"] / features["bytes"] if features["bytes"] else 0.0


def inserted_features(shape: list[int] | None) -> dict[str, float]:
    """A layout conversion of one tensor: its bytes read and written, its channels and resolution."""
    size = elements(shape) * ACTIVATION_BYTES
    features = dict.fromkeys(FEATURES, 0.0)
    features.update(bytes=2 * size, in_bytes=size, out_bytes=size, inputs=1,
                    cin=shape[1] if shape and len(shape) > 1 else 0, cout=shape[1] if shape and len(shape) > 1 else 0,
                    resolution=shape[2] if shape and len(shape) > 2 else 0)
    return features


def shape_of(text: str) -> list[int] | None:
    """A per-op table's shape text (`1x24x28x28`, the first of several) as a list; None where it is not one."""
    first = str(text or "").split(" ")[0]
    try:
        return [int(part) for part in first.split("x")] if first else None
    except ValueError:
        return None


def vector(features: dict[str, float]) -> list[float]:
    """log(1 + value) of each feature in FEATURES' order: kernels' costs span five orders of magnitude."""
    return [math.log1p(max(0.0, float(features.get(name, 0.0)))) for name in FEATURES]
