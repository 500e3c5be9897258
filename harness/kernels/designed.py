"""Designed kernels: configurations drawn over each kind's space (harness.kernels.designed_graphs builds them as
ONNX graphs, alone and packed into probe graphs).

Real models leave parts of a device's kernel space sparse (grouped convolution only in RegNet, channel counts off the
engine's 8/16 blocking, pooling and concat in a few families), so `harness probe` also times kernels made for the
purpose (nn-Meter's designed kernels, Zhang et al. 2021), sampled stratified by kind and, within convolution, by
kernel size, stride and grouping. Rows an engine adds (ONNX Runtime's ReorderInput/ReorderOutput around an NCHWc
convolution) name no graph node; a pack gives each kernel tensor shapes no other kernel of it has, so those map back
by shape (harness.kernels.probed.owner).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

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
STEPS = (8, 16, 32, 49, 64, 100)
"""Steps of a recurrent layer's sequence: a keyword spotter's 49 frames of a second of audio, a sensor window's 100."""
RECURRENT_WIDTHS = (16, 32, 40, 64, 96, 128, 256)
"""A recurrent layer's input features (40 MFCCs, ...) and hidden units."""
UPSAMPLED = (7, 14, 28, 56)
"""Maps a decoder upsamples twofold (a transposed convolution or a resize): a segmentation head's and an
autoencoder's."""
LENGTHS = (32, 64, 101, 128, 250, 500, 1000, 4000, 16000)
"""Lengths a 1-D convolution runs over: a sensor window's 32 to 128 steps, a keyword spotter's 101 frames of MFCCs, raw
audio's 16,000 samples a second and what its strided first layers leave of it."""
LINE_CHANNELS = (1, 3, 9, 12, 16, 24, 32, 40, 64, 96, 128, 160, 256, 512)
"""Channels of a 1-D convolution: a waveform's one, an accelerometer's 3 to 9 axes, 40 MFCCs, and a network's widths."""
LINE_KERNELS = (1, 3, 5, 9, 13, 25, 80)
"""Taps of a 1-D convolution: pointwise, small, MatchboxNet's 13 to 25, and a raw-audio first layer's 80 (M5)."""
FRAMES = (2, 4, 8, 16)
"""Frames a 3-D convolution runs over: a video clip's 8 or 16, and what its temporal strides leave of them."""
OTHER_RANK_KINDS = ("conv1d", "conv3d")
"""Designed 1-D and 3-D convolutions (harness.kernels.graph.OTHER_RANK_CONV): dense or depthwise, their own kinds."""
MAX_MACS = 250_000_000
"""A designed kernel costs at most this many MACs (a 224x224 ResNet stage's worth), so one pack stays short."""
OVERHEAD_NODES = 3
OVERHEAD = "overhead"
WARM = "warm"
SINK = "sink"
PACK_KINDS = frozenset({OVERHEAD, WARM, SINK})
"""A pack's own nodes, no kernel's: its overhead nodes, and the nodes that write each kernel's inputs and read its
outputs (harness.kernels.designed_graphs._Builder)."""
CONV = "conv"
KINDS = (CONV, "gemm", "matmul", "maxpool", "avgpool", "globalpool", "add", "mul", "concat", "split", "shuffle", "se",
         "relu", "relu6", "hardswish", "sigmoid", "swish", "layernorm", "softmax", "attention", "gelu", "permute",
         "einsum", "gru", "lstm", "deconv", "resize", *OTHER_RANK_KINDS)
ENGINE_REFUSES = {"ncnn": frozenset({"einsum", "gru", "lstm"}), "litert": frozenset({"gru", "lstm"})}
"""Kinds an engine cannot run, left out of its probes and exports (engine_kinds): ncnn loads no Einsum layer of
windowed attention's 5-D products (`layer load_param einsum_0 failed`), and one such kernel fails its whole probe
graph; neither converter takes an ONNX GRU or LSTM (pnnx 20261020: `ncnn has no operator GRU`; onnx2tf 1.29 fails
at the node)."""
CONV_FUSED = frozenset({"relu", "relu6", "hardswish", "sigmoid", "swish"})
"""Activation kinds an engine may run inside the convolution before them (ncnn's activation_type)."""
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
    if kind in ("gru", "lstm"):
        return {"steps": rng.choice(STEPS), "input": rng.choice(RECURRENT_WIDTHS),
                "hidden": rng.choice(RECURRENT_WIDTHS)}
    if kind == "deconv":
        return {"kernel": rng.choice((2, 3, 4)), "cin": rng.choice(CHANNELS), "cout": rng.choice(CHANNELS),
                "hw": rng.choice(UPSAMPLED)}
    if kind == "resize":
        return {"c": rng.choice(CHANNELS), "hw": rng.choice(UPSAMPLED), "linear": rng.choice((0, 1))}
    if kind == "conv1d":
        return _depthwise_or_dense(rng, LINE_CHANNELS, kernel=rng.choice(LINE_KERNELS), stride=rng.choice((1, 2, 4)),
                                   length=rng.choice(LENGTHS))
    if kind == "conv3d":  # (3, 1, 1) and (1, 3, 3) as R(2+1)D factors a (3, 3, 3); (3, 7, 7) as a first layer
        return _depthwise_or_dense(rng, CHANNELS, kt=rng.choice((1, 3)), kernel=rng.choice((1, 3, 7)),
                                   tstride=rng.choice((1, 2)), stride=rng.choice((1, 2)), frames=rng.choice(FRAMES),
                                   hw=rng.choice(RESOLUTIONS[:-1]))
    if kind in ("layernorm", "softmax", "attention"):
        hidden = rng.choice(HIDDEN)
        return {"seq": rng.choice(SEQUENCES), "hidden": hidden, "heads": rng.choice((2, 4, 8)) if kind != "layernorm"
                else 1}
    return {"c": rng.choice(CHANNELS), "hw": rng.choice(RESOLUTIONS)}  # add, globalpool, the activations


