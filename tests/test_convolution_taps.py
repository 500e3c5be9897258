"""A convolution's taps inside its input (node_facts' `taps_inside`), counted by onnxruntime itself: with every input
and weight 1 and no bias, each output element is the number of input elements its taps read, the padding being 0.
And the kernel features that count them: a blocked dilated dense 2-D convolution's MACs are of its taps inside, as
the engine's direct kernel skips the rest; an undilated, depthwise, 1-D or 3-D one keeps every tap's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from harness.kernels.features import dilated_dense, set_layout, skips_padding, with_features
from harness.kernels.graph import Graph, Kernel
from harness.models.facts import node_facts

CASES = {
    "atrous rate 12 on 14×14 (DeepLab's ASPP)": ((1, 8, 14, 14), 8, (3, 3), {"dilations": [12, 12], "pads": [12] * 4}),
    "rate 24, only the centre tap inside": ((1, 8, 14, 14), 8, (3, 3), {"dilations": [24, 24], "pads": [24] * 4}),
    "3×3 on 4×4, stride 1": ((1, 8, 4, 4), 8, (3, 3), {"pads": [1] * 4}),
    "5×5 stride 2, SAME_UPPER": ((1, 4, 9, 9), 8, (5, 5), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    "asymmetric pads": ((1, 4, 7, 10), 4, (3, 5), {"pads": [0, 2, 2, 1]}),
    "depthwise, rate 6": ((1, 8, 14, 14), 8, (3, 3), {"dilations": [6, 6], "pads": [6] * 4, "group": 8}),
    "1-D, kernel 80 stride 4 (raw audio)": ((1, 1, 400), 4, (80,), {"strides": [4], "pads": [8, 8]}),
    "3-D, 3×3×3 on 4×6×6": ((1, 2, 4, 6, 6), 4, (3, 3, 3), {"pads": [1] * 6}),
}


def _conv(path: Path, shape: tuple[int, ...], cout: int, kernel: tuple[int, ...], attrs: dict) -> Path:
    group = attrs.get("group", 1)
    weight = numpy_helper.from_array(np.ones((cout, shape[1] // group, *kernel), np.float32), "w")
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="conv", kernel_shape=list(kernel), **attrs)
    graph = helper.make_graph([node], "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [weight])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.mark.parametrize("case", CASES)
def test_taps_inside_are_those_the_engine_reads(tmp_path: Path, case: str) -> None:
    shape, cout, kernel, attrs = CASES[case]
    path = _conv(tmp_path / "conv.onnx", shape, cout, kernel, attrs)
    [y] = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": np.ones(shape,
                                                                                                   np.float32)})
    read_per_output = shape[1] // attrs.get("group", 1) * int(np.prod(kernel))
    counted = float(y.mean()) / read_per_output
    [conv] = node_facts(path)
    assert conv["taps_inside"] == pytest.approx(counted, rel=1e-6)
    assert conv["taps_inside"] < 1.0


def test_a_blocked_dilated_dense_2d_convolution_counts_only_its_taps_inside_as_work(tmp_path: Path) -> None:
    """At atrous rate 24 on a 14×14 map a dense convolution does a ninth of the MACs its shapes count (only the
    centre tap lands inside) where the engine runs it blocked, and all of them where it runs it plain. An undilated
    one, whose padding is a border its map's size tells, a depthwise one at rate 6 and a 1-D one are counted whole."""
    for case, counted in (("rate 24, only the centre tap inside", True), ("3×3 on 4×4, stride 1", False),
                          ("depthwise, rate 6", False), ("1-D, kernel 80 stride 4 (raw audio)", False)):
        shape, cout, kernel, attrs = CASES[case]
        graph = Graph.load(_conv(tmp_path / f"{case[:4]}.onnx", shape, cout, kernel, attrs))
        [node] = graph.nodes
        assert dilated_dense(node) is counted
        assert skips_padding(node) is (attrs.get("group", 1) == 1 and len(shape) == 4)
        for blocked in (False, True):
            features = with_features(graph, Kernel("DepthwiseConv" if "group" in attrs else "Conv", [0])).features
            set_layout(features, blocked, block=cout)  # as many channels as the block: no padding to it
            share = node["taps_inside"] if counted and blocked else 1.0
            assert features["macs"] == pytest.approx(node["macs"] * share)
    assert node_facts(tmp_path / "rate.onnx")[0]["taps_inside"] == pytest.approx(1 / 9)
