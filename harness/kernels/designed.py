"""Designed kernels: single-kernel ONNX graphs over a configuration space, and probe graphs that pack many of them.

Real models leave parts of a device's kernel space sparse (grouped convolution only in RegNet, channel counts off the
engine's 8/16 blocking, pooling and concat in a few families), so `harness probe` also times kernels made for the
purpose (nn-Meter's designed kernels, Zhang et al. 2021), sampled stratified by kind and, within convolution, by
kernel size, stride and grouping.

Timing one kernel per process would spend most of a 2-core board's budget on process start and engine load, so
`pack` puts many independent kernels into one probe graph, none feeding another (so none is fused with another), each
read by a node of the pack (_Builder) so that no engine prunes it. One PER_OP=1 run gives every kernel's time. Every
node of kernel `k0012_conv` is named `k0012_conv/...`: how a per-op row maps back to its kernel. A pack also holds
OVERHEAD_NODES trivial nodes (a Relu on one float, kind `overhead`), whose per-op time is the profiler's own cost per
node. Rows an engine adds (ONNX Runtime's ReorderInput/ReorderOutput around an NCHWc convolution) name no graph node;
a pack gives each kernel tensor shapes no other kernel of it has, so those map back by shape
(harness.kernels.probed.owner).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
"""LayerNormalization is an ONNX operator from opset 17; HardSwish from 14."""
CHANNELS = (8, 12, 16, 20, 24, 32, 40, 48, 64, 72, 96, 120, 128, 144, 160, 192, 240, 256, 320, 384, 480, 512)
"""Channel counts on and off the 8/16 blocking engines use (12, 20, 40, 72, 120, 144, 240, 480 are MobileNetV2 and
EfficientNet widths at 0.75x and 1x that fall between blocks)."""
RESOLUTIONS = (7, 14, 28, 56, 112)
SEQUENCES = (16, 32, 49, 64, 128, 197)
"""Tokens of a layer norm, softmax or attention: powers of two, and 49 (a 7×7 window: Swin, MaxViT) and 197 (ViT-B/16's
patches and class token), rows off the vector width whose remainder loops an engine runs too."""
HIDDEN = (64, 96, 128, 192, 256, 384, 512, 768)
"""Widths of a transformer's tokens: powers of two, Swin's and ConvNeXt's 96 to 768 (whose last stage's MLP, 768 to
3,072 for 49 tokens, reads 9.4 MB of weights) and ViT-B's 768."""
GEMM_ROWS = (1, 8, 49, 196)
"""Rows of a MatMul's input (tokens, or a feature map's positions); a Gemm is a classifier's head: one row, as at
batch 1 (its 2-D input's first dim is the batch to an engine such as ncnn)."""
GEMM_SIZES = (64, 128, 256, 512, 1000, 1024, 1280)
TOKENS = (16, 49, 196, 784, 3136)
"""A transformer MLP's rows: tokens of a ViT, of Swin's and ConvNeXt's stages (49 to 3,136 at 224×224)."""
GROUP_WIDTHS = (4, 8, 16, 24, 32, 48, 64)
"""Input channels a group of a grouped convolution (RegNet's 8–64, ResNeXt's 4): the width decides how an engine runs
it (onnxruntime blocks a group only where its channels fill the block; a RegNet's groups of 8 run plain at block 16,
about 7 times slower a MAC). A grouped kernel's width is drawn first, then its groups (GROUPED_CHANNELS): drawn from
the channel counts instead, widths that divide few of them (24, 48) came up least, and RegNetX-1.6GF runs 24."""
GROUPED_CHANNELS = 1024
"""A grouped convolution's channels go up to this many (ResNeXt-50's last stage, RegNetX-1.6GF's 912): its groups, 2
up to this over its width, are drawn log-uniformly, so channels are a width's multiple as networks' are (408, 912),
not one of CHANNELS."""
PERMUTES = ((0, 2, 3, 1), (0, 3, 1, 2), (0, 1, 3, 2), (0, 3, 2, 4, 1), (0, 4, 2, 1, 3))
"""Transposes that move the innermost axis (harness.kernels.graph.INNER_TRANSPOSE): NCHW to NHWC and back, and
attention's keys transposed per window (2 axes), and a C×H×W map's rows cut into windows, channels last, and back (4
axes; MaxViT's partitions of 6-D tensors permute 5, which an engine such as ncnn takes no input of)."""
EINSUMS = ("bghid,bghjd->bghij", "bghij,bghjd->bghid")
"""Windowed attention's two products as MaxViT writes them: queries by keys, then weights by values."""
MAX_MACS = 250_000_000
"""A designed kernel costs at most this many MACs (a 224x224 ResNet stage's worth), so one pack stays short."""
OVERHEAD_NODES = 3
OVERHEAD = "overhead"
WARM = "warm"
SINK = "sink"
PACK_KINDS = frozenset({OVERHEAD, WARM, SINK})
"""A pack's own nodes, no kernel's: its overhead nodes, and the nodes that write each kernel's inputs and read its
outputs (_Builder)."""
CONV = "conv"
KINDS = (CONV, "gemm", "matmul", "maxpool", "avgpool", "globalpool", "add", "mul", "concat", "split", "shuffle", "se",
         "relu", "relu6", "hardswish", "sigmoid", "swish", "layernorm", "softmax", "attention", "gelu", "permute",
         "einsum")