def _depthwise_or_dense(rng: random.Random, channels: Sequence[int], **settings: int) -> dict[str, int]:
    """A 1-D or 3-D convolution's settings with its channels: depthwise (as many out as in) one time in three, as
    MatchboxNet and X3D run them, else dense."""
    cin, depthwise = rng.choice(channels), int(rng.random() < 1 / 3)
    return {**settings, "cin": cin, "cout": cin if depthwise else rng.choice(channels), "depthwise": depthwise}


def out_size(size: int, kernel: int, stride: int, pad: int | None = None) -> int:
    """An axis of `size` convolved by `kernel` taps at `stride`, padded by `pad` (else kernel // 2) on each side."""
    return (size + 2 * (kernel // 2 if pad is None else pad) - kernel) // stride + 1


def conv_axes(kernel: Kernel) -> list[tuple[int, int, int]]:
    """(size, taps, stride) of each spatial axis of a designed 1-D or 3-D convolution: what its graph is built with
    and its MACs are counted from."""
    s = kernel.settings
    if kernel.kind == "conv1d":
        return [(s["length"], s["kernel"], s["stride"])]
    return [(s["frames"], s["kt"], s["tstride"])] + [(s["hw"], s["kernel"], s["stride"])] * 2


def conv2d_axes(kernel: Kernel) -> list[tuple[int, int, int, int]]:
    """(size, taps, stride, pad) of a designed 2-D convolution's rows and columns: square (`hw`, `kernel`) unless its
    settings give the columns apart (`w`, `kw`), as a graph's own convolution on a spectrogram's 49×10 frames does,
    and padded by taps // 2 on each side unless they give the padding (`ph`, `pw`), as that graph's 4 columns padded
    by 1 do (harness.kernels.designed_for)."""
    s = kernel.settings
    kw = s.get("kw", s["kernel"])
    return [(s["hw"], s["kernel"], s["stride"], s.get("ph", s["kernel"] // 2)),
            (s.get("w", s["hw"]), kw, s["stride"], s.get("pw", kw // 2))]


def engine_kinds(engine: str) -> tuple[str, ...]:
    """The designed kinds `engine` runs (KINDS less ENGINE_REFUSES')."""
    return tuple(kind for kind in KINDS if kind not in ENGINE_REFUSES.get(engine, frozenset()))


def macs(kernel: Kernel) -> int:
    """Multiply-accumulates of a designed kernel (the work it is sized by; features come from the graph itself)."""
    s = kernel.settings
    if kernel.kind == CONV:
        rows_cols = conv2d_axes(kernel)
        return math.prod(out_size(*axis) * axis[1] for axis in rows_cols) * s["cout"] * (s["cin"] // s["groups"])
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
    if kernel.kind in ("gru", "lstm"):
        return s["steps"] * (3 if kernel.kind == "gru" else 4) * s["hidden"] * (s["input"] + s["hidden"])
    if kernel.kind == "deconv":
        return s["hw"] ** 2 * s["cin"] * s["cout"] * s["kernel"] ** 2
    if kernel.kind == "resize":
        return s["c"] * (2 * s["hw"]) ** 2
    if kernel.kind in OTHER_RANK_KINDS:
        axes = conv_axes(kernel)
        positions, taps = math.prod(out_size(*axis) for axis in axes), math.prod(axis[1] for axis in axes)
        return positions * s["cout"] * (1 if s["depthwise"] else s["cin"]) * taps
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
        if kernel.kind in OTHER_RANK_KINDS and config["depthwise"]:
            config["cout"] = config["cin"]
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
