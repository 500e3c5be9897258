"""Designed kernels as ONNX graphs: each kernel alone, and probe graphs that pack many of them
(harness.kernels.designed draws their configurations).

Timing one kernel per process would spend most of a 2-core board's budget on process start and engine load, so
`probe_model` puts many independent kernels into one probe graph, none feeding another (so none is fused with
another), each read by a node of the pack (_Builder) so that no engine prunes it. One PER_OP=1 run gives every
kernel's time. Every node of kernel `k0012_conv` is named `k0012_conv/...`: how a per-op row maps back to its
kernel. A pack also holds OVERHEAD_NODES trivial nodes (a Relu on one float, kind `overhead`), whose per-op time is
the profiler's own cost per node.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from harness.kernels.designed import (
    CONV,
    CONV_FUSED,
    EINSUMS,
    OPSET,
    OTHER_RANK_KINDS,
    OVERHEAD,
    OVERHEAD_NODES,
    PERMUTES,
    SINK,
    WARM,
    Kernel,
    conv2d_axes,
    conv_axes,
    out_size,
)


class _Builder:
    """The nodes, inputs, outputs and weights of kernels, each name prefixed with its kernel's.

    In a probe graph (`pack`: its prefix, `p<index>`) a kernel runs as in a model: an Abs (kind WARM) writes each of
    its inputs just before it, and a ReduceMean to one value (kind SINK) reads each of its outputs, so the kernel reads
    an input still in the cache and writes a buffer the engine reuses, not a graph output of its own. Read from a
    cold graph input and written to graph outputs, memory-bound kernels ran 1.3–2.1 times slower on this host (a
    Relu 2.1, an Add 2.0, a Concat 1.5, a Softmax 1.4, a Split 1.3; convolutions and Gemms the same:
    benchmarks/pack_context.py), as no model's kernel does.
    Each such node is a kernel-like name of the pack's own (`p003w0012_warm/abs`), no kernel's.
    `conv_warm` (ncnn): a 4-D input is written by a depthwise 1×1 convolution instead, in the layout a model's
    convolution leaves it in. After an Abs, a Split ran as after no model's convolution (8 and 66 times slower at
    96×14×14 and 384×7×7, 3.7 times faster at 24×56×56; a ReduceMean of 384×7×7 249 against 5.2 µs); after the
    depthwise convolution, within 0.4 µs or 15% of its time after a 1×1 one. Not before an activation ncnn runs
    inside a convolution (CONV_FUSED): it would vanish into it."""

    def __init__(self, seed: int = 0, pack: str | None = None, conv_warm: bool = False) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self.weights: list[onnx.TensorProto] = []
        self.rng = np.random.default_rng(seed)
        self.pack = pack
        self.in_context = False
        self.layout_warm, self.conv_warm = conv_warm, False
        self.pack_nodes = 0

    def _pack_node(self, kind: str) -> str:
        self.pack_nodes += 1
        return f"{self.pack}{kind[0]}{self.pack_nodes:04d}_{kind}"

    def input(self, name: str, shape: Sequence[int]) -> str:
        if not self.in_context:
            self.inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape)))
            return name
        warm = self._pack_node(WARM)
        self.inputs.append(helper.make_tensor_value_info(f"{warm}/x", TensorProto.FLOAT, list(shape)))
        if self.conv_warm and len(shape) == 4:
            scale = numpy_helper.from_array(np.ones((shape[1], 1, 1, 1), dtype=np.float32), f"{warm}/w")
            self.weights.append(scale)
            self.node("Conv", [f"{warm}/x", scale.name], [name], f"{warm}/conv", group=shape[1])
        else:
            self.node("Abs", [f"{warm}/x"], [name], f"{warm}/abs")
        return name

    def output(self, name: str, shape: Sequence[int]) -> None:
        if not self.in_context:
            self.outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape)))
            return
        sink, rank = self._pack_node(SINK), len(shape)  # one layer to ncnn (a Slice of one element is two)
        self.node("ReduceMean", [name], [f"{sink}/y"], f"{sink}/mean", axes=list(range(rank)), keepdims=1)
        self.outputs.append(helper.make_tensor_value_info(f"{sink}/y", TensorProto.FLOAT, [1] * rank))

    def weight(self, name: str, shape: Sequence[int]) -> str:
        values = (self.rng.standard_normal(shape) * 0.1).astype(np.float32)
        self.weights.append(numpy_helper.from_array(values, name))
        return name

    def ints(self, name: str, values: Sequence[int]) -> str:
        self.weights.append(numpy_helper.from_array(np.asarray(values, dtype=np.int64), name))
        return name

    def scalar(self, name: str, value: float) -> str:
        self.weights.append(numpy_helper.from_array(np.array(value, dtype=np.float32), name))
        return name

    def node(self, op: str, inputs: Sequence[str], outputs: Sequence[str], name: str, **attrs: Any) -> None:
        self.nodes.append(helper.make_node(op, list(inputs), list(outputs), name=name, **attrs))

    def add(self, kernel: Kernel) -> None:
        """`kernel`'s nodes: every tensor and node named `<kernel>/...`."""
        p, s = kernel.name, kernel.settings
        kind = kernel.kind
        self.in_context = self.pack is not None and kind != OVERHEAD
        self.conv_warm = self.layout_warm and kind not in CONV_FUSED
        if kind == CONV:
            (rows, kh, stride, ph), (cols, kw, _, pw) = rows_cols = conv2d_axes(kernel)
            x = self.input(f"{p}/x", (1, s["cin"], rows, cols))
            weight = self.weight(f"{p}/w", (s["cout"], s["cin"] // s["groups"], kh, kw))
            b = self.weight(f"{p}/b", (s["cout"],))
            self.node("Conv", [x, weight, b], [f"{p}/y"], f"{p}/conv", kernel_shape=[kh, kw], strides=[stride, stride],
                      pads=[ph, pw, ph, pw], group=s["groups"])
            self.output(f"{p}/y", (1, s["cout"], *(out_size(*axis) for axis in rows_cols)))
        elif kind in ("gemm", "matmul"):
            x = self.input(f"{p}/x", (s["rows"], s["cin"]) if kind == "gemm" else (1, s["rows"], s["cin"]))
            if kind == "gemm":
                w, b = self.weight(f"{p}/w", (s["cout"], s["cin"])), self.weight(f"{p}/b", (s["cout"],))
                self.node("Gemm", [x, w, b], [f"{p}/y"], f"{p}/gemm", transB=1)
                self.output(f"{p}/y", (s["rows"], s["cout"]))
            else:
                self.node("MatMul", [x, self.weight(f"{p}/w", (s["cin"], s["cout"]))], [f"{p}/y"], f"{p}/matmul")
                self.output(f"{p}/y", (1, s["rows"], s["cout"]))
        elif kind in ("maxpool", "avgpool"):
            hw, k = s["hw"], s["kernel"]
            x = self.input(f"{p}/x", (1, s["c"], hw, hw))
            pads = [k // 2] * 4 if k == 3 else [0] * 4
            op = "MaxPool" if kind == "maxpool" else "AveragePool"
            self.node(op, [x], [f"{p}/y"], f"{p}/pool", kernel_shape=[k, k], strides=[2, 2], pads=pads)
            out = (hw + sum(pads[:2]) - k) // 2 + 1
            self.output(f"{p}/y", (1, s["c"], out, out))
        elif kind == "globalpool":
            x = self.input(f"{p}/x", (1, s["c"], s["hw"], s["hw"]))
            self.node("GlobalAveragePool", [x], [f"{p}/y"], f"{p}/pool")
            self.output(f"{p}/y", (1, s["c"], 1, 1))
        elif kind in ("add", "mul"):
            shape = (1, s["c"], s["hw"], s["hw"])
            other = (1, s["c"], 1, 1) if s.get("broadcast") else shape
            a, b = self.input(f"{p}/a", shape), self.input(f"{p}/b", other)
            self.node(kind.capitalize(), [a, b], [f"{p}/y"], f"{p}/{kind}")
            self.output(f"{p}/y", shape)
        elif kind == "concat":
            parts = [self.input(f"{p}/x{i}", (1, s["c"], s["hw"], s["hw"])) for i in range(s["inputs"])]
            self.node("Concat", parts, [f"{p}/y"], f"{p}/concat", axis=1)
            self.output(f"{p}/y", (1, s["c"] * s["inputs"], s["hw"], s["hw"]))
        elif kind == "split":
            x = self.input(f"{p}/x", (1, s["c"], s["hw"], s["hw"]))
            parts = [f"{p}/y{i}" for i in range(s["outputs"])]
            size = s["c"] // s["outputs"]
            self.node("Split", [x, self.ints(f"{p}/sizes", [size] * s["outputs"])], parts, f"{p}/split", axis=1)
            for part in parts:
                self.output(part, (1, size, s["hw"], s["hw"]))
        elif kind == "shuffle":
            c, hw, g = s["c"], s["hw"], s["groups"]
            x = self.input(f"{p}/x", (1, c, hw, hw))
            self.node("Reshape", [x, self.ints(f"{p}/split_shape", [1, g, c // g, hw, hw])], [f"{p}/r"],
                      f"{p}/reshape1")
            self.node("Transpose", [f"{p}/r"], [f"{p}/t"], f"{p}/transpose", perm=[0, 2, 1, 3, 4])
            self.node("Reshape", [f"{p}/t", self.ints(f"{p}/shape", [1, c, hw, hw])], [f"{p}/y"], f"{p}/reshape2")
            self.output(f"{p}/y", (1, c, hw, hw))
        elif kind == "se":
            c, hw = s["c"], s["hw"]
            x = self.input(f"{p}/x", (1, c, hw, hw))
            self.node("GlobalAveragePool", [x], [f"{p}/g"], f"{p}/pool")
            self.node("Conv", [f"{p}/g", self.weight(f"{p}/w1", (c // 4, c, 1, 1)), self.weight(f"{p}/b1", (c // 4,))],
                      [f"{p}/s1"], f"{p}/reduce")
            self.node("Relu", [f"{p}/s1"], [f"{p}/a1"], f"{p}/relu")
            self.node("Conv", [f"{p}/a1", self.weight(f"{p}/w2", (c, c // 4, 1, 1)), self.weight(f"{p}/b2", (c,))],
                      [f"{p}/s2"], f"{p}/expand")
            self.node("Sigmoid", [f"{p}/s2"], [f"{p}/gate"], f"{p}/sigmoid")
            self.node("Mul", [x, f"{p}/gate"], [f"{p}/y"], f"{p}/scale")
            self.output(f"{p}/y", (1, c, hw, hw))
        elif kind == "swish":  # x·σ(x) after the depthwise convolution that feeds it, as EfficientNet runs it
            c, hw = s["c"], s["hw"]
            x = self.input(f"{p}/x", (1, c, hw, hw))
            self.node("Conv", [x, self.weight(f"{p}/w", (c, 1, 3, 3)), self.weight(f"{p}/b", (c,))], [f"{p}/z"],
                      f"{p}/conv", kernel_shape=[3, 3], pads=[1] * 4, group=c)
            self.node("Sigmoid", [f"{p}/z"], [f"{p}/gate"], f"{p}/sigmoid")
            self.node("Mul", [f"{p}/z", f"{p}/gate"], [f"{p}/y"], f"{p}/mul")
            self.output(f"{p}/y", (1, c, hw, hw))
        elif kind in ("relu", "relu6", "hardswish", "sigmoid"):
            shape = (1, s["c"], s["hw"], s["hw"])
            x = self.input(f"{p}/x", shape)
            if kind == "relu6":
                self.node("Clip", [x, self.scalar(f"{p}/min", 0.0), self.scalar(f"{p}/max", 6.0)], [f"{p}/y"],
                          f"{p}/clip")
            else:
                op = {"relu": "Relu", "hardswish": "HardSwish", "sigmoid": "Sigmoid"}[kind]
                self.node(op, [x], [f"{p}/y"], f"{p}/{kind}")
            self.output(f"{p}/y", shape)
        elif kind == "layernorm":
            tokens = (1, s["seq"], s["hidden"])
            x = self.input(f"{p}/x", tokens)
            scale, bias = self.weight(f"{p}/gamma", (s["hidden"],)), self.weight(f"{p}/beta", (s["hidden"],))
            self.node("LayerNormalization", [x, scale, bias], [f"{p}/y"], f"{p}/layernorm", axis=-1)
            self.output(f"{p}/y", tokens)
        elif kind == "softmax":
            shape = (1, s["heads"], s["seq"], s["seq"])
            self.node("Softmax", [self.input(f"{p}/x", shape)], [f"{p}/y"], f"{p}/softmax", axis=-1)
            self.output(f"{p}/y", shape)
        elif kind == "attention":
            heads, seq, d = s["heads"], s["seq"], s["hidden"] // s["heads"]
            q, keys = self.input(f"{p}/q", (1, heads, seq, d)), self.input(f"{p}/k", (1, heads, d, seq))
            v = self.input(f"{p}/v", (1, heads, seq, d))
            self.node("MatMul", [q, keys], [f"{p}/scores"], f"{p}/qk")
            self.node("Softmax", [f"{p}/scores"], [f"{p}/probs"], f"{p}/softmax", axis=-1)
            self.node("MatMul", [f"{p}/probs", v], [f"{p}/y"], f"{p}/pv")
            self.output(f"{p}/y", (1, heads, seq, d))
        elif kind == "gelu":  # an MLP's first Linear and its GELU, as torch.onnx writes them below opset 20
            x = self.input(f"{p}/x", (1, s["rows"], s["cin"]))
            self.node("MatMul", [x, self.weight(f"{p}/w", (s["cin"], s["cout"]))], [f"{p}/z"], f"{p}/matmul")
            self.node("Add", [f"{p}/z", self.weight(f"{p}/b", (s["cout"],))], [f"{p}/h"], f"{p}/bias")
            self.node("Div", [f"{p}/h", self.scalar(f"{p}/sqrt2", math.sqrt(2.0))], [f"{p}/d"], f"{p}/div")
            self.node("Erf", [f"{p}/d"], [f"{p}/e"], f"{p}/erf")
            self.node("Add", [f"{p}/e", self.scalar(f"{p}/one", 1.0)], [f"{p}/a"], f"{p}/add")
            self.node("Mul", [f"{p}/h", f"{p}/a"], [f"{p}/m"], f"{p}/mul")
            self.node("Mul", [f"{p}/m", self.scalar(f"{p}/half", 0.5)], [f"{p}/y"], f"{p}/half_mul")
            self.output(f"{p}/y", (1, s["rows"], s["cout"]))
        elif kind == "permute":
            c, size, blocks, perm = s["c"], s["window"], s["blocks"], PERMUTES[s["layout"]]
            n = size * blocks
            dims = [(1, c, n, n), (1, n, n, c), (1, blocks * blocks, size * size, c), (1, c, n, blocks, size),
                    (1, blocks, n, size, c)][s["layout"]]
            self.node("Transpose", [self.input(f"{p}/x", dims)], [f"{p}/t"], f"{p}/transpose", perm=list(perm))
            flat = (1, math.prod(dims))  # read through a view, as networks do: a Reduce would take the permute away
            self.node("Reshape", [f"{p}/t", self.ints(f"{p}/shape", flat)], [f"{p}/y"], f"{p}/reshape")
            self.output(f"{p}/y", flat)
        elif kind == "einsum":
            g, h, t, d, scores = s["windows"], s["heads"], s["tokens"], s["dim"], s["layout"] == 0
            left, right = self.input(f"{p}/a", (1, g, h, t, d if scores else t)), self.input(f"{p}/b", (1, g, h, t, d))
            self.node("Einsum", [left, right], [f"{p}/y"], f"{p}/einsum", equation=EINSUMS[s["layout"]])
            self.output(f"{p}/y", (1, g, h, t, t if scores else d))
        elif kind in ("gru", "lstm"):  # one direction, as torch.onnx writes nn.GRU and nn.LSTM (a GRU's reset after)
            gates, hidden = (3 if kind == "gru" else 4), s["hidden"]
            x = self.input(f"{p}/x", (s["steps"], 1, s["input"]))
            w = self.weight(f"{p}/w", (1, gates * hidden, s["input"]))
            r, b = self.weight(f"{p}/r", (1, gates * hidden, hidden)), self.weight(f"{p}/b", (1, 2 * gates * hidden))
            reset = {"linear_before_reset": 1} if kind == "gru" else {}
            self.node(kind.upper(), [x, w, r, b], ["", f"{p}/h"], f"{p}/{kind}", hidden_size=hidden, **reset)
            self.output(f"{p}/h", (1, 1, hidden))
        elif kind == "deconv":  # twofold upsampling: kernel 2 unpadded, 3 with an output padding, 4 padded by 1
            k, hw = s["kernel"], s["hw"]
            x = self.input(f"{p}/x", (1, s["cin"], hw, hw))
            w, b = self.weight(f"{p}/w", (s["cin"], s["cout"], k, k)), self.weight(f"{p}/b", (s["cout"],))
            grown = {"output_padding": [1, 1]} if k == 3 else {}
            self.node("ConvTranspose", [x, w, b], [f"{p}/y"], f"{p}/deconv", kernel_shape=[k, k], strides=[2, 2],
                      pads=[0 if k == 2 else 1] * 4, **grown)
            self.output(f"{p}/y", (1, s["cout"], 2 * hw, 2 * hw))
        elif kind == "resize":
            c, hw = s["c"], s["hw"]
            x = self.input(f"{p}/x", (1, c, hw, hw))
            self.weights.append(numpy_helper.from_array(np.array([1.0, 1.0, 2.0, 2.0], np.float32), f"{p}/scales"))
            self.node("Resize", [x, "", f"{p}/scales"], [f"{p}/y"], f"{p}/resize",
                      mode="linear" if s["linear"] else "nearest")
            self.output(f"{p}/y", (1, c, 2 * hw, 2 * hw))
        elif kind in OTHER_RANK_KINDS:
            axes = conv_axes(kernel)
            sizes, kernel_shape, strides = ([axis[i] for axis in axes] for i in range(3))
            groups = s["cin"] if s["depthwise"] else 1
            x = self.input(f"{p}/x", (1, s["cin"], *sizes))
            w = self.weight(f"{p}/w", (s["cout"], s["cin"] // groups, *kernel_shape))
            self.node("Conv", [x, w, self.weight(f"{p}/b", (s["cout"],))], [f"{p}/y"], f"{p}/conv",
                      kernel_shape=kernel_shape, strides=strides, pads=[k // 2 for k in kernel_shape] * 2,
                      group=groups)
            self.output(f"{p}/y", (1, s["cout"], *(out_size(*axis) for axis in axes)))
        elif kind == OVERHEAD:
            self.node("Relu", [self.input(f"{p}/x", (1, 1, 1, 1))], [f"{p}/y"], f"{p}/relu")  # ncnn: 4-D, one value
            self.output(f"{p}/y", (1, 1, 1, 1))
        else:
            raise ValueError(f"unknown designed kernel kind {kind!r}")

    def model(self, name: str) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, name, self.inputs, self.outputs, self.weights)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="harness probe")
        onnx.checker.check_model(model)
        return model


def kernel_model(kernel: Kernel) -> onnx.ModelProto:
    """`kernel` alone, as a graph of its own (its nodes named as in any probe graph that holds it)."""
    builder = _Builder()
    builder.add(kernel)
    return builder.model(kernel.name)


def overhead_kernels(pack_index: int) -> list[Kernel]:
    return [Kernel(f"p{pack_index:03d}o{i}_{OVERHEAD}", OVERHEAD, ()) for i in range(OVERHEAD_NODES)]


def probe_model(kernels: Iterable[Kernel], pack_index: int, in_context: bool = True,
                conv_warm: bool = False) -> onnx.ModelProto:
    """Probe graph `probe_<pack_index>` holding `kernels` side by side, each with its own inputs and outputs, written
    and read by nodes of the pack (_Builder; `conv_warm` there); `in_context=False`: the kernels' own tensors are the
    graph's inputs and outputs (what benchmarks/pack_context.py compares)."""
    builder = _Builder(pack=f"p{pack_index:03d}" if in_context else None, conv_warm=conv_warm)
    for kernel in kernels:
        builder.add(kernel)
    return builder.model(f"probe_{pack_index:03d}")


def write_probe(kernels: Sequence[Kernel], pack_index: int, folder: Path, engine: str) -> Path:
    """Probe graph `probe_<pack_index>.onnx` (the kernels plus the overhead nodes) for `engine`, and each kernel's own
    graph, written to `folder`; returns the probe graph's path."""
    folder.mkdir(parents=True, exist_ok=True)
    for kernel in kernels:
        onnx.save(kernel_model(kernel), folder / f"{kernel.name}.onnx")
    path = folder / f"probe_{pack_index:03d}.onnx"
    onnx.save(probe_model([*kernels, *overhead_kernels(pack_index)], pack_index, conv_warm=engine == "ncnn"), path)
    return path
