"""Joining an engine's per-op rows to the ONNX graph's nodes (harness.models.facts): by the names the engine gives
the nodes it rewrites or fuses, and, for a kernel onnxruntime named after none of the nodes it replaced, by where it
ran (OnnxJoin.fused_replacing)."""

from __future__ import annotations

import functools
import re
from typing import Any

# Suffixes ORT gives the nodes it rewrites: its layout transformer `_nchwc`, its fusions (QDQ pairs into
# QLinearConv, for one) `_token_<n>`, from Graph::GenerateNodeName.
ORT_SUFFIX = re.compile(r"(_nchwc|_token_\d+|/\w+Fusion/?)$")
FUSION_NAME = re.compile(r"/(\w+)Fusion/?$")
ORT_PREFIX = "fused "
"""onnxruntime's names for the nodes it makes: `<node>_nchwc` (blocked layout), `<node>_token_<n>`, `fused <node>`
(FusedGemm, FusedConv: a Gemm or Conv with its activation), `<node>/QuickGeluFusion/` (x·sigmoid(x) as one kernel,
named after its Mul), `<node>/MatMulAddFusion` (a MatMul and its bias Add as one Gemm, named after the MatMul: a
Linear layer of a token or channels-last input, ConvNeXt's pointwise layers)."""


class OnnxJoin:
    """Graph facts per traced node name: by name, else by the fused node's output, walking back to its op type; for
    onnxruntime (`fused`), a kernel of its own op types named after none of the nodes it replaced, by where it ran
    (fused_replacing)."""

    def __init__(self, facts: list[dict[str, Any]], fused: bool = False) -> None:
        self.by_name = {f["name"]: f for f in facts if f["name"]}
        self.by_output = {out: f for f in facts for out in f["outputs"]}
        self.readers: dict[str, list[dict[str, Any]]] = {}
        for fact in facts:
            for name in fact["inputs"]:
                self.readers.setdefault(name, []).append(fact)
        self.op_types = {f["op_type"] for f in facts}
        self.fused = fused
        self.claimed: dict[str, str] = {}  # graph node -> traced node it was joined to
        self.previous: dict[str, Any] | None = None  # the node the last joined row was joined to

    def find(self, name: str, op_type: str, input_shapes: list[Any] | None = None) -> dict[str, Any] | None:
        candidates = [name.removeprefix(ORT_PREFIX)]
        while ORT_SUFFIX.search(candidates[-1]):
            candidates.append(ORT_SUFFIX.sub("", candidates[-1]))
        for candidate in candidates:
            found = self.by_name.get(candidate) or self.by_output.get(candidate)
            if found is not None:
                node = self._claim(self._nearest_of_type(found, op_type, name), name)
                self._claim_fused_readers(node, name)
                return node
        if self.fused and input_shapes and op_type in onnxruntime_fused_ops():
            return self.fused_replacing(name, input_shapes[0])
        return None

    def fused_replacing(self, name: str, shape: Any, depth: int = 3) -> dict[str, Any] | None:
        """The first graph node a kernel of onnxruntime's own op types replaced, where its name says none (a GELU
        written as Div, Erf, Add, Mul, Mul runs as one `Gelu`, named `Gelu_token_<n>`): of the nodes that read the
        outputs of the node the last joined row ran (or of their readers, `depth` deep), the first in the graph
        that is joined to no row and reads a tensor of the kernel's input shape. The other nodes it replaced, named by
        no row, read as run inside it."""
        level, found = [self.previous] if self.previous else [], []
        for _ in range(depth):
            level = [reader for node in level for reader in self._readers_of(node)]
            found += [node for node in level if node["name"] not in self.claimed
                      and any(s is not None and list(s) == list(shape) for s in node["input_shapes"])]
        return self._claim(min(found, key=lambda node: node["index"]), name) if found else None

    def _claim_fused_readers(self, node: dict[str, Any], name: str) -> None:
        """A kernel named `<node>/<Op><Op>Fusion` (MatMulAddFusion: a MatMul and its bias Add as one Gemm) also ran
        the reader of each op its name lists after the node's own: those are joined to no other row."""
        fusion = FUSION_NAME.search(name)
        ops = _op_types_in(fusion.group(1), self.op_types) if fusion else []
        for op in ops[1:] if ops and ops[0] == node["op_type"] else []:
            readers = self._readers_of(node)
            if len(readers) != 1 or readers[0]["op_type"] != op or readers[0]["name"] in self.claimed:
                return
            node = readers[0]
            self.claimed[node["name"]] = name

    def _readers_of(self, node: dict[str, Any]) -> list[dict[str, Any]]:
        return [reader for out in node["outputs"] for reader in self.readers.get(out, [])]

    def _claim(self, node: dict[str, Any], name: str) -> dict[str, Any]:
        self.claimed.setdefault(node["name"], name)
        self.previous = node
        return node

    def _nearest_of_type(self, start: dict[str, Any], op_type: str, traced: str, depth: int = 3) -> dict[str, Any]:
        """A fused node (Conv+Clip, Conv+Add) is named after its last member, its traced type is the first's:
        the nearest upstream node of that type not already joined to another traced node."""
        level = [start]
        for _ in range(depth + 1):
            for node in level:
                if node["op_type"] == op_type and self.claimed.get(node["name"], traced) == traced:
                    return node
            level = [self.by_output[i] for node in level for i in node["inputs"] if i in self.by_output]
        return start


def _op_types_in(text: str, op_types: set[str]) -> list[str]:
    """`text` read as op types run together (MatMulAdd: MatMul, Add), the longest first; [] where it is not."""
    found: list[str] = []
    while text:
        op = max((t for t in op_types if text.startswith(t)), key=len, default=None)
        if op is None:
            return []
        found.append(op)
        text = text[len(op):]
    return found


@functools.cache
def onnxruntime_fused_ops() -> frozenset[str]:
    """The op types onnxruntime defines in its own domain (com.microsoft: Gelu, FastGelu, SkipLayerNormalization,
    QuickGelu, FusedConv, ...): what its graph optimizations turn graph nodes into. Its layout conversions are of
    another domain (com.microsoft.nchwc), the standard ops of none of its own."""
    from onnxruntime.capi.onnxruntime_pybind11_state import get_all_operator_schema

    return frozenset(schema.name for schema in get_all_operator_schema() if schema.domain == "com.microsoft")
