"""A graph's tensor shapes, inferred as the engine will know them at run time.

onnx's shape inference (with data propagation) cannot follow every shape a graph computes from its own tensors: a
TorchScript export of torchvision's ShuffleNetV2 splits its channels with Slice nodes whose ends come from a
Shape → Gather → Div chain, and every tensor after the first split was left with unknown dims, which the facts read
as one sample of one element (a 1×1×1×1 map, a convolution of a few thousand MACs). onnxruntime computes those shapes
before it runs the graph; its symbolic shape inference (onnxruntime.tools.symbolic_shape_infer) evaluates the same
chains, a dynamic batch kept as its name. It is asked only where onnx left some tensor's dims unknown."""

from __future__ import annotations

import onnx
from onnx import shape_inference


def unresolved(model: onnx.ModelProto) -> int:
    """How many dims of the tensors the nodes write inference left unknown: neither a size nor one of the graph
    inputs' named dims (a batch), each tensor with no inferred shape counting one."""
    named = {dim.dim_param for info in model.graph.input for dim in info.type.tensor_type.shape.dim
             if dim.HasField("dim_param")}
    known = {info.name: info for info in (*model.graph.value_info, *model.graph.output)}
    missing = 0
    for name in (name for node in model.graph.node for name in node.output if name):
        info = known.get(name)
        if info is None or not info.type.HasField("tensor_type") or not info.type.tensor_type.HasField("shape"):
            missing += 1
            continue
        missing += sum(1 for dim in info.type.tensor_type.shape.dim
                       if not (dim.HasField("dim_value") and dim.dim_value > 0) and dim.dim_param not in named)
    return missing


def _symbolic(model: onnx.ModelProto) -> onnx.ModelProto | None:
    """onnxruntime's symbolic inference of the graph, or None where it cannot complete it. Its `infer_shapes` saves
    the half-inferred model into the working directory before it raises; the steps it takes are called here
    instead, so nothing is written."""
    try:
        from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference
    except ImportError:
        return None
    try:
        inference = SymbolicShapeInference(2**31 - 1, True, False, 0)  # int_max, auto_merge, guess_output_rank, verbose
        inference._preprocess(model)
        done = False
        while inference.run_:
            done = inference._infer_impl()
        inference._update_output_from_vi()
    except Exception:  # an op it has no rule for, an opset it does not read: onnx's shapes stand
        return None
    return inference.out_mp_ if done else None


def inferred(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with its tensors' shapes inferred: onnx's, or onnxruntime's symbolic inference where onnx left dims
    unknown and the symbolic one knows more of them (a named input dim, such as a dynamic batch, stays named)."""
    found = shape_inference.infer_shapes(model, data_prop=True)
    missing = unresolved(found)
    if not missing:
        return found
    symbolic = _symbolic(found)
    if symbolic is None or unresolved(symbolic) >= missing:
        return found
    del symbolic.graph.input[:]  # as the file declares them: the symbolic inference names a dim left unnamed
    symbolic.graph.input.extend(model.graph.input)
    return symbolic
