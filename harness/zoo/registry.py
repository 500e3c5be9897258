"""The zoo's name grammar, torch-free: deciding whether MODEL names a zoo model must not cost a torch import.

A name is `<family>[_<parameters>][_int8_dynamic|_int8_static]`; each family below owns one name template
(`mobilenet_v2_{alpha}_{res}`), the allowed values of its parameters and the input it is exported with.
Decimal parameters are canonicalised (`mobilenet_v2_1_224` is `mobilenet_v2_1.0_224`), so one model has one
cache entry.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any

from harness.core.errors import ModelError
from harness.zoo import nb201_cells
from harness.zoo.signature import DynamicDim, Signature, ZooInput

QUANT_SUFFIXES = {"_int8_dynamic": "dynamic", "_int8_static": "static"}
_DECIMAL = r"\d+(?:\.\d+)?"
# Resolutions the families named with a <res> accept: their stride is 32 and they pool adaptively.
_RES_MIN, _RES_MAX, _RES_STEP = 32, 640, 32
IMAGENET_CLASSES = 1000
CIFAR_CLASSES = 10
KINETICS_CLASSES = 600  # Efficient-3DCNNs' default head (Kinetics-600).
VIDEO_CLIP = (16, 112, 112)  # frames, height, width: the Efficient-3DCNNs benchmark input.
EFFICIENTNET_LITE_RES = {"0": 224, "1": 240, "2": 260, "3": 280, "4": 300}
"""The input size each EfficientNet-Lite version is built and published at (Google's Lite builder)."""
BERT_SIZES = {"tiny": (2, 128, 2, 512), "mini": (4, 256, 4, 1024), "small": (4, 512, 8, 2048),
              "medium": (8, 512, 8, 2048)}
"""Layers, hidden width, attention heads and feed-forward width of the compact BERTs of Turc et al. 2019 (the
google-research/bert miniatures; heads = hidden / 64, feed-forward = 4 x hidden)."""
BERT_VOCAB, BERT_MAX_POSITIONS = 30522, 512


def canonical_decimal(value: float) -> str:
    """0.5 -> "0.5", 1 -> "1.0": one spelling per value."""
    text = f"{value:.2f}".rstrip("0")
    return text + "0" if text.endswith(".") else text


@dataclass(frozen=True)
class Family:
    """One architecture family: its name template, allowed values, published variants and provenance."""

    key: str
    template: str
    source: str
    choices: dict[str, tuple[str, ...]]
    listed: tuple[dict[str, str], ...]
    description: str
    builder: str = "torch"
    """What builds it: "torch" (the zoo extra, then torch's ONNX exporter) or "onnx" (an ONNX graph written
    directly, with the core install)."""
    input_shape: tuple[int, ...] | None = None
    """The exported input (batch 1) of a family whose input is neither an image of its <res> nor 3 x 224 x 224."""
    classes: int | None = None
    """Its classes, or the width of its output where it does not classify (an autoencoder's reconstruction)."""
    signature: Signature | None = None
    """Named inputs and outputs, for a family that is not one float `input` (see Signature)."""

    @property
    def pattern(self) -> str:
        """The template with each {parameter} turned into a named group (decimals are canonicalised later)."""
        parts = re.split(r"\{(\w+)\}", self.template)
        parts[::2] = [re.escape(literal) for literal in parts[::2]]  # a template's own dots are literal
        for index in range(1, len(parts), 2):
            key = parts[index]
            options = self.choices.get(key)
            if options is None:
                value = r"\d+"
            elif any("." in option for option in options):
                value = _DECIMAL
            else:
                value = "|".join(options)
            parts[index] = f"(?P<{key}>{value})"
        return "".join(parts)

    @property
    def grammar(self) -> str:
        return self.template.replace("{", "<").replace("}", ">")

    def compose(self, params: dict[str, str]) -> str:
        return self.template.format(**params)

    def match(self, base: str) -> dict[str, str] | None:
        found = re.fullmatch(self.pattern, base)
        return None if found is None else dict(found.groupdict())


@dataclass(frozen=True)
class ZooSpec:
    """A validated zoo name: the family, its canonical parameters and the exported input shape."""

    name: str
    family: str
    params: dict[str, str]
    input_shape: tuple[int, ...]
    num_classes: int
    """Classes, or the width of the (first) output of a model that does not classify: the autoencoder's 640
    reconstructed features, a BERT's hidden width."""
    quant: str | None
    signature: Signature | None = None
    """Named inputs and outputs where the model is not one float `input` with a dynamic batch; `input_shape` is then
    its first input at batch 1 and every dynamic dim at its default."""

    @property
    def base_name(self) -> str:
        """The float model a quantized variant is made from (the name itself otherwise)."""
        return self.name.removesuffix(f"_int8_{self.quant}") if self.quant else self.name

    def as_dict(self) -> dict[str, Any]:
        """Part of every export's cache key: a model without a signature keeps exactly these six keys."""
        fields = {
            "name": self.name,
            "family": self.family,
            "values": dict(self.params),  # the name's values; "params" elsewhere means a parameter count
            "input_shape": list(self.input_shape),
            "num_classes": self.num_classes,
            "quant": self.quant,
        }
        if self.signature is not None:
            fields["signature"] = self.signature.as_dict()
        return fields

    def input_text(self) -> str:
        """The input as `harness zoo list` shows it: 1x3x224x224, or the signature's named inputs."""
        return self.signature.describe() if self.signature else "x".join(map(str, self.input_shape))


def _grid(**values: tuple[str, ...]) -> tuple[dict[str, str], ...]:
    """Every combination of the listed values, in order."""
    return tuple(dict(zip(values, combo, strict=True)) for combo in itertools.product(*values.values()))


_TORCHVISION = "torchvision"
# Köpüklü et al., "Resource Efficient 3D Convolutional Neural Networks", ICCVW 2019.
_EFFICIENT_3D = "hand-written after Efficient-3DCNNs (Köpüklü et al. 2019)"
_MLPERF_TINY = "hand-written after the MLPerf Tiny reference model (Banbury et al. 2021; mlcommons/tiny)"
_BERT_SIGNATURE = Signature(
    inputs=(ZooInput("input_ids", ("batch", "seq"), "int64"), ZooInput("attention_mask", ("batch", "seq"), "int64")),
    outputs=("last_hidden_state", "pooler_output"),
    dims=(DynamicDim("seq", 128, max=BERT_MAX_POSITIONS),),
)
SSDLITE_CLASSES = 91  # COCO's 90 category ids and the background, as torchvision's detection models count them
_SSDLITE_SIGNATURE = Signature(
    inputs=(ZooInput("images", ("batch", 3, "height", "width")),),
    outputs=("bbox_regression", "cls_logits"),
    dims=(DynamicDim("height", 320, min=32), DynamicDim("width", 320, min=32)),
)

NB201_REFERENCE = (11982, 431, 55, 9, 14451, 8636, 9881, 13479, 6196, 1462)
"""The ten NAS-Bench-201 architectures HELP measures on every device: the ones `harness zoo list` shows."""

FAMILIES: tuple[Family, ...] = (
    Family(
        key="mobilenet_v1",
        template="mobilenet_v1_{alpha}_{res}",
        source="hand-written after Howard et al. 2017 (not in torchvision)",
        choices={"alpha": ("0.25", "0.5", "0.75", "1.0")},
        listed=_grid(alpha=("0.25", "0.5", "0.75", "1.0"), res=("128", "160", "192", "224")),
        description="MobileNetV1, width multiplier alpha, input res x res",
    ),
    Family(
        key="mobilenet_v2",
        template="mobilenet_v2_{alpha}_{res}",
        source=_TORCHVISION,
        choices={"alpha": ("0.25", "0.35", "0.5", "0.75", "1.0", "1.3", "1.4", "1.5", "2.0")},
        listed=(*_grid(alpha=("0.25", "0.5", "0.75", "1.0", "1.4"), res=("96", "128", "160", "192", "224")),
                *_grid(alpha=("1.5", "2.0"), res=("224",))),
        description="MobileNetV2, width multiplier alpha, input res x res",
    ),
    Family(
        key="mnasnet",
        template="mnasnet_{alpha}_{res}",
        source=_TORCHVISION,
        choices={"alpha": ("0.5", "0.75", "1.0", "1.3")},
        # The variants TFLite's hosted models publish latencies for.
        listed=(*_grid(alpha=("0.5", "0.75"), res=("224",)),
                *_grid(alpha=("1.0",), res=("96", "128", "160", "192", "224")), {"alpha": "1.3", "res": "224"}),
        description="MnasNet (B1, as torchvision builds it), depth multiplier alpha, input res x res",
    ),
    Family(
        key="squeezenet",
        template="squeezenet{version}",
        source=_TORCHVISION,
        choices={"version": ("1_0", "1_1")},
        listed=_grid(version=("1_0", "1_1")),
        description="SqueezeNet 1.0 / 1.1, 224 x 224",
    ),
    Family(
        key="shufflenet_v2",
        template="shufflenet_v2_x{width}",
        source="torchvision (0.25x and 0.33x: its ShuffleNetV2 with PaddleClas's stage widths)",
        choices={"width": ("0_25", "0_33", "0_5", "1_0", "1_5", "2_0")},
        listed=_grid(width=("0_25", "0_33", "0_5", "1_0", "1_5", "2_0")),
        description="ShuffleNetV2 at width 0.25x..2.0x, 224 x 224",
    ),
    Family(
        key="resnet",
        template="resnet{depth}",
        source=_TORCHVISION,
        choices={"depth": ("18", "50")},
        listed=_grid(depth=("18", "50")),
        description="ResNet-18 / ResNet-50, 224 x 224",
    ),
    Family(
        key="inception_v1",
        template="inception_v1",
        source="torchvision (googlenet)",
        choices={},
        listed=({},),
        description="Inception-v1 (GoogLeNet), 224 x 224",
    ),
    Family(
        key="inception_v3",
        template="inception_v3",
        source=_TORCHVISION,
        choices={},
        listed=({},),
        description="Inception-v3, 299 x 299",
    ),
    Family(
        key="mobilenet_v3",
        template="mobilenet_v3_{size}_{alpha}_{res}",
        source="torchvision's MobileNetV3 blocks, thinned as the paper's reference code does (Howard et al. 2019)",
        choices={"size": ("large", "small"), "alpha": ("0.35", "0.5", "0.75", "1.0", "1.25")},
        listed=_grid(size=("large", "small"), alpha=("0.35", "0.5", "0.75", "1.0", "1.25"), res=("224",)),
        description="MobileNetV3-Large / -Small, width multiplier alpha, input res x res",
    ),
    Family(
        key="efficientnet",
        template="efficientnet_b{version}",
        source=_TORCHVISION,
        choices={"version": ("0",)},
        listed=({"version": "0"},),
        description="EfficientNet-B0, 224 x 224",
    ),
    Family(
        key="efficientnet_lite",
        template="efficientnet_lite{version}",
        source="hand-written after Google's EfficientNet-Lite builder (tensorflow/tpu)",
        choices={"version": tuple(EFFICIENTNET_LITE_RES)},
        listed=_grid(version=tuple(EFFICIENTNET_LITE_RES)),
        description="EfficientNet-Lite0..4 at their own resolution (224, 240, 260, 280, 300)",
    ),
    Family(
        key="regnet_y",
        template="regnet_y_{size}",
        source=_TORCHVISION,
        choices={"size": ("400mf",)},
        listed=({"size": "400mf"},),
        description="RegNetY-400MF, 224 x 224",
    ),
    Family(
        key="ghostnet",
        template="ghostnet_{width}_{res}",
        source="hand-written after Han et al. 2020 (GhostNet) and its reference code",
        choices={"width": ("0.5", "1.0", "1.3")},
        listed=_grid(width=("0.5", "1.0", "1.3"), res=("224",)),
        description="GhostNet, width multiplier width, input res x res",
    ),
    Family(
        key="alexnet",
        template="alexnet",
        source=_TORCHVISION,
        choices={},
        listed=({},),
        description="AlexNet (torchvision's single-tower variant), 224 x 224",
    ),
    Family(
        key="vgg",
        template="vgg{depth}",
        source=_TORCHVISION,
        choices={"depth": ("16",)},
        listed=({"depth": "16"},),
        description="VGG-16 (configuration D, no batch norm), 224 x 224",
    ),
    Family(
        key="squeezenet3d",
        template="squeezenet3d_{version}",
        source=_EFFICIENT_3D,
        choices={"version": ("1.0", "1.1")},
        listed=_grid(version=("1.0", "1.1")),
        description="3D SqueezeNet, clip 16 x 112 x 112, 600 classes",
    ),
    Family(
        key="shufflenet_v2_3d",
        template="shufflenet_v2_3d_{width}",
        source=_EFFICIENT_3D,
        choices={"width": ("0.25", "0.5", "1.0", "1.5", "2.0")},
        listed=_grid(width=("0.25", "0.5", "1.0", "1.5", "2.0")),
        description="3D ShuffleNetV2, clip 16 x 112 x 112, 600 classes",
    ),
    Family(
        key="mobilenet_v2_3d",
        template="mobilenet_v2_3d_{width}",
        source=_EFFICIENT_3D,
        choices={"width": ("0.2", "0.45", "0.7", "1.0")},
        listed=_grid(width=("0.2", "0.45", "0.7", "1.0")),
        description="3D MobileNetV2, clip 16 x 112 x 112, 600 classes",
    ),
    Family(
        key="kws_dscnn",
        template="kws_dscnn",
        source=_MLPERF_TINY,
        choices={},
        listed=({},),
        description="MLPerf Tiny keyword spotting: DS-CNN (Zhang et al. 2017) on 49 x 10 MFCCs, 12 classes",
        input_shape=(1, 1, 49, 10),
        classes=12,
    ),
    Family(
        key="vww_mobilenet_v1",
        template="vww_mobilenet_v1_0.25_96",
        source=_MLPERF_TINY,
        choices={},
        listed=({},),
        description="MLPerf Tiny visual wake words: MobileNetV1 0.25 at 96 x 96, 2 classes (person, no person)",
        input_shape=(1, 3, 96, 96),
        classes=2,
    ),
    Family(
        key="resnet8_cifar10",
        template="resnet8_cifar10",
        source=_MLPERF_TINY,
        choices={},
        listed=({},),
        description="MLPerf Tiny image classification: ResNet-8 (16, 32, 64 channels), CIFAR-10 32 x 32, 10 classes",
        input_shape=(1, 3, 32, 32),
        classes=CIFAR_CLASSES,
    ),
    Family(
        key="ad_fc_autoencoder",
        template="ad_fc_autoencoder",
        source=_MLPERF_TINY,
        choices={},
        listed=({},),
        description="MLPerf Tiny anomaly detection: fully connected autoencoder (DCASE 2020 baseline) on 640 "
                    "log-mel features (5 frames x 128, ToyADMOS), output the 640 reconstructed",
        input_shape=(1, 640),
        classes=640,
    ),
    Family(
        key="bert",
        template="bert_{size}",
        source="hand-written after BERT (Devlin et al. 2019) at the compact sizes of Turc et al. 2019",
        choices={"size": tuple(BERT_SIZES)},
        listed=_grid(size=tuple(BERT_SIZES)),
        description="BERT encoder (explicit MatMul attention): input_ids and attention_mask [batch, seq] int64, "
                    "outputs the last hidden state and the pooled [CLS]; tiny 2x128, mini 4x256, small 4x512, "
                    "medium 8x512 (layers x hidden)",
        signature=_BERT_SIGNATURE,
    ),
    Family(
        key="ssdlite",
        template="ssdlite320_mobilenet_v3_large",
        source="torchvision (ssdlite320_mobilenet_v3_large: its backbone and head only)",
        choices={},
        listed=({},),
        description="SSDLite320 with MobileNetV3-Large, backbone and head only: images [batch, 3, height, width] "
                    "(exported at 320 x 320) to raw box regressions and class logits per anchor; anchor decoding "
                    "and NMS are the caller's",
        classes=SSDLITE_CLASSES,
        signature=_SSDLITE_SIGNATURE,
    ),
    Family(
        key="nb201",
        template="nb201_{index}",
        source="hand-written after Dong & Yang 2020 (NAS-Bench-201), as ONNX",
        choices={},
        listed=tuple({"index": str(index)} for index in NB201_REFERENCE),
        description=f"NAS-Bench-201 CIFAR-10 network of benchmark index 0..{nb201_cells.ARCHITECTURES - 1} "
                    "(or give its cell string), 32 x 32, 10 classes",
        builder="onnx",
    ),
)
_BY_KEY = {family.key: family for family in FAMILIES}


def _split_quant(name: str) -> tuple[str, str | None]:
    for suffix, mode in QUANT_SUFFIXES.items():
        if name.endswith(suffix):
            return name.removesuffix(suffix), mode
    return name, None


def _match(name: str) -> tuple[Family, dict[str, str], str | None] | None:
    base, quant = _split_quant(name)
    cell = nb201_cells.parse_cell(base.removeprefix("nb201_"))
    if cell is not None:  # a NAS-Bench-201 cell string stands for its index
        return _BY_KEY["nb201"], {"index": str(nb201_cells.index_of(cell))}, quant
    for family in FAMILIES:
        found = family.match(base)
        if found is not None:
            return family, found, quant
    return None


def is_zoo_name(name: str) -> bool:
    """True when `name` is in the zoo's grammar; `parse` then checks its values and names the allowed ones."""
    return _match(name) is not None


def family_key(name: str) -> str | None:
    """The family of a name in the zoo's grammar (its values unchecked), or None for any other name."""
    found = _match(name)
    return None if found is None else found[0].key


def _input_shape(family: Family, params: dict[str, str]) -> tuple[int, ...]:
    if family.signature is not None:
        return family.signature.shape(family.signature.inputs[0], 1)
    if family.input_shape is not None:
        return family.input_shape
    if "res" in params:
        res = int(params["res"])
        return (1, 3, res, res)
    if family.key == "efficientnet_lite":
        res = EFFICIENTNET_LITE_RES[params["version"]]
        return (1, 3, res, res)
    if family.key == "inception_v3":
        return (1, 3, 299, 299)
    if family.key == "nb201":
        return (1, 3, 32, 32)
    if family.key.endswith("3d"):
        return (1, 3, *VIDEO_CLIP)
    return (1, 3, 224, 224)


def _canonical(family: Family, raw: dict[str, str], name: str) -> dict[str, str]:
    params = dict(raw)
    for key, value in raw.items():
        if key == "res":
            res = int(value)
            if not (_RES_MIN <= res <= _RES_MAX and res % _RES_STEP == 0):
                raise ModelError(
                    f"zoo model {name!r}: resolution {value} is not a multiple of {_RES_STEP} in "
                    f"{_RES_MIN}..{_RES_MAX}; pick one such as 224 (see `harness zoo list`)"
                )
            params[key] = str(res)
            continue
        if key == "index":
            nb201_cells.cell_ops(int(value))  # names the range when it is outside
            params[key] = str(int(value))
            continue
        allowed = family.choices.get(key, ())
        if "." in "".join(allowed):
            value = canonical_decimal(float(value))
        if value not in allowed:
            raise ModelError(
                f"zoo model {name!r}: {key} {raw[key]} is not one of {', '.join(allowed)}; "
                f"use {family.grammar} with one of those (see `harness zoo list`)"
            )
        params[key] = value
    return params


def parse(name: str) -> ZooSpec:
    """Validate a zoo name; raises ModelError naming the allowed values of a bad parameter."""
    found = _match(name)
    if found is None:
        raise ModelError(f"{name!r} is not a zoo model name; see `harness zoo list` for the grammar")
    family, raw, quant = found
    params = _canonical(family, raw, name)
    canonical = family.compose(params) + (f"_int8_{quant}" if quant else "")
    return ZooSpec(canonical, family.key, params, _input_shape(family, params), _classes(family, params), quant,
                   family.signature)


def _classes(family: Family, params: dict[str, str]) -> int:
    if family.key == "bert":
        return BERT_SIZES[params["size"]][1]  # the hidden width of its last hidden state
    if family.classes is not None:
        return family.classes
    return {"nb201": CIFAR_CLASSES}.get(family.key, KINETICS_CLASSES if family.key.endswith("3d") else
                                         IMAGENET_CLASSES)


def get_family(key: str) -> Family:
    return _BY_KEY[key]


def listed_specs() -> list[ZooSpec]:
    """The published variants of every family (the grammar admits more)."""
    return [parse(fam.compose(params)) for fam in FAMILIES for params in fam.listed]
