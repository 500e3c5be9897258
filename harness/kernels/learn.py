"""Learning an engine's fusion rules (harness.kernels.rules) from its per-op profiles: the absorption counts, the
blocked layout's block, op types and convolution configurations, and the layout-following op types chosen while they
bring the predicted count of inserted conversions closer to the counted one.

    python -m harness.kernels.learn SESSION_DIR [SESSION_DIR ...] [KERNEL_TABLE ...] --engine onnxruntime

writes harness/kernels/fusion_rules_<engine>_block<N>.json (N: the block the profiles show) from every model those
sessions profiled with PER_OP=1, and the layouts and inner absorptions of the designed kernels of the kernel tables
given (`harness probe`'s folders under results/kernels/)."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from harness.kernels.designed import PACK_KINDS
from harness.kernels.detect import blocked_layouts, group_nodes, layout_kernels
from harness.kernels.features import shape_of
from harness.kernels.graph import Graph, Kernel, conv_config, spatial_rank
from harness.kernels.rules import (
    BLOCKED_MARK,
    ELEMENTWISE,
    IDENTICAL,
    READ_BY,
    ConvKey,
    Key,
    Rules,
    conv_key,
    rules_path,
)
from harness.kernels.table import TABLE_FILE, KernelTable
from harness.kernels.training import session_tables


@dataclass(frozen=True)
class Example:
    """One profiled model: its graph and its engine's per-op rows (operators only)."""

    model: str
    graph: Graph
    rows: pd.DataFrame


def _count(table: dict[Any, dict[str, int]], key: Any, field_name: str, model: str,
           models: dict[Any, set[str]]) -> None:
    entry = table.setdefault(key, {"absorbed": 0, "kept": 0})
    entry[field_name] += 1
    models.setdefault(key, set()).add(model)


def learn_absorption(examples: Iterable[Example], designed: Iterable[Example] = ()
                     ) -> tuple[dict[Key, dict[str, int]], dict[str, dict[str, int]]]:
    """Absorbed and kept counts per (op, anchor op, sole reader, all inputs inside the kernel), and dropped against
    kept for sourceless nodes. A `designed` kernel's nodes count where a node of the kernel feeds them: the kernel's
    own inputs were graph inputs of the pack it was timed in, which says nothing of a model's sourceless nodes."""
    absorb: dict[Key, dict[str, int]] = {}
    dropped: dict[str, dict[str, int]] = {}
    models: dict[Any, set[str]] = {}
    for example, cut_out in [*((example, False) for example in examples), *((example, True) for example in designed)]:
        graph, named = example.graph, set(example.rows["onnx_node"].dropna())
        anchor: dict[int, int] = {}  # node -> the anchor node of its kernel
        twins: dict[tuple[str, tuple[str, ...]], int] = {}  # (op, inputs) -> the first node doing that
        for node in graph.nodes:
            index, producers = node["index"], sorted(set(graph.producers(node["index"])), reverse=True)
            own = node["name"] in named
            if not producers and cut_out:
                anchor[index] = index
                continue
            if not producers:
                entry = dropped.setdefault(node["op_type"], {"dropped": 0, "kept": 0})
                entry["kept" if own else "dropped"] += 1
                if own:
                    anchor[index] = index
                continue
            reader = graph.reader(index)
            if reader is not None and (own or graph.nodes[reader]["name"] in named):
                _count(absorb, (node["op_type"], READ_BY + graph.nodes[reader]["op_type"], True, True),
                       "kept" if own else "absorbed", example.model, models)
                if not own:  # ran inside its reader's kernel, not its producer's
                    anchor[index] = reader
                    continue
            if any(anchor.get(p) == index for p in producers):  # the reader of a node run inside its kernel
                anchor[index] = index
                continue
            twin = twins.get((node["op_type"], tuple(node["inputs"])))
            if twin is not None and twin in anchor:
                _count(absorb, (node["op_type"], IDENTICAL, False, False), "kept" if own else "absorbed", example.model,
                       models)
                anchor[index] = index if own else anchor[twin]
                continue
            twins[(node["op_type"], tuple(node["inputs"]))] = index
            producer = next((p for p in producers if p in anchor), None)
            if producer is None:
                anchor[index] = index
                continue
            sole = all(len(graph.consumers.get(out, [])) == 1 for out in graph.nodes[producer]["outputs"] if out)
            inside = all(anchor.get(p) == anchor[producer] for p in producers)
            context = (graph.nodes[anchor[producer]]["op_type"], sole, inside)
            _count(absorb, (node["op_type"], *context), "kept" if own else "absorbed", example.model, models)
            if graph.elementwise(index):
                _count(absorb, (ELEMENTWISE, *context), "kept" if own else "absorbed", example.model, models)
            anchor[index] = index if own else anchor[producer]
    for key, entry in absorb.items():
        entry["models"] = len(models[key])
    return absorb, dropped


