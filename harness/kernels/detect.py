"""The kernels an engine runs for an ONNX graph, by the fusion rules learned from its own per-op profiles
(harness.kernels.rules): which nodes a kernel absorbs into its anchor (a Conv its Relu, Clip, Add), which nodes the
engine drops, and which layout conversions it inserts between kernels of a blocked layout (onnxruntime's NCHWc
ReorderInput / ReorderOutput) and the others.

`kernels_of(model_path, engine)` gives one Kernel per engine per-op row the engine would write, each with its kind
(harness.analysis.op_kinds names, grouped convolutions apart), the ONNX nodes it covers and its configuration
features (harness.kernels.features)."""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from harness.core.errors import ConfigError
from harness.kernels.features import set_layout, with_features
from harness.kernels.graph import Graph, Kernel, conv_config, node_kind
from harness.kernels.rules import ELEMENTWISE, IDENTICAL, READ_BY, Rules, conv_key, load_rules

MIN_RATE = 0.5
"""A rule applies where the profiles showed it at least this often among the times it could have."""


def absorbs(rules: Rules, op_type: str, anchor_type: str, sole: bool, inside: bool, elementwise: bool = False) -> bool:
    """Whether the rules absorb the node into the kernel; an element-wise node whose op type they never saw in this
    context goes by every element-wise node's count there (ELEMENTWISE)."""
    entry = rules.absorb.get((op_type, anchor_type, sole, inside))
    if entry is None and elementwise:
        entry = rules.absorb.get((ELEMENTWISE, anchor_type, sole, inside))
    return entry is not None and entry["absorbed"] / (entry["absorbed"] + entry["kept"]) >= MIN_RATE


def group_nodes(graph: Graph, rules: Rules) -> tuple[list[Kernel], dict[int, int]]:
    """The graph's nodes grouped into kernels by the absorption rules, in execution order, and each node's kernel
    (a dropped node has none)."""
    kernels: list[Kernel] = []
    ends: list[int] = []  # the node whose output each kernel writes
    owner: dict[int, int] = {}
    twins: dict[tuple[str, tuple[str, ...]], int] = {}
    waiting: dict[int, list[int]] = {}  # a reader -> the nodes that run inside its kernel (READ_BY)

    def take(kernel: int, index: int) -> None:
        for member in [index, *waiting.pop(index, [])]:
            kernels[kernel].nodes.append(member)
            owner[member] = kernel

    for node in graph.nodes:
        index = node["index"]
        twin = twins.setdefault((node["op_type"], tuple(node["inputs"])), index)
        if twin != index and twin in owner and absorbs(rules, node["op_type"], IDENTICAL, False, False):
            take(owner[twin], index)
            continue
        reader = graph.reader(index)
        if reader is not None and absorbs(rules, node["op_type"], READ_BY + graph.nodes[reader]["op_type"], True, True):
            waiting.setdefault(reader, []).append(index)
            continue
        producers = sorted(set(graph.producers(index)) - set(waiting.get(index, [])), reverse=True)
        for producer in producers:
            kernel = owner.get(producer)
            if kernel is None or ends[kernel] != producer:
                continue
            sole = all(len(graph.consumers.get(out, [])) == 1 for out in graph.nodes[producer]["outputs"] if out)
            anchor_type = graph.nodes[kernels[kernel].nodes[0]]["op_type"]
            inside = all(owner.get(p) == kernel for p in producers)
            if absorbs(rules, node["op_type"], anchor_type, sole, inside, graph.elementwise(index)):
                take(kernel, index)
                ends[kernel] = index
                break
        else:
            if not producers and rules.drop_rate(node["op_type"]) >= MIN_RATE:
                continue
            kernels.append(Kernel(node_kind(node), []))
            ends.append(index)
            take(len(kernels) - 1, index)
    return kernels, owner


def _channels(shape: list[int] | None) -> int | None:
    """A 4-D (NCHW) tensor's channels; None for any other: a blocked layout (onnxruntime's NCHWc) is of 2-D maps."""
    return shape[1] if shape and len(shape) == 4 else None


