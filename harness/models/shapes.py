"""A graph's tensor shapes, inferred as the engine will know them at run time.

onnx's shape inference (with data propagation) cannot follow every shape a graph computes from its own tensors: a
TorchScript export of torchvision's ShuffleNetV2 splits its channels with Slice nodes whose ends come from a
Shape → Gather → Div chain, and every tensor after the first split was left with unknown dims, which the facts read
as one sample of one element (a 1×1×1×1 map, a convolution of a few thousand MACs). onnxruntime computes those shapes
before it runs the graph; its symbolic shape inference (onnxruntime.tools.symbolic_shape_infer) evaluates the same
chains, a dynamic batch kept as its name. It is asked only where onnx left some tensor's dims unknown.

Some chains defeat both: torchvision's Swin Transformer pads each stage to whole windows with pads computed from
Shape nodes, and the symbolic inference gave up on the padded dims (6,261 nodes; 8.8 s), leaving its windowed
attention read as one window of 64 (its Gemms at a 64th of their MACs, the model predicted −74%). Where every dim
the chains read is static, onnxruntime folds them into constants before it runs the graph (its basic optimizations:
593 nodes left, 0.6 s); the shapes of that folded graph are handed to onnx's inference of the file's own graph
(_engine_folded), which is asked first."""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Collection
from pathlib import Path

import onnx
from onnx import shape_inference


def _named_dims(model: onnx.ModelProto) -> set[str]:
    """The graph inputs' named dims (a dynamic batch, a sequence length)."""
    return {dim.dim_param for info in model.graph.input for dim in info.type.tensor_type.shape.dim
            if dim.HasField("dim_param")}


def _sized(dim: onnx.TensorShapeProto.Dimension, named: Collection[str]) -> bool:
    """Whether inference knows the dim: a size, or one of the graph inputs' named dims."""
    return (dim.HasField("dim_value") and dim.dim_value > 0) or dim.dim_param in named


def _has_shape(info: onnx.ValueInfoProto) -> bool:
    return info.type.HasField("tensor_type") and info.type.tensor_type.HasField("shape")


def unresolved(model: onnx.ModelProto) -> int:
    """How many dims of the tensors the nodes write inference left unknown: neither a size nor one of the graph
    inputs' named dims (a batch), each tensor with no inferred shape counting one."""
    named = _named_dims(model)
    known = {info.name: info for info in (*model.graph.value_info, *model.graph.output)}
    missing = 0
    for name in (name for node in model.graph.node for name in node.output if name):
        info = known.get(name)
        if info is None or not _has_shape(info):
            missing += 1
            continue
        missing += sum(1 for dim in info.type.tensor_type.shape.dim if not _sized(dim, named))
    return missing


def _symbolic(model: onnx.ModelProto) -> onnx.ModelProto | None:
    """onnxruntime's symbolic inference of the graph, or None where it cannot complete it. Its `infer_shapes` saves
    the half-inferred model into the working directory before it raises; the steps it takes are called here
    instead, so nothing is written."""
    try:
        from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference
    except ImportError:
        return None
    logger = logging.getLogger("onnxruntime.tools.symbolic_shape_infer")
    level = logger.level
    logger.setLevel(logging.ERROR)  # its "Unable to determine if ..." guesses are no concern of a user's
    try:
        inference = SymbolicShapeInference(2**31 - 1, True, False, 0)  # int_max, auto_merge, guess_output_rank, verbose
        inference._preprocess(model)
        done = False
        while inference.run_:
            done = inference._infer_impl()
        inference._update_output_from_vi()
    except Exception:  # an op it has no rule for, an opset it does not read: onnx's shapes stand
        return None
    finally:
        logger.setLevel(level)
    return inference.out_mp_ if done else None


def static_shapes(model: onnx.ModelProto, named: Collection[str] = ()) -> dict[str, onnx.ValueInfoProto]:
    """The value infos of the model's tensors (its inputs, the tensors its nodes write) whose every dim inference
    knows as a size (or as one of `named`)."""
    return {info.name: info for info in (*model.graph.input, *model.graph.value_info, *model.graph.output)
            if _has_shape(info) and all(_sized(dim, named) for dim in info.type.tensor_type.shape.dim)}


def _engine_folded(model: onnx.ModelProto, one_sample: bool = False) -> onnx.ModelProto | None:
    """onnx's inference of the graph given the shapes of the graph onnxruntime folds it into (its basic
    optimizations: shape chains over static dims become constants), or None where onnxruntime cannot load it (weights
    in external files, an op it lacks). `one_sample`: the graph inputs' named dims folded at 1, as the facts count
    one sample; only the tensors inference could not size at all take those shapes, a tensor of a named batch stays
    named."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    named = _named_dims(model)
    with tempfile.TemporaryDirectory(prefix="harness-shapes-") as folder:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(Path(folder) / "folded.onnx")
        options.log_severity_level = 4  # a graph it cannot load is no error of the user's: the other inferences stand
        for name in named if one_sample else ():
            options.add_free_dimension_override_by_name(name, 1)
        try:
            ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
            folded = shape_inference.infer_shapes(onnx.load(options.optimized_model_filepath,
                                                            load_external_data=False), data_prop=True)
        except Exception:  # not loadable by itself: onnx's and the symbolic inference's shapes stand
            return None
    known = static_shapes(model, named)
    constants = {init.name: onnx.helper.make_tensor_value_info(init.name, init.data_type, list(init.dims))
                 for init in folded.graph.initializer}  # the tensors the folding computed
    hints = {name: info for name, info in {**constants, **static_shapes(folded)}.items() if name not in known}
    hinted = onnx.ModelProto()
    hinted.CopyFrom(model)
    kept = [info for info in model.graph.value_info if info.name not in hints]
    del hinted.graph.value_info[:]
    hinted.graph.value_info.extend([*kept, *hints.values()])
    return shape_inference.infer_shapes(hinted, data_prop=True)


def inferred(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with its tensors' shapes inferred: onnx's; where it left dims unknown, with the shapes of the graph
    onnxruntime folds it into; then onnxruntime's symbolic inference where a named input dim, such as a dynamic batch,
    is left to follow (kept named); and last, where that could not complete them (Swin-T exported with a dynamic
    batch: its padded windows), the engine's folding at one sample. Each step is taken where it knows more."""
    found = shape_inference.infer_shapes(model, data_prop=True)
    missing = unresolved(found)
    if not missing:
        return found
    folded = _engine_folded(found)
    found, missing = _better(found, missing, folded)
    dynamic = bool(_named_dims(model))
    if not missing or (folded is not None and not dynamic):  # what is left, the engine folds away
        return found
    symbolic = _symbolic(found)
    if symbolic is not None:
        del symbolic.graph.input[:]  # as the file declares them: the symbolic inference names a dim left unnamed
        symbolic.graph.input.extend(model.graph.input)
    found, missing = _better(found, missing, symbolic)
    if missing and dynamic:
        found, missing = _better(found, missing, _engine_folded(found, one_sample=True))
    return found


def _better(found: onnx.ModelProto, missing: int, other: onnx.ModelProto | None) -> tuple[onnx.ModelProto, int]:
    """`other` and its unresolved dims where it leaves fewer than `found`, else `found` and `missing`."""
    left = unresolved(other) if other is not None else missing
    return (other, left) if other is not None and left < missing else (found, missing)
