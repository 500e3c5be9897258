"""Whether an engine spends time on a convolution's taps that land in its padding: the same convolution timed at
dilation 1 and at a dilation that puts most of its taps past the map (DeepLab's atrous rates on a 14×14 map), beside
the share of its taps inside its input at each (harness.models.facts node_facts' `taps_inside`).

    .venv/bin/python benchmarks/padding_taps.py [--inferences 200]

A time ratio near the taps' ratio says the engine skips the padding (its work is the taps inside: a kernel feature
counts a dense 2-D convolution's MACs so, harness.kernels.features.skips_padding); near 1, it computes every tap.
Each convolution runs in its own onnxruntime session (one thread), the two dilations one after the other, each the
median of `--inferences` timed runs after 20 untimed.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from _common import print_table, write_report
from onnx import TensorProto, helper, numpy_helper

from harness.models.facts import node_facts

CASES = (
    ("dense 2-D, 960→256 3×3 on 14×14 (ASPP)", (1, 960, 14, 14), 256, 1, 24),
    ("dense 2-D, 64→64 3×3 on 28×28", (1, 64, 28, 28), 64, 1, 30),
    ("dense 2-D, 3→64 3×3 on 56×56 (a first layer)", (1, 3, 56, 56), 64, 1, 60),
    ("depthwise 2-D, 256 3×3 on 28×28", (1, 256, 28, 28), 256, 256, 30),
    ("grouped 2-D, 64→64 in 8 groups 3×3 on 14×14", (1, 64, 14, 14), 64, 8, 16),
    ("dense 1-D, 64→64 kernel 3 over 1,000", (1, 64, 1000), 64, 1, 1000),
    ("dense 3-D, 32→32 3×3×3 on 8×28×28", (1, 32, 8, 28, 28), 32, 1, 30),
)
"""(label, input shape, output channels, groups, the dilation that puts taps past the map)."""


def convolution(path: Path, shape: tuple[int, ...], cout: int, groups: int, dilation: int) -> Path:
    """One convolution of kernel 3 on every spatial axis, padded to keep its size, at `dilation`."""
    spatial = len(shape) - 2
    weight = np.random.default_rng(0).standard_normal((cout, shape[1] // groups, *[3] * spatial)).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3] * spatial, dilations=[dilation] * spatial,
                            pads=[dilation] * 2 * spatial, group=groups)
    graph = helper.make_graph([node], "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(weight, "w")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def median_ms(path: Path, shape: tuple[int, ...], inferences: int) -> float:
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    feeds = {"x": np.random.default_rng(1).standard_normal(shape).astype(np.float32)}
    for _ in range(20):
        session.run(None, feeds)
    times = []
    for _ in range(inferences):
        start = time.perf_counter()
        session.run(None, feeds)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--inferences", type=int, default=200)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-padding-taps-") as tmp:
        for label, shape, cout, groups, dilation in CASES:
            measured = {}
            for rate in (1, dilation):
                path = convolution(Path(tmp) / f"conv_{rate}.onnx", shape, cout, groups, rate)
                measured[rate] = (median_ms(path, shape, args.inferences), node_facts(path)[0]["taps_inside"])
            (plain_ms, plain_share), (far_ms, far_share) = measured[1], measured[dilation]
            rows.append({"convolution": label, "dilation": dilation, "ms at 1": plain_ms, "ms dilated": far_ms,
                         "time ratio": far_ms / plain_ms, "taps inside ratio": far_share / plain_share})
    print_table(f"a convolution's padding taps, onnxruntime {ort.__version__}, one thread", rows)
    write_report("padding_taps", rows, [])


if __name__ == "__main__":
    main()