def blocked_layouts(graph: Graph, rules: Rules, kernels: list[Kernel], owner: dict[int, int]) -> list[bool]:
    """Whether each kernel runs in the engine's blocked layout: a convolution whose configuration (grouping, channel
    alignments) ran blocked at least as often as plain in the profiles, another anchor of a blocked type whose
    channels fit the block, or an op of a layout-following type (its Graph.layout_key) whose inputs all come blocked,
    with the output's channels (each already padded to the block, as an element-wise op keeps them) or with channels
    that fit the block (a Concat joins blocks)."""
    block = rules.block
    blocked: list[bool] = []
    for position, kernel in enumerate(kernels):
        anchor = graph.nodes[kernel.nodes[0]]
        op = anchor["op_type"]
        out = _channels(anchor["output_shapes"][0] if anchor["output_shapes"] else None)
        if not block or out is None:
            blocked.append(False)
        elif op in rules.blocked_types and op in ("Conv", "FusedConv"):
            config = conv_config(anchor)
            blocked.append(bool(config) and rules.runs_blocked(conv_key(config, block)))
        elif op in rules.blocked_types and out % block == 0:
            ins = [_channels(shape) for shape in graph.activation_inputs(anchor["index"])]
            blocked.append(all(c is not None and c % block == 0 for c in ins))
        elif graph.layout_key(anchor["index"]) in rules.following:
            sources = [owner.get(p) for p in graph.producers(anchor["index"]) if owner.get(p) != position]
            ins = [_channels(shape) for shape in graph.activation_inputs(anchor["index"])]
            blocked.append(bool(sources) and all(s is not None and s < len(blocked) and blocked[s] for s in sources)
                           and (all(c == out for c in ins) or all(c is not None and c % block == 0
                                                                   for c in [out, *ins])))
        else:
            blocked.append(False)
    return blocked


def _reads_plain(graph: Graph, rules: Rules, node: dict[str, Any]) -> bool:
    """A blocked dense convolution with fewer input channels than a block reads the plain layout itself."""
    config = conv_config(node) if node["op_type"] in ("Conv", "FusedConv") else {}
    return bool(config) and config["groups"] == 1 and config["cin"] < rules.block


def layout_kernels(graph: Graph, rules: Rules, kernels: list[Kernel], owner: dict[int, int],
                   blocked: list[bool]) -> list[Kernel]:
    """The conversions the engine inserts between `kernels` (`blocked`: their blocked_layouts): one per tensor that
    leaves a blocked kernel for a plain one (or the graph's output), and one per tensor that enters a blocked kernel
    from a plain one (or the graph's input)."""
    if not rules.block:
        return []
    shapes = {name: shape for node in graph.nodes
              for name, shape in zip([n for n in node["outputs"] if n], node["output_shapes"], strict=False)}
    for node in graph.nodes:
        for name, shape in zip([n for n in node["inputs"] if n], node["input_shapes"], strict=False):
            shapes.setdefault(name, shape)
    inserted: list[Kernel] = []
    tensors = sorted({name for node in graph.nodes for name in node["inputs"] if name} | set(graph.outputs))
    for name in tensors:
        source = owner.get(graph.producer[name]) if name in graph.producer else None
        if name not in graph.producer and not all(graph.nodes[c]["inputs"][0] == name
                                                  for c in graph.consumers.get(name, [])):
            continue  # a weight or constant: no activation to convert
        readers = {owner[c] for c in graph.consumers.get(name, []) if c in owner and owner[c] != source}
        if source is not None and blocked[source]:
            if any(not blocked[r] for r in readers) or name in graph.outputs:
                inserted.append(Kernel(rules.inserted_out, [], shapes.get(name)))
        elif any(blocked[r] and not _reads_plain(graph, rules, graph.nodes[kernels[r].nodes[0]]) for r in readers):
            inserted.append(Kernel(rules.inserted_in, [], shapes.get(name)))
    return inserted


def detect(graph: Graph, rules: Rules) -> list[Kernel]:
    """The graph's kernels under these rules: the grouped nodes, each with its layout as the feature `blocked` (1 where
    the engine runs it blocked), then the inserted layout conversions."""
    kernels, owner = group_nodes(graph, rules)
    blocked = blocked_layouts(graph, rules, kernels, owner)
    for kernel, runs_blocked in zip(kernels, blocked, strict=True):
        set_layout(with_features(graph, kernel).features, runs_blocked, rules.block)
    return kernels + [with_features(graph, kernel) for kernel in layout_kernels(graph, rules, kernels, owner, blocked)]


@lru_cache(maxsize=64)
def _cached(path: str, mtime: float, engine: str, dims: tuple[tuple[str, int], ...]) -> tuple[Kernel, ...]:
    return tuple(detect(Graph.load(path, dict(dims)), load_rules(engine)))


def kernels_of(model_path: str | Path, engine: str, dims: Mapping[str, int] | None = None) -> list[Kernel]:
    """The kernels `engine` runs for the ONNX graph at `model_path` (named dynamic dimensions at `dims`); a graph
    asked for again, unchanged, is not read again."""
    path = Path(model_path)
    if not path.is_file():
        raise ConfigError(f"model {path} does not exist; give the path of an .onnx file")
    return list(_cached(str(path.resolve()), path.stat().st_mtime, engine, tuple(sorted((dims or {}).items()))))
