"""Turn a ZooSpec into a torch module with random weights (seeded, so an export is reproducible).

Imported only when a model is built: it needs torch and torchvision (the `zoo` extra)."""

from __future__ import annotations

import torch
import torchvision.models as tvm
from torch import nn
from torchvision.models._utils import _make_divisible
from torchvision.models.mobilenetv3 import InvertedResidualConfig, MobileNetV3, _mobilenet_v3_conf

from harness.zoo.bert import BertEncoder
from harness.zoo.efficientnet_lite import EfficientNetLite
from harness.zoo.ghostnet import GhostNet
from harness.zoo.mlperf_tiny import DSCNN, FCAutoEncoder, ResNet8
from harness.zoo.mobilenet_v1 import MobileNetV1
from harness.zoo.registry import BERT_MAX_POSITIONS, BERT_SIZES, BERT_VOCAB, ZooSpec, get_family
from harness.zoo.video3d import MobileNetV2_3D, ShuffleNetV2_3D, SqueezeNet3D

SEED = 0
INCEPTIONS = {"inception_v3": tvm.inception_v3, "inception_v1": tvm.googlenet}
"""torchvision's GoogLeNet is TF-Slim's Inception-v1 (batch norm, 3x3 where the paper's branch has 5x5), the
network TFLite's inception_v1 models were trained as."""
SHUFFLENET_NARROW = {"0_25": [24, 24, 48, 96, 512], "0_33": [24, 32, 64, 128, 512]}
"""Stem, three stages and last convolution of the ShuffleNetV2 widths torchvision lacks, as PaddleClas publishes
them (ppcls ShuffleNetV2, the models of its mobile latency tables); torchvision's ShuffleNetV2 takes them as is."""
TRAINED_NORMS = frozenset({"kws_dscnn", "vww_mobilenet_v1", "resnet8_cifar10", "ad_fc_autoencoder", "bert", "ssdlite"})
"""Families whose normalisation layers get random (seeded) scales, shifts and running statistics, as a trained network
has. With torch's initial ones and zeros every folded batch norm leaves a zero bias that the exporter drops, and equal
LayerNorm weights, so the graph would lack the biases a deployed model carries and count fewer parameters than the
architecture has (KWS DS-CNN: 22,032 instead of 22,604). The older families keep torch's initialisation, so their
exports stay byte-identical."""
MOBILENET_V3_HEAD = {"large": 1280, "small": 1024}
"""The last layer's width, kept at every width multiplier as the paper's 0.75 models have it (torchvision would
scale it, which gives 0.75-Large 3.4M parameters against the paper's 4.0M)."""


def _mobilenet_v3(spec: ZooSpec) -> nn.Module:
    """torchvision's block table, but each expansion is the thinned input width times the block's expansion factor
    (rounded to 8), as in the paper's reference (TF-Slim's expand_input_by_factor); torchvision thins the expanded
    width itself, which gives the paper's 0.75 models 9-10% fewer multiply-adds than the paper states."""
    size, alpha = spec.params["size"], float(spec.params["alpha"])
    arch = f"mobilenet_v3_{size}"
    blocks = []
    for plain, thin in zip(_mobilenet_v3_conf(arch)[0], _mobilenet_v3_conf(arch, width_mult=alpha)[0], strict=True):
        expanded = _make_divisible(thin.input_channels * plain.expanded_channels / plain.input_channels, 8)
        blocks.append(InvertedResidualConfig(thin.input_channels, thin.kernel, expanded, thin.out_channels, thin.use_se,
                                             "HS" if thin.use_hs else "RE", thin.stride, thin.dilation, 1.0))
    return MobileNetV3(blocks, MOBILENET_V3_HEAD[size], num_classes=spec.num_classes)


def _torchvision(spec: ZooSpec) -> nn.Module:
    params, classes = spec.params, spec.num_classes
    if spec.family == "mobilenet_v2":
        return tvm.mobilenet_v2(weights=None, width_mult=float(params["alpha"]), num_classes=classes)
    if spec.family == "mnasnet":
        return tvm.MNASNet(float(params["alpha"]), num_classes=classes)
    if spec.family == "mobilenet_v3":
        return _mobilenet_v3(spec)
    if spec.family == "shufflenet_v2" and params["width"] in SHUFFLENET_NARROW:
        return tvm.ShuffleNetV2([4, 8, 4], SHUFFLENET_NARROW[params["width"]], num_classes=classes)
    if spec.family in INCEPTIONS:
        # No auxiliary heads: they are dropped in eval mode anyway and would only bloat the export.
        return INCEPTIONS[spec.family](weights=None, aux_logits=False, init_weights=True, num_classes=classes)
    # For the other families the zoo name is torchvision's builder name (squeezenet1_1, resnet18, ...).
    return getattr(tvm, get_family(spec.family).compose(params))(weights=None, num_classes=classes)


def _trained_norms(net: nn.Module) -> None:
    """Scales and variances in 0.5..1.5, shifts and means in -0.2..0.2, drawn from torch's seeded generator."""
    with torch.no_grad():
        for module in net.modules():
            if not isinstance(module, nn.modules.batchnorm._BatchNorm | nn.LayerNorm):
                continue
            for tensor, low, high in ((module.weight, 0.5, 1.5), (module.bias, -0.2, 0.2)):
                if tensor is not None:
                    tensor.uniform_(low, high)
            if isinstance(module, nn.modules.batchnorm._BatchNorm):
                for statistic, low, high in ((module.running_mean, -0.2, 0.2), (module.running_var, 0.5, 1.5)):
                    if statistic is not None:
                        statistic.uniform_(low, high)


def build(spec: ZooSpec) -> nn.Module:
    """The float network of `spec` in eval mode (quantized variants are derived from its ONNX export)."""
    torch.manual_seed(SEED)
    params, classes = spec.params, spec.num_classes
    if spec.family == "mobilenet_v1":
        net: nn.Module = MobileNetV1(float(params["alpha"]), classes)
    elif spec.family == "squeezenet3d":
        net = SqueezeNet3D(params["version"], classes)
    elif spec.family == "shufflenet_v2_3d":
        net = ShuffleNetV2_3D(params["width"], classes)
    elif spec.family == "mobilenet_v2_3d":
        net = MobileNetV2_3D(float(params["width"]), classes)
    elif spec.family == "efficientnet_lite":
        net = EfficientNetLite(params["version"], classes)
    elif spec.family == "ghostnet":
        net = GhostNet(float(params["width"]), classes)
    elif spec.family == "kws_dscnn":
        net = DSCNN(classes)
    elif spec.family == "vww_mobilenet_v1":
        # The reference (mlcommons/tiny, after Silicon Labs' EEMBC model) is MobileNetV1 0.25 with a 2-class head.
        net = MobileNetV1(0.25, classes)
    elif spec.family == "resnet8_cifar10":
        net = ResNet8(classes)
    elif spec.family == "ad_fc_autoencoder":
        net = FCAutoEncoder(spec.input_shape[1])
    elif spec.family == "bert":
        net = BertEncoder(*BERT_SIZES[params["size"]], vocab=BERT_VOCAB, max_positions=BERT_MAX_POSITIONS)
    elif spec.family == "ssdlite":
        from harness.zoo.detection import SSDLiteRaw  # torchvision's detection package: only when it is built

        net = SSDLiteRaw(classes)
    else:
        net = _torchvision(spec)
    if spec.family in TRAINED_NORMS:
        _trained_norms(net)
    return net.eval()
