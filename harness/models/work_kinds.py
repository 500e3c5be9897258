"""The work a graph asks of an engine, split by the kind of operator that does it (stdlib only).

Engines differ most in how fast they run one kind of operator relative to another: a phone's CPU runs a 3x3
convolution far slower, relative to a 1x1 one, than a desktop's does; a systolic array gets pooling for almost
nothing. A device's latency is then close to a sum over kinds of (work of that kind) x (the device's cost per unit
of it), which a few device measurements can fit (harness.calibration.fits, the `work` fit). Work is
multiply-accumulates for the weighted kinds and output elements for the others, counted for one sample.
"""

from __future__ import annotations

WORK_FACTS: tuple[str, ...] = (
    "work_conv_macs", "work_pointwise_macs", "work_depthwise_macs", "work_dense_macs", "work_pool_elements",
    "work_arithmetic_elements", "work_activation_elements", "work_other_elements",
)
"""Per-kind work of one sample: spatial (kernel > 1), pointwise (1x1) and depthwise convolutions' MACs, fully
connected MACs (a recurrent layer's included), then the output elements of pooling, elementwise arithmetic,
activations and every other node."""
_POOLS = frozenset({"AveragePool", "MaxPool", "GlobalAveragePool", "GlobalMaxPool", "ReduceMean", "ReduceMax",
                    "LpPool", "GlobalLpPool"})
_ARITHMETIC = frozenset({"Add", "Sub", "Mul", "Div", "Sum", "Mean", "Max", "Min", "Pow"})
_ACTIVATIONS = frozenset({"Relu", "Clip", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "LeakyRelu", "PRelu",
                          "Elu", "Selu", "Gelu", "Softmax", "LogSoftmax", "Erf", "Mish", "Softplus"})
_DENSE = frozenset({"Gemm", "MatMul", "MatMulInteger", "QLinearMatMul", "Einsum", "RNN", "GRU", "LSTM"})
"""Matrix products: fully connected layers, attention's, and a recurrent layer's at every step."""


def work_kind(op_type: str, weighted: bool, depthwise: bool, kernel_volume: int) -> str:
    """The WORK_FACTS name a node's work is counted under."""
    if weighted and op_type in _DENSE:
        return "work_dense_macs"
    if weighted:
        if depthwise:
            return "work_depthwise_macs"
        return "work_pointwise_macs" if kernel_volume == 1 else "work_conv_macs"
    if op_type in _POOLS:
        return "work_pool_elements"
    if op_type in _ARITHMETIC:
        return "work_arithmetic_elements"
    return "work_activation_elements" if op_type in _ACTIVATIONS else "work_other_elements"