def learn_layout(examples: list[Example]) -> tuple[int, frozenset[str], dict[ConvKey, dict[str, int]]]:
    """The block size, the op types that ran blocked (rows whose node name carries the blocked mark), and per 2-D
    convolution configuration how often it ran blocked or plain (a 1-D or 3-D one runs plain whatever its channels,
    and its configuration would read as a 2-D one's)."""
    channels: list[int] = []
    types: set[str] = set()
    convs: list[tuple[dict[str, float], bool]] = []
    for example in examples:
        by_name = {node["name"]: node for node in example.graph.nodes}
        for row in example.rows.itertuples():
            node = by_name.get(str(row.onnx_node))
            if node is None:
                continue
            marked = BLOCKED_MARK in str(row.node)
            if node["op_type"] == "Conv" and spatial_rank(node) == 2 and conv_config(node):
                convs.append((conv_config(node), marked))
            if not marked:
                continue
            types.add(node["op_type"])
            shape = shape_of(str(row.output_shapes))
            if node["op_type"] == "Conv" and shape and len(shape) > 1:
                channels.append(shape[1])  # as the engine ran it: padded up to its block
    if not channels:
        return 0, frozenset(types), {}
    common = math.gcd(*channels)
    block = common & -common
    table: dict[ConvKey, dict[str, int]] = {}
    for config, marked in convs:
        entry = table.setdefault(conv_key(config, block), {"blocked": 0, "plain": 0})
        entry["blocked" if marked else "plain"] += 1
    return block, frozenset(types), table


def _inserted_count(example: Example, rules: Rules) -> dict[str, int]:
    rows = example.rows[example.rows["onnx_node"].isna()]
    return {kind: int((rows["op_type"] == kind).sum()) for kind in (rules.inserted_in, rules.inserted_out)}


def layout_error(examples: list[Example], rules: Rules,
                 grouped: list[tuple[list[Kernel], dict[int, int]]] | None = None) -> int:
    """How far the predicted count of inserted conversions is from the counted one, summed over the models
    (`grouped`: each example's kernels under these rules' absorptions, when the caller has them)."""
    error = 0
    for index, example in enumerate(examples):
        kernels, owner = grouped[index] if grouped else group_nodes(example.graph, rules)
        blocked = blocked_layouts(example.graph, rules, kernels, owner)
        predicted = [k.kind for k in layout_kernels(example.graph, rules, kernels, owner, blocked)]
        counted = _inserted_count(example, rules)
        error += sum(abs(predicted.count(kind) - count) for kind, count in counted.items())
    return error


def learn(examples: list[Example], engine: str, designed: list[Example] | None = None) -> Rules:
    """The engine's rules from its profiled models (see the module's docstring); `designed` kernels (a probe's, each
    cut out of the graph it was timed in) add their layouts and the absorptions inside them (a SiLU after its
    convolution, which a family held out may be the only model to run), not their conversions: those were the packed
    graph's."""
    absorb, dropped = learn_absorption(examples, designed or [])
    block, blocked_types, conv_layout = learn_layout(examples + (designed or []))
    rules = Rules(engine, absorb, dropped, block, blocked_types, conv_layout=conv_layout)
    grouped = [group_nodes(example.graph, rules) for example in examples]  # the layout never changes the grouping
    candidates = sorted({example.graph.layout_key(node["index"]) for example in examples
                         for node in example.graph.nodes} - blocked_types)
    best = layout_error(examples, rules, grouped)
    while block:
        trials = {op: layout_error(examples, replace(rules, following=rules.following | {op}), grouped)
                  for op in candidates if op not in rules.following}
        op = min(trials, key=lambda name: trials[name], default=None)
        if op is None or trials[op] >= best:
            break
        best, rules = trials[op], replace(rules, following=rules.following | {op})
    rows = sum(len(example.rows) for example in examples)
    inserted = sum(sum(_inserted_count(example, rules).values()) for example in examples)
    return replace(rules, meta={"models": sorted(example.model for example in examples), "rows": rows,
                                "inserted_rows": inserted, "inserted_count_error": best})


def examples_from_sessions(session_dirs: Iterable[Path], engine: str) -> list[Example]:
    """One example per model profiled with PER_OP=1 on `engine` in these sessions (its first run's table)."""
    return [Example(table.model, Graph.load(table.model_path, table.dims), table.rows)
            for table in session_tables(session_dirs, engine)]


def examples_from_table(folder: Path) -> list[Example]:
    """One example per designed kernel of a kernel table (`harness probe`'s, its graphs stored beside its rows): the
    configurations no zoo model runs, such as grouped convolutions of 16 to 64 channels a group, whose layout only
    such a probe shows. The packs' own rows (their overhead, warm and sink nodes, the time between ops) are no
    kernel's."""
    table = KernelTable.load(folder)
    rows = table.rows()
    rows = rows[(rows["source"] == "designed") & rows["kernel"].notna() & ~rows["kernel_kind"].isin(PACK_KINDS)]
    return [Example(str(graph), Graph.load(table.graph_path(str(graph))), part.reset_index(drop=True))
            for graph, part in rows.groupby("graph", sort=True) if table.graph_path(str(graph)).is_file()]


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m harness.kernels.rules", description=__doc__.split("\n")[0])
    parser.add_argument("sessions", nargs="+", type=Path,
                        help="session directories with per-op runs, or kernel tables of designed kernels")
    parser.add_argument("--engine", default="onnxruntime")
    args = parser.parse_args(argv)
    tables = [path for path in args.sessions if (path / TABLE_FILE).is_file()]
    sessions = [path for path in args.sessions if path not in tables]
    examples = examples_from_sessions(sessions, args.engine)
    rules = learn(examples, args.engine, [example for table in tables for example in examples_from_table(table)])
    path = rules_path(args.engine, rules.block)
    path.write_text(json.dumps(rules.to_json(), indent=1) + "\n", encoding="utf-8")
    print(f"{path}: {len(rules.absorb)} absorption counts over {len(rules.meta['models'])} models, "
          f"block {rules.block}, following {sorted(rules.following)}; inserted conversions off by "
          f"{rules.meta['inserted_count_error']} of {rules.meta['inserted_rows']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

