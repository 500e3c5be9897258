"""ncnn's layers joined to the ONNX graph pnnx converted them from, by what both keep: the order and output channels
of the weighted layers.

ncnn's per-op rows name its own layers (`convrelu_0`, `convdw_52`, `linear_16`), no graph node, so neither
onnxruntime's join by name nor fusion rules learned from it reach them. pnnx keeps the graph's order, and each weighted
layer's line in the .param says its output channels (`0=`) and the activation it runs inside (`9=`: 1 ReLU,
2 LeakyReLU, 3 Clip, 4 Sigmoid, 5 Mish, 6 HardSwish, 0 none): the weighted layers, in order, are the graph's
convolutions and fully connected layers, in order, wherever their output channels agree one to one (all twelve
models of a default probe did). A graph where they do not is joined nowhere."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import chain
from pathlib import Path

import pandas as pd

from harness.kernels.detect import detect
from harness.kernels.graph import Graph, Kernel
from harness.kernels.rules import Key, Rules
from harness.kernels.training import GAP_ROWS, TIME_COLUMN
from harness.measure.ncnn_param import layers, param_text
from harness.models.facts import onnx_facts
from harness.models.ncnn_convert import ConversionError, convert
from harness.models.resolve import content_sha256

WEIGHTED_LAYERS = frozenset({"Convolution", "ConvolutionDepthWise", "Convolution1D", "ConvolutionDepthWise1D",
                             "Convolution3D", "ConvolutionDepthWise3D", "Deconvolution", "DeconvolutionDepthWise",
                             "InnerProduct"})
"""ncnn's layer types that carry a graph node's weights (output channels in `0=`, a fused activation in `9=`)."""
WEIGHTED_NODES = frozenset({"Conv", "ConvTranspose", "Gemm"})
"""The graph's op types pnnx makes them of (with a MatMul that reads weights: a Linear without its bias)."""


@dataclass(frozen=True)
class Joined:
    """A weighted layer's graph node and whether it ran the node's sole reader inside itself (`9=` not 0)."""

    node: int
    activation: bool


def weighted_nodes(graph: Graph) -> list[int]:
    """The graph's convolutions and fully connected layers, in order."""
    return [node["index"] for node in graph.nodes
            if node["op_type"] in WEIGHTED_NODES or (node["op_type"] == "MatMul" and node["weights"])]


def _channels(node: dict) -> int:
    shape = node["output_shapes"][0] if node["output_shapes"] else None
    if not shape:
        return -1
    return int(shape[-1] if node["op_type"] in ("Gemm", "MatMul") else shape[1])


def layer_join(graph: Graph, param: str) -> dict[str, Joined]:
    """ncnn layer name -> its graph node, for the weighted layers of the .param text `param`: empty where their
    count or output channels, in order, differ from the graph's weighted nodes."""
    lines = [line for line in layers(param) if line[0] in WEIGHTED_LAYERS]
    nodes = weighted_nodes(graph)
    settings = [dict(item.split("=", 1) for item in line[4:] if "=" in item) for line in lines]
    if len(lines) != len(nodes) or any(int(s.get("0", -1)) != _channels(graph.nodes[n])
                                       for s, n in zip(settings, nodes, strict=True)):
        return {}
    return {line[1]: Joined(node, s.get("9", "0") != "0") for line, s, node in zip(lines, settings, nodes, strict=True)}


def converted_join(onnx_path: Path) -> dict[str, Joined]:
    """layer_join of the graph at `onnx_path` and the .param pnnx makes of it (from the converter's cache where the
    probe converted it); empty where pnnx cannot convert it. Without the ncnn extra, its MISSING_EXTRA error: joining
    no layer, a table's fit came out otherwise, silently (a torchvision MnasNet 0.75 summed to 5.27 ms against 4.19
    from the same table with the extra installed)."""
    try:
        converted = convert(onnx_path, content_sha256(onnx_path), onnx_path.stem, onnx_facts(onnx_path)["inputs"])
        return layer_join(Graph.load(onnx_path), param_text(converted.param))
    except ConversionError:
        return {}


def tally(evidence: Iterable[tuple[Key, bool]]) -> dict[Key, dict[str, int]]:
    """Absorbed and kept counts (harness.kernels.rules' keys) of (key, absorbed) evidence."""
    counts: dict[Key, dict[str, int]] = {}
    for key, absorbed in evidence:
        counts.setdefault(key, {"absorbed": 0, "kept": 0})["absorbed" if absorbed else "kept"] += 1
    return counts