ENGINE_REFUSES = {"ncnn": frozenset({"einsum"})}
"""Kinds an engine cannot run, left out of its probes and exports (engine_kinds): ncnn loads no Einsum layer of
windowed attention's 5-D products (`layer load_param einsum_0 failed`), and one such kernel fails its whole probe
graph."""
CONV_WEIGHT = 4
"""Convolution is sampled this many times as often as any other kind: its space is the largest, and it carries most
of a CNN's time."""


@dataclass(frozen=True)
class Kernel:
    """One designed kernel: its name (unique in a probe, `k<index>_<kind>`), kind and configuration."""

    name: str
    kind: str
    config: tuple[tuple[str, int], ...]

    @property
    def settings(self) -> dict[str, int]:
        return dict(self.config)


def _conv_config(rng: random.Random, stratum: tuple[int, int, str]) -> dict[str, int]:
    kernel, stride, grouping = stratum
    cin = rng.choice(CHANNELS)
    if grouping == "depthwise":
        groups, cout = cin, cin
    elif grouping == "grouped":  # as ResNeXt and RegNet group them: as many channels out as in
        width = rng.choice(GROUP_WIDTHS)
        groups = round(math.exp(rng.uniform(math.log(2), math.log(GROUPED_CHANNELS // width))))
        cin = cout = width * groups
    else:
        groups, cout = 1, rng.choice(CHANNELS)
    return {"kernel": kernel, "stride": stride, "groups": groups, "cin": cin, "cout": cout,
            "hw": rng.choice(RESOLUTIONS)}


GROUPED_STRATA = [(3, 1, "grouped")] * 4 + [(3, 2, "grouped")] * 2 + [(1, 1, "grouped")] * 2
"""Grouped convolution as networks run it: 3×3 (ResNeXt, RegNet) at stride 1 and 2, and 1×1 (ShuffleNet V1), the 3×3
of stride 1 most. Drawn as often as each of the other groupings, across four kernel sizes, a 3-minute probe timed
four or five 3×3 grouped kernels among 28, and its regressor put RegNetX-1.6GF's (3×3, groups of 24) at 1.67 times
their time."""
CONV_STRATA = [(k, s, g) for k in (1, 3, 5, 7) for s in (1, 2) for g in ("dense", "depthwise")] + GROUPED_STRATA
"""(kernel size, stride, grouping) of convolution, drawn in turn; a stratum listed more than once comes up as often."""


def _config(kind: str, rng: random.Random, stratum: tuple[int, int, str] | None = None) -> dict[str, int]:
    """One configuration of `kind`, drawn from its space."""
    if kind == CONV:
        return _conv_config(rng, stratum or rng.choice(CONV_STRATA))
    if kind == "gelu":
        return {"rows": rng.choice(TOKENS), "cin": rng.choice(HIDDEN), "cout": 4 * rng.choice(HIDDEN)}
    if kind == "gemm" or kind == "matmul":
        rows = rng.choice(GEMM_ROWS) if kind == "matmul" else 1
        return {"rows": rows, "cin": rng.choice(GEMM_SIZES), "cout": rng.choice(GEMM_SIZES)}
    if kind in ("maxpool", "avgpool"):
        return {"kernel": rng.choice((2, 3)), "stride": 2, "c": rng.choice(CHANNELS), "hw": rng.choice(RESOLUTIONS)}
    if kind == "concat":
        return {"inputs": rng.choice((2, 3, 4)), "c": rng.choice(CHANNELS), "hw": rng.choice(RESOLUTIONS)}
    if kind == "split":
        return {"outputs": rng.choice((2, 3)), "c": rng.choice([c for c in CHANNELS if c % 6 == 0]),
                "hw": rng.choice(RESOLUTIONS)}
    if kind == "shuffle":
        return {"groups": 2, "c": rng.choice([c for c in CHANNELS if c % 2 == 0]), "hw": rng.choice(RESOLUTIONS)}
    if kind == "se":
        return {"c": rng.choice([c for c in CHANNELS if c >= 16]), "hw": rng.choice(RESOLUTIONS)}
    if kind == "mul":
        return {"c": rng.choice(CHANNELS), "hw": rng.choice(RESOLUTIONS), "broadcast": rng.choice((0, 1))}
    if kind == "permute":
        return {"c": rng.choice(CHANNELS), "window": rng.choice((4, 7, 8)), "blocks": rng.choice((1, 2, 4, 8)),
                "layout": rng.randrange(len(PERMUTES))}
    if kind == "einsum":
        return {"windows": rng.choice((1, 4, 16, 64)), "heads": rng.choice((1, 2, 4, 8)),
                "tokens": rng.choice((16, 49, 64)), "dim": rng.choice((16, 32, 64)), "layout": rng.randrange(2)}
    if kind in ("layernorm", "softmax", "attention"):
        hidden = rng.choice(HIDDEN)
        return {"seq": rng.choice(SEQUENCES), "hidden": hidden, "heads": rng.choice((2, 4, 8)) if kind != "layernorm"
                else 1}
    return {"c": rng.choice(CHANNELS), "hw": rng.choice(RESOLUTIONS)}  # add, globalpool, the activations


def engine_kinds(engine: str) -> tuple[str, ...]:
    """The designed kinds `engine` runs (KINDS less ENGINE_REFUSES')."""
    return tuple(kind for kind in KINDS if kind not in ENGINE_REFUSES.get(engine, frozenset()))


def macs(kernel: Kernel) -> int:
    """Multiply-accumulates of a designed kernel (the work it is sized by; features come from the graph itself)."""
    s = kernel.settings
    if kernel.kind == CONV:
        out = -(-s["hw"] // s["stride"])
        return out * out * s["cout"] * (s["cin"] // s["groups"]) * s["kernel"] ** 2
    if kernel.kind in ("gemm", "matmul", "gelu"):
        return s["rows"] * s["cin"] * s["cout"]
    if kernel.kind == "attention":
        return 2 * s["seq"] * s["seq"] * s["hidden"]
    if kernel.kind == "se":
        return s["c"] * s["hw"] ** 2 + s["c"] * (s["c"] // 4) * 2
    if kernel.kind == "concat":
        return s["inputs"] * s["c"] * s["hw"] ** 2
    if kernel.kind == "softmax":
        return s["heads"] * s["seq"] * s["seq"]
    if kernel.kind == "layernorm":
        return s["seq"] * s["hidden"]
    if kernel.kind == "permute":
        return s["c"] * (s["window"] * s["blocks"]) ** 2
    if kernel.kind == "einsum":
        return s["windows"] * s["heads"] * s["tokens"] ** 2 * s["dim"]
    return s.get("c", 1) * s.get("hw", 1) ** 2


def sample(count: int, seed: int, kinds: Sequence[str] = KINDS, start: int = 0) -> list[Kernel]:
    """`count` kernels, stratified: the kinds in turn (convolution CONV_WEIGHT times as often), and convolution's
    (kernel size, stride, grouping) strata in turn, each configuration drawn from the kind's space with
    random.Random(seed); one over MAX_MACS is drawn again. Named k<start + i>_<kind>. The same arguments give the same
    kernels."""
    rng = random.Random(seed)
    turns = [kind for kind in kinds for _ in range(CONV_WEIGHT if kind == CONV else 1)]
    strata = CONV_STRATA[:]
    rng.shuffle(strata)
    kernels: list[Kernel] = []
    convs = 0
    for index in range(count):
        kind = turns[index % len(turns)]
        stratum = strata[convs % len(strata)] if kind == CONV else None
        convs += kind == CONV
        for _ in range(100):
            config = _config(kind, rng, stratum)
            kernel = Kernel(f"k{start + index:04d}_{kind}", kind, tuple(sorted(config.items())))
            if macs(kernel) <= MAX_MACS:
                break
        kernels.append(kernel)
    return kernels


def near(kernel: Kernel, rng: random.Random, name: str) -> Kernel:
    """A neighbour of `kernel` in its space: one setting moved to another value of its kind (nn-Meter's adaptive
    sampling draws new configurations around those its predictor misses most); a grouped convolution moves its width
    or its groups, the other kept. A setting its stratum fixes (kernel size, stride), or drawn at the value it had,
    is drawn again: a neighbour is never the kernel itself (three in five of a grouped one's had been)."""
    stratum = _stratum(kernel)
    for _ in range(100):
        fresh = _config(kernel.kind, rng, stratum)
        key = rng.choice(sorted(fresh))
        config = {**kernel.settings, key: fresh[key]}
        if stratum == (config.get("kernel"), config.get("stride"), "depthwise"):
            config["cin"] = config["cout"] = config["groups"] = fresh["cin"]
        elif stratum is not None and stratum[2] == "grouped" and key in ("cin", "cout", "groups"):
            width, groups = kernel.settings["cin"] // kernel.settings["groups"], kernel.settings["groups"]
            if key == "groups":  # as many groups as another of its kind, of the same width; else the same groups
                groups = fresh["groups"]
            else:
                width = fresh["cin"] // fresh["groups"]
            config.update(cin=width * groups, cout=width * groups, groups=groups)
            if width * groups > GROUPED_CHANNELS:
                continue
        if kernel.kind == CONV and (config["cin"] % config["groups"] or config["cout"] % config["groups"]):
            continue
        moved = Kernel(name, kernel.kind, tuple(sorted(config.items())))
        if macs(moved) <= MAX_MACS and moved.config != kernel.config:
            return moved
    return Kernel(name, kernel.kind, kernel.config)


def _stratum(kernel: Kernel) -> tuple[int, int, str] | None:
    if kernel.kind != CONV:
        return None
    s = kernel.settings
    grouping = "dense" if s["groups"] == 1 else "depthwise" if s["groups"] == s["cin"] == s["cout"] else "grouped"
    return s["kernel"], s["stride"], grouping


class _Builder:
    """The nodes, inputs, outputs and weights of kernels, each name prefixed with its kernel's.

    In a probe graph (`pack`: its prefix, `p<index>`) a kernel runs as in a model: an Abs (kind WARM) writes each of
    its inputs just before it, and a ReduceMean to one value (kind SINK) reads each of its outputs, so the kernel reads
    an input still in the cache and writes a buffer the engine reuses, not a graph output of its own. Read from a
    cold graph input and written to graph outputs, memory-bound kernels ran 1.3–2.1 times slower on this host (a
    Relu 2.1, an Add 2.0, a Concat 1.5, a Softmax 1.4, a Split 1.3; convolutions and Gemms the same:
    benchmarks/pack_context.py), as no model's kernel does.
    Each such node is a kernel-like name of the pack's own (`p003w0012_warm/abs`), no kernel's."""

    def __init__(self, seed: int = 0, pack: str | None = None) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self.weights: list[onnx.TensorProto] = []
        self.rng = np.random.default_rng(seed)
        self.pack = pack
        self.in_context = False
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
        if kind == CONV:
            k, stride, groups, hw = s["kernel"], s["stride"], s["groups"], s["hw"]
            x = self.input(f"{p}/x", (1, s["cin"], hw, hw))
            w = self.weight(f"{p}/w", (s["cout"], s["cin"] // groups, k, k))
            b = self.weight(f"{p}/b", (s["cout"],))
            self.node("Conv", [x, w, b], [f"{p}/y"], f"{p}/conv", kernel_shape=[k, k], strides=[stride, stride],
                      pads=[k // 2] * 4, group=groups)
            out = -(-hw // stride)
            self.output(f"{p}/y", (1, s["cout"], out, out))
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


def probe_model(kernels: Iterable[Kernel], pack_index: int, in_context: bool = True) -> onnx.ModelProto:
    """Probe graph `probe_<pack_index>` holding `kernels` side by side, each with its own inputs and outputs, written
    and read by nodes of the pack (_Builder); `in_context=False`: the kernels' own tensors are the graph's inputs and
    outputs (what benchmarks/pack_context.py compares)."""
    builder = _Builder(pack=f"p{pack_index:03d}" if in_context else None)
    for kernel in kernels:
        builder.add(kernel)
    return builder.model(f"probe_{pack_index:03d}")


def write_probe(kernels: Sequence[Kernel], pack_index: int, folder: Path) -> Path:
    """Probe graph `probe_<pack_index>.onnx` (the kernels plus the overhead nodes) and each kernel's own graph,
    written to `folder`; returns the probe graph's path."""
    folder.mkdir(parents=True, exist_ok=True)
    for kernel in kernels:
        onnx.save(kernel_model(kernel), folder / f"{kernel.name}.onnx")
    path = folder / f"probe_{pack_index:03d}.onnx"
    onnx.save(probe_model([*kernels, *overhead_kernels(pack_index)], pack_index), path)
    return path
