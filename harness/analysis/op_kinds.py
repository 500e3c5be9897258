"""One name per kind of operator, whichever runtime ran it, so a device's per-op profile meets the harness's.

- ONNX Runtime's op types (the harness's profiles) go through op_deltas.op_family first (QLinearConv, FusedConv,
  ConvInteger -> Conv; QGemm -> Gemm), then ONNX_ALIASES merges the ops that TFLite runs as one (MatMul and Gemm
  are both a fully connected layer; GlobalAveragePool a mean over the spatial axes). A Conv whose groups equal its
  input channels is a depthwise convolution (per_op marks its node `depthwise`): DEPTHWISE.
- TFLite builtin node types (CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, ...; tensorflow/lite/builtin_ops.h
  spelled as the op profiler prints them) through TFLITE_KINDS.
- XNNPACK's operators, which the op profiler lists when the XNNPACK delegate runs the graph
  (`Convolution (NHWC, QC8) DWConv`, `Fully Connected (NC, F32) GEMM`, `Convert (NC, F32, QS8)`; xnnpack's
  operator names and their layout and data types), through XNNPACK_KINDS on the name before the parenthesis.

- ncnn's layer types (Convolution, ConvolutionDepthWise, InnerProduct, ...; ncnn's layer registry), when the
  harness ran the model on ncnn, through NCNN_KINDS; ConvolutionDepthWise is every grouped convolution, a depthwise
  one only when its groups equal its channels (the layer's `depthwise` mark). Pooling stays Pooling: its type (max or
  average) is a parameter.

A type none of these know keeps its own name: it is shown, on its own row.
"""

from __future__ import annotations

import re

from harness.analysis.op_deltas import op_family

DEPTHWISE = "DepthwiseConv"
ONNX_ALIASES = {"MatMul": "Gemm", "GlobalAveragePool": "AveragePool", "ReduceMean": "AveragePool",
                "GlobalMaxPool": "MaxPool", "Flatten": "Reshape", "Squeeze": "Reshape", "Unsqueeze": "Reshape"}
TFLITE_KINDS = {
    "CONV_2D": "Conv", "DEPTHWISE_CONV_2D": DEPTHWISE, "TRANSPOSE_CONV": "ConvTranspose", "FULLY_CONNECTED": "Gemm",
    "BATCH_MATMUL": "Gemm", "AVERAGE_POOL_2D": "AveragePool", "MEAN": "AveragePool", "MAX_POOL_2D": "MaxPool",
    "ADD": "Add", "SUB": "Sub", "MUL": "Mul", "DIV": "Div", "RESHAPE": "Reshape", "SQUEEZE": "Reshape",
    "EXPAND_DIMS": "Reshape", "SOFTMAX": "Softmax", "CONCATENATION": "Concat", "PAD": "Pad", "PADV2": "Pad",
    "QUANTIZE": "QuantizeLinear", "DEQUANTIZE": "DequantizeLinear", "RELU": "Relu", "RELU6": "Clip",
    "LOGISTIC": "Sigmoid", "TANH": "Tanh", "HARD_SWISH": "HardSwish", "LEAKY_RELU": "LeakyRelu",
    "RESIZE_BILINEAR": "Resize", "RESIZE_NEAREST_NEIGHBOR": "Resize", "TRANSPOSE": "Transpose",
    "STRIDED_SLICE": "Slice", "SLICE": "Slice", "GATHER": "Gather",
}
XNNPACK_KINDS = {
    "convolution": "Conv", "deconvolution": "ConvTranspose", "fully connected": "Gemm",
    "batch matrix multiply": "Gemm", "average pooling": "AveragePool", "global average pooling": "AveragePool",
    "mean": "AveragePool", "max pooling": "MaxPool", "add": "Add", "subtract": "Sub", "multiply": "Mul",
    "divide": "Div", "copy": "Reshape", "softmax": "Softmax", "constant pad": "Pad", "clamp": "Clip",
    "sigmoid": "Sigmoid", "tanh": "Tanh", "hardswish": "HardSwish", "leaky relu": "LeakyRelu",
    "resize bilinear": "Resize", "transpose": "Transpose", "slice": "Slice",
}
NCNN_KINDS = {
    "Convolution": "Conv", "ConvolutionDepthWise": "Conv", "Deconvolution": "ConvTranspose", "InnerProduct": "Gemm",
    "Gemm": "Gemm", "MatMul": "Gemm", "ReLU": "Relu", "Clip": "Clip", "Sigmoid": "Sigmoid", "TanH": "Tanh",
    "HardSwish": "HardSwish", "HardSigmoid": "HardSigmoid", "Softmax": "Softmax", "Eltwise": "Add",
    "Concat": "Concat", "Padding": "Pad", "Permute": "Transpose", "Interp": "Resize", "Flatten": "Reshape",
    "Reshape": "Reshape", "Crop": "Slice", "Slice": "Slice",
}
XNNPACK_NAME = re.compile(r"^(?P<name>[A-Za-z][A-Za-z ]*?) \((?P<types>[^)]*)\)(?: (?P<variant>\w+))?$")
FLOAT_TYPES = ("F32", "F16")


def _xnnpack_kind(found: re.Match[str]) -> str | None:
    """`Convolution (...) DWConv` is depthwise; `Convert (NC, F32, QS8)` quantizes, `(NC, QS8, F32)` dequantizes."""
    name = found["name"].lower()
    if name == "convert":
        types = [t.strip() for t in found["types"].split(",")]
        return "QuantizeLinear" if types[-2] in FLOAT_TYPES else "DequantizeLinear"
    if name == "convolution" and found["variant"] == "DWConv":
        return DEPTHWISE
    return XNNPACK_KINDS.get(name)


def device_kind(node_type: str) -> str:
    """The kind of a node type in a TFLite op profile (builtin or XNNPACK operator)."""
    if node_type in TFLITE_KINDS:
        return TFLITE_KINDS[node_type]
    found = XNNPACK_NAME.match(node_type)
    return (found and _xnnpack_kind(found)) or node_type


def harness_kind(op_type: str, depthwise: bool | None = None) -> str:
    """The kind of an ONNX Runtime op type or ncnn layer type; `depthwise` for a convolution whose groups equal its
    input channels."""
    family = NCNN_KINDS.get(op_type) or op_family(op_type)
    family = ONNX_ALIASES.get(family, family)
    return DEPTHWISE if family == "Conv" and depthwise else family
