"""A dynamic model at given sizes: the model facts count a symbolic dimension as 1, so a model exported with a
dynamic `seq` or `height` and `width` (a zoo model with a signature) is counted at the sizes its figures are published
at (harness.zoo.published, Published.dims) by fixing those dims in a copy of the graph first. onnx only."""

from __future__ import annotations

from pathlib import Path

import onnx


def with_fixed_dims(source: Path, sizes: dict[str, int], target: Path) -> Path:
    """Write `source` to `target` with every graph input dim named in `sizes` fixed to its size. The exporter's
    intermediate shapes (symbolic expressions of those dims) are dropped, so shape inference recomputes them, and so
    are the outputs' symbolic dims."""
    model = onnx.load(str(source))
    for value in model.graph.input:
        for dim in value.type.tensor_type.shape.dim:
            if dim.dim_param in sizes:
                dim.dim_value = sizes[dim.dim_param]  # clears dim_param (a oneof)
    del model.graph.value_info[:]
    for value in model.graph.output:
        for dim in value.type.tensor_type.shape.dim:
            if dim.dim_param:
                dim.Clear()
    onnx.save(model, str(target))
    return target
