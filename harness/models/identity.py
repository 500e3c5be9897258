"""A model's identity from its graph, not its file name: a structural fingerprint of an ONNX graph with the weights
left out, so `my_shufflenet.onnx` exported by hand is the zoo's shufflenet when its graph is.

The fingerprint covers what makes two graphs run alike: each node's op type, domain and attributes, how nodes are
wired (tensors numbered in order of first use, so tensor and node names do not count), every tensor's element type
and shape (a symbolic dimension as `?`), the opsets, and subgraphs alike. Of stored tensors (initializers, Constant
nodes) it keeps the values of int32/int64 ones (shapes, axes, indices: structure) and only the type and shape of the
others (weights: the same network trained otherwise is the same model to a latency).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

STRUCTURAL_TYPES = (6, 7)  # onnx.TensorProto.INT32, INT64: their values are shapes, axes and indices
"""The tensor element types whose values are structure, not weights."""


def graph_fingerprint(path: str | Path) -> str | None:
    """The sha256 of the ONNX graph's structure at `path` (weights left out); None for a file that is not ONNX."""
    file = Path(path)
    if file.suffix.lower() != ".onnx" or not file.is_file():
        return None
    stat = file.stat()
    return _fingerprint(str(file.resolve()), stat.st_mtime_ns, stat.st_size)


def same_graph(path: str | Path, candidates: Iterable[tuple[str, str | Path]]) -> str | None:
    """The name of the first (name, file) among `candidates` whose graph is the one at `path`, else None."""
    mine = graph_fingerprint(path)
    if mine is None:
        return None
    return next((name for name, other in candidates if graph_fingerprint(other) == mine), None)


SIZE_TOLERANCE = 0.02
"""Two files whose sizes differ by more than this share are not compared: the same graph with other weights has the
same tensors, so the same size but for names and doc strings."""


def graph_twins(files: Mapping[str, str | None], names: Iterable[str]) -> dict[str, str]:
    """Each model of `files` (name -> its ONNX file) not named as a zoo model whose graph is the cached zoo export of
    one of `names` -> that name: a user's renamed copy of a zoo model is that model to a device table or a library
    table. Only exports already in the zoo's cache are compared (nothing is built), and only files of about the same
    size, so a session of the user's own models costs a stat per cached file."""
    from harness.core.errors import ModelError
    from harness.zoo import registry as zoo_registry
    from harness.zoo.cache import cached_files

    own = {model: Path(file) for model, file in files.items() if file and not zoo_registry.is_zoo_name(model)
           and Path(file).suffix.lower() == ".onnx" and Path(file).is_file()}
    if not own:  # every model a zoo model's (the usual session): no cache to read
        return {}
    exports: list[tuple[str, Path]] = []
    for name in sorted({name for name in names if name not in files}):
        try:
            canonical = zoo_registry.parse(name).name
        except ModelError:  # not a zoo name: no export of it to compare
            continue
        exports += [(name, path) for path in cached_files(canonical) if path.suffix == ".onnx"]
    twins = {}
    for model, path in own.items():
        size = path.stat().st_size
        near = [(name, export) for name, export in exports
                if abs(export.stat().st_size - size) <= SIZE_TOLERANCE * size]
        if twin := same_graph(path, near):
            twins[model] = twin
    return twins


@cache
def _fingerprint(path: str, mtime_ns: int, size: int) -> str | None:
    """Read once per file version: a NAS loop or a zero-shot call asks for the same files again."""
    import onnx

    try:
        model = onnx.load(path, load_external_data=False)
    except Exception:  # noqa: BLE001  # onnx raises its parser's errors: an unreadable file has no identity
        return None
    opsets = sorted((entry.domain, entry.version) for entry in model.opset_import)
    text = json.dumps({"opsets": opsets, "graph": _graph(model.graph)}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _graph(graph: Any) -> dict[str, Any]:
    index: dict[str, int] = {}

    def ref(name: str) -> int:
        return index.setdefault(name, len(index)) if name else -1

    stored = [(ref(tensor.name), _tensor(tensor)) for tensor in graph.initializer]
    inputs = [(ref(value.name), _value_type(value)) for value in graph.input]
    nodes = [(node.op_type, node.domain, [ref(name) for name in node.input], [ref(name) for name in node.output],
              sorted((attr.name, _attribute(attr)) for attr in node.attribute)) for node in graph.node]
    outputs = [(ref(value.name), _value_type(value)) for value in graph.output]
    return {"stored": sorted(stored), "inputs": inputs, "nodes": nodes, "outputs": outputs}


def _tensor(tensor: Any) -> list[Any]:
    from onnx import numpy_helper

    shape = [int(dim) for dim in tensor.dims]
    if tensor.data_type in STRUCTURAL_TYPES and not tensor.external_data:
        return [tensor.data_type, shape, numpy_helper.to_array(tensor).ravel().tolist()]
    return [tensor.data_type, shape]


def _value_type(value: Any) -> list[Any]:
    tensor = value.type.tensor_type
    dims = [dim.dim_value if dim.HasField("dim_value") else "?" for dim in tensor.shape.dim]
    return [tensor.elem_type, dims]


def _attribute(attr: Any) -> Any:
    from onnx import helper

    if attr.HasField("t"):
        return _tensor(attr.t)
    if attr.HasField("g"):
        return _graph(attr.g)
    if len(attr.graphs):
        return [_graph(graph) for graph in attr.graphs]
    if len(attr.tensors):
        return [_tensor(tensor) for tensor in attr.tensors]
    value = helper.get_attribute_value(attr)
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, list):
        return [item.decode(errors="replace") if isinstance(item, bytes) else item for item in value]
    return value