def absorption(joined: Iterable[tuple[Graph, dict[str, Joined]]]) -> Iterator[tuple[Key, bool]]:
    """(key, absorbed) of the joined nodes' sole readers, over every joined graph: absorbed where the layer ran its
    reader inside itself, kept where it did not."""
    for graph, join in joined:
        for layer in join.values():
            node = graph.nodes[layer.node]
            readers = {reader for out in node["outputs"] if out for reader in graph.consumers.get(out, [])}
            if len(readers) != 1:
                continue
            [reader] = readers
            inside = all(producer == layer.node for producer in graph.producers(reader))
            yield (graph.nodes[reader]["op_type"], node["op_type"], True, inside), layer.activation


def joined_kernels(graph: Graph, rows: pd.DataFrame, rules: Rules, joined: dict[str, Joined]
                   ) -> list[tuple[Kernel, float]]:
    """Each row of a weighted layer as (the kernel detection finds at its node under `rules`, its TIME_COLUMN ms); the
    other layers' rows, joined to no node, give none."""
    owner = {node: kernel for kernel in detect(graph, rules) for node in kernel.nodes}
    return [(owner[layer.node], float(getattr(row, TIME_COLUMN))) for row in rows.itertuples()
            if (layer := joined.get(str(row.node))) is not None and layer.node in owner]


def chained(graph: Graph) -> bool:
    """Whether the graph's nodes run one after another: each the sole reader of the one before, reading no other
    node's output."""
    nodes = graph.nodes
    return len(nodes) > 1 and all(
        graph.producers(i) == [i - 1]
        and {c for out in nodes[i - 1]["outputs"] if out for c in graph.consumers.get(out, [])} == {i}
        for i in range(1, len(nodes)))


def designed_absorption(rows: pd.DataFrame, graph_for: Callable[[str], Path]) -> Iterator[tuple[Key, bool]]:
    """(key, absorbed) along each designed kernel's chain of nodes, where its timed layers say how ncnn ran it: as
    one layer, every node after the first absorbed into it (a channel shuffle's Reshape, Transpose, Reshape ran as
    one ShuffleChannel); as one layer per node, none. Any other count (a MatMul as a Split, two Reshapes and a Gemm),
    a graph of branches, or a tool's whole-graph time (no median) says nothing."""
    timed = rows[rows["source"].eq("designed") & rows[TIME_COLUMN].notna() & ~rows["op_type"].isin(GAP_ROWS)]
    for (kernel, graph_name), layer_rows in timed.groupby(["kernel", "graph"]):
        if Path(str(graph_name)).stem != kernel:  # a probe graph's warm-up or sink, not a designed kernel's own
            continue
        graph = Graph.load(graph_for(str(graph_name)))
        if not chained(graph) or len(layer_rows) not in (1, len(graph.nodes)):
            continue
        types, one = [node["op_type"] for node in graph.nodes], len(layer_rows) == 1
        for i in range(1, len(types)):
            yield (types[i], types[0] if one else types[i - 1], True, True), one


def in_run(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows with each graph's layer times scaled by its end-to-end latency over their sum, where the sum is the
    larger: ncnn's per-layer phase keeps every blob (light mode off) and hands each over, and its layers summed to
    1.05–1.57 times the graph's latency in a probe of this host (ResNet-18 1.05, MobileNetV3 Small 1.57: the
    depthwise nets, whose blobs the timed run reuses from the cache, the most). A sum below the latency is the
    graph's own cost outside its layers, which no layer holds."""
    timed = rows[~rows["op_type"].isin(GAP_ROWS)]
    sums = timed.groupby("model")[TIME_COLUMN].sum(min_count=1)
    latency = timed.groupby("model")["model_latency_ms"].first()
    scale = (latency / sums).clip(upper=1.0).fillna(1.0)
    factor = rows["model"].map(scale).fillna(1.0)
    return rows.assign(**{column: rows[column] * factor for column in (TIME_COLUMN, "mean_ms")})


def layer_evidence(engine: str, rows: pd.DataFrame, graph_for: Callable[[str], Path]
                   ) -> tuple[Rules, dict[str, dict[str, Joined]]]:
    """For an engine whose rules are not learned: the rules its layers show (ncnn: each weighted layer's fused
    activation in its models, and the designed kernels' chains: absorption) and each model graph's layer join (by
    the `graph` cell of its rows); no rules and no joins for any other engine."""
    if engine != "ncnn":
        return Rules(engine, {}), {}
    graphs = {str(g): graph_for(str(g)) for g in rows.loc[rows["source"].eq("zoo"), "graph"].unique()}
    joins = {name: join for name, path in graphs.items() if (join := converted_join(path))}
    models = absorption((Graph.load(graphs[name]), join) for name, join in joins.items())
    return Rules(engine, tally(chain(models, designed_absorption(rows, graph_for)))), joins
