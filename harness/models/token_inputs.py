"""What values an ONNX model's integer and boolean inputs accept, read from its graph.

Random integers in [0, 10) are not valid token ids for an embedding of 7 rows (onnxruntime stops on an index out of
range), nor is a random attention mask what a caller feeds. Here an input that indexes a Gather whose data is an
initializer (input_ids -> Gather(embedding [vocab, hidden])) gets ids below the table's size along the gathered
axis; a mask (bool, or an integer input named like *mask*) gets ones; token_type_ids get zeros.
"""

from __future__ import annotations

import onnx

_INTEGER_TYPES = frozenset({onnx.TensorProto.INT8, onnx.TensorProto.INT16, onnx.TensorProto.INT32,
                            onnx.TensorProto.INT64, onnx.TensorProto.UINT8, onnx.TensorProto.UINT16,
                            onnx.TensorProto.UINT32, onnx.TensorProto.UINT64})


def _gather_rows(graph: onnx.GraphProto) -> dict[str, int]:
    """Input name -> the fewest rows among the initializer tables it indexes through a Gather."""
    tables = {init.name: list(init.dims) for init in graph.initializer}
    rows: dict[str, int] = {}
    for node in graph.node:
        if node.op_type != "Gather" or len(node.input) < 2 or node.input[0] not in tables:
            continue
        dims = tables[node.input[0]]
        axis = next((attr.i for attr in node.attribute if attr.name == "axis"), 0)
        if dims and -len(dims) <= axis < len(dims):
            rows[node.input[1]] = min(rows.get(node.input[1], dims[axis]), dims[axis])
    return rows


def input_values(graph: onnx.GraphProto) -> dict[str, dict[str, int]]:
    """Input name -> {"fill": value} (every element that value) or {"high": n} (random ids in [0, n)), for the
    inputs whose valid values the graph or the name tells; the others are absent (random values)."""
    rows = _gather_rows(graph)
    values: dict[str, dict[str, int]] = {}
    for info in graph.input:
        elem_type = info.type.tensor_type.elem_type
        name = info.name.lower()
        if elem_type == onnx.TensorProto.BOOL or (elem_type in _INTEGER_TYPES and "mask" in name):
            values[info.name] = {"fill": 1}
        elif elem_type in _INTEGER_TYPES and "token_type" in name:
            values[info.name] = {"fill": 0}
        elif elem_type in _INTEGER_TYPES and info.name in rows:
            values[info.name] = {"high": rows[info.name]}
    return values

