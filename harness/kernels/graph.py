"""An ONNX graph as kernel detection walks it: its nodes in execution order (harness.models.facts.node_facts: shapes,
MACs, parameter bytes), who produces and who consumes each tensor, and each convolution's configuration read from
its shapes. One place for it, so the rules learned from a profile and the rules applied to a new graph see the graph
the same way."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from harness.analysis.op_kinds import DEPTHWISE, harness_kind
from harness.models.facts import node_facts

GROUPED = "GroupedConv"
"""A convolution with 1 < groups < its input channels (RegNet, ShuffleNet V1): neither dense nor depthwise."""
INNER_TRANSPOSE = "InnerTranspose"
"""A Transpose that moves its input's innermost axis (MaxViT's window partitions, an NCHW to NHWC conversion): it
gathers one element at a time, where a Transpose that keeps the innermost axis in place (ShuffleNet's channel
shuffle, attention's head split) copies whole rows. On this host at CPUS=1 MaxViT-T's 40 partitions ran a median
3.5 ns an element (0.7 ms for 0.8 MB), 14 to 24 times its own row-copying Transposes of the same tensors
(docs/kernels.md)."""
CONV_TYPES = frozenset({"Conv", "ConvInteger", "QLinearConv", "FusedConv"})
OTHER_RANK_CONV = {1: "Conv1D", 3: "Conv3D"}
"""The kinds of a 1-D and a 3-D convolution (an audio or sensor network's, a video network's), any grouping: an
engine runs them apart from 2-D ones (onnxruntime's blocked NCHWc kernels take 2-D ones only; the others run as a
matrix product of their unfolded input), so no 2-D row tells their time: with theirs read as 2-D ones, two audio
networks of 1-D convolutions (M5, MatchboxNet) came out 21–23% under their time, R3D-18 19% (docs/kernels.md)."""
SCALAR_BYTES = 16
"""The weights an element-wise node may hold: Clip's min and max, a Mul's constant (four float32 scalars)."""
BROADCAST = " (broadcast)"
"""The mark Graph.layout_key adds to the op type of a node that broadcasts an input over the spatial axes."""


@dataclass(frozen=True)
class Graph:
    """The nodes (node_facts entries, execution order) and the tensors' producers and consumers."""

    nodes: list[dict[str, Any]]
    producer: dict[str, int]  # tensor -> index of the node that writes it
    consumers: dict[str, list[int]]  # tensor -> indices of the nodes that read it
    outputs: frozenset[str]  # the graph's outputs: tensors nothing inside the graph reads

    @classmethod
    def load(cls, path: str | Path, dims: Mapping[str, int] | None = None) -> Graph:
        """The graph at `path` (shape inference runs once per unchanged file and dims; the Graph is shared, so
        treat it as read-only)."""
        resolved = Path(path).resolve()
        mtime = resolved.stat().st_mtime if resolved.is_file() else 0.0
        return _load(str(resolved), mtime, tuple(sorted((dims or {}).items())))

    @classmethod
    def of(cls, nodes: list[dict[str, Any]]) -> Graph:
        producer = {out: node["index"] for node in nodes for out in node["outputs"] if out}
        consumers: dict[str, list[int]] = {}
        for node in nodes:
            for name in node["inputs"]:
                if name:
                    consumers.setdefault(name, []).append(node["index"])
        outputs = frozenset(out for node in nodes for out in node["outputs"] if out and out not in consumers)
        return cls(nodes, producer, consumers, outputs)

    def producers(self, index: int) -> list[int]:
        """The nodes whose outputs this node reads (activations only: initializers have no producer)."""
        return [self.producer[name] for name in self.nodes[index]["inputs"] if name in self.producer]

    def activation_inputs(self, index: int) -> list[list[int]]:
        """Shapes of the node's activations: the inputs another node writes, and its first input where the caller
        feeds it (a weight or a constant has no producer and is counted in param_bytes instead)."""
        node = self.nodes[index]
        names = [name for name in node["inputs"] if name]
        return [shape for position, (name, shape) in enumerate(zip(names, node["input_shapes"], strict=False))
                if shape is not None and (name in self.producer or position == 0)]

    def layout_key(self, index: int) -> str:
        """The node's op type, marked `(broadcast)` where an activation input is broadcast over the output's spatial
        axes (a squeeze-excite's 1×C×1×1 scale): an engine's blocked layout may take a Mul of two same-shaped maps
        (EfficientNet's SiLU) and not that one (harness.kernels.rules.Rules.following)."""
        node = self.nodes[index]
        out: list[int] = (node["output_shapes"][0] if node["output_shapes"] else None) or []
        broadcast = bool(out) and any(len(shape) != len(out) or any(a == 1 < b for a, b in zip(shape[2:], out[2:],
                                                                                                 strict=False))
                                      for shape in self.activation_inputs(index))
        return f"{node['op_type']}{BROADCAST}" if broadcast else str(node["op_type"])

    def reader(self, index: int) -> int | None:
        """The one node that reads an element-wise node's output, where it also reads that node's input (the Mul of
        x·σ(x)), else None."""
        outputs = [out for out in self.nodes[index]["outputs"] if out]
        readers = {consumer for out in outputs for consumer in self.consumers.get(out, [])}
        if len(outputs) != 1 or len(readers) != 1 or outputs[0] in self.outputs or not self.elementwise(index):
            return None
        [reader] = readers
        return reader if set(self.nodes[index]["inputs"]) & set(self.nodes[reader]["inputs"]) else None

    def elementwise(self, index: int) -> bool:
        """Whether the node maps one activation to one of the same shape with no weights beyond a few scalars (an
        activation: Relu, Clip, HardSwish, Sigmoid, a Mul by a constant): what lets a fusion seen for some such ops
        stand for one never profiled (harness.kernels.rules.ELEMENTWISE)."""
        node = self.nodes[index]
        ins = self.activation_inputs(index)
        return (len(ins) == 1 and len(node["output_shapes"]) == 1 and node["output_shapes"][0] == ins[0]
                and int(node["param_bytes"] or 0) <= SCALAR_BYTES)


@lru_cache(maxsize=256)
def _load(path: str, mtime: float, dims: tuple[tuple[str, int], ...]) -> Graph:
    return Graph.of(folded(node_facts(path, dict(dims))))


def folded(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The nodes less those that compute constants, folded into the weights of the nodes that read them, as an engine
    folds constants before it runs a kernel: a node that reads only weights (an Identity of an initializer, which
    the TorchScript exporter writes for every folded batch norm: otherwise a kernel, and a layout conversion of a
    weight), a Constant, a Shape of a tensor whose dims are known before the graph runs, and what computes from those
    alone (the Gather, Div and Mul that size a TorchScript export's channel split)."""
    constant: dict[str, int] = {}  # a folded node's output -> its bytes
    kept: list[dict[str, Any]] = []
    for node in nodes:
        names = [name for name in node["inputs"] if name]
        shape_of_static = node["op_type"] == "Shape" and node.get("static_inputs", False)
        if not names or shape_of_static or all(name in constant or name in node["weights"] for name in names):
            size = node["param_bytes"] + sum(constant.get(name, 0) for name in names)
            constant.update((out, size) for out in node["outputs"] if out)
            continue
        extra = sum(constant.get(name, 0) for name in names)
        kept.append({**node, "index": len(kept), "param_bytes": node["param_bytes"] + extra,
                     "weights": [*node["weights"], *(name for name in names if name in constant)]})
    return kept


def spatial_rank(node: dict[str, Any]) -> int:
    """The spatial axes of a node's first input (2 for NCHW); 0 where its shape is unknown."""
    shapes = node["input_shapes"]
    return max(0, len(shapes[0]) - 2) if shapes and shapes[0] else 0


def conv_config(node: dict[str, Any]) -> dict[str, float]:
    """A convolution's configuration from its shapes: input and output channels, kernel size, stride, groups and output
    resolution (NCHW: the first spatial axis's, square in every 2-D network the harness has met; a 1-D or 3-D
    convolution's kernel is its taps, its stride its input positions over its output's, and its resolution its
    output positions: the products of its axes')."""
    shapes = node["input_shapes"]
    x, weight, out = (shapes[0] if shapes else None), (shapes[1] if len(shapes) > 1 else None), \
        (node["output_shapes"][0] if node["output_shapes"] else None)
    if not x or not weight or not out or len(x) < 3 or len(out) < 3 or not weight[1]:
        return {}
    axes = slice(2, 3) if len(x) == 4 else slice(2, None)
    positions = math.prod(out[axes])
    return {"cin": x[1], "cout": out[1], "kernel": math.prod(weight[axes]) if len(weight) > 2 else 1,
            "stride": max(1, round(math.prod(x[axes]) / positions)) if positions else 1,
            "groups": max(1, x[1] // weight[1]), "resolution": positions}


def node_kind(node: dict[str, Any]) -> str:
    """The harness's kind of a node (harness.analysis.op_kinds), grouped convolutions apart from dense and depthwise,
    1-D and 3-D ones kinds of their own (OTHER_RANK_CONV)."""
    kind = harness_kind(node["op_type"], bool(node.get("depthwise")))
    if kind in ("Conv", DEPTHWISE) and spatial_rank(node) in OTHER_RANK_CONV:
        return OTHER_RANK_CONV[spatial_rank(node)]
    if kind == "Conv":
        groups = conv_config(node).get("groups", 1)
        return GROUPED if groups > 1 else kind
    if node["op_type"] == "Transpose":
        axes, run = transpose_layout(node)
        return INNER_TRANSPOSE if axes > 1 and run == 1 else kind
    return kind


def transpose_layout(node: dict[str, Any]) -> tuple[int, int]:
    """(axes, run) of a Transpose: the axes it permutes once its unit axes are dropped, the input axes it keeps side by
    side in order merged, and the outer axes it leaves in place set aside (NCHW to NHWC permutes 2: C and H·W; so
    does attention's keys transposed, windows × tokens × channels to windows × channels × tokens), and the elements it
    copies in one run: the innermost merged axis where it stays innermost, else 1. (0, 0) for any other node, or a
    Transpose of unknown shape."""
    shapes = node.get("input_shapes") or [None]
    shape, perm = shapes[0], node.get("perm") or []
    if node["op_type"] != "Transpose" or not shape or len(perm) != len(shape):
        return 0, 0
    kept = [axis for axis in perm if shape[axis] != 1]
    groups: list[list[int]] = []
    for axis in kept:
        if groups and axis == groups[-1][-1] + 1:
            groups[-1].append(axis)
        else:
            groups.append([axis])
    in_place = sorted(groups)
    outer = next((i for i, group in enumerate(groups) if group != in_place[i]), len(groups))
    run = math.prod(shape[axis] for axis in groups[-1]) if groups and groups[-1] == in_place[-1] else 1
    return len(groups) - outer, run


def elements(shape: list[int] | None) -> int:
    return math.prod(shape) if shape else 0


@dataclass
class Kernel:
    """One kernel the engine runs: its kind, the ONNX nodes it covers (anchor first; none for a kernel the engine
    inserted), the tensor shape an inserted kernel converts, and its features."""

    kind: str
    nodes: list[int]
    shape: list[int] | None = None
    features: dict[str, float] = field(default_factory=dict)

    @property
    def anchor(self) -> int | None:
        return self.nodes[0] if self.nodes else None


__all__ = ["DEPTHWISE", "GROUPED", "INNER_TRANSPOSE", "OTHER_RANK_CONV", "Graph", "Kernel", "conv_config", "elements",
           "node_kind", "spatial_rank", "transpose_layout"]
