"""Turn a ZooSpec into a torch module with random weights (seeded, so an export is reproducible).

Imported only when a model is built: it needs torch and torchvision (the `zoo` extra)."""

from __future__ import annotations

import torch
import torchvision.models as tvm
from torch import nn

from harness.zoo.mobilenet_v1 import MobileNetV1
from harness.zoo.registry import ZooSpec, get_family
from harness.zoo.video3d import MobileNetV2_3D, ShuffleNetV2_3D, SqueezeNet3D

SEED = 0
INCEPTIONS = {"inception_v3": tvm.inception_v3, "inception_v1": tvm.googlenet}
"""torchvision's GoogLeNet is TF-Slim's Inception-v1 (batch norm, 3x3 where the paper's branch has 5x5), the
network TFLite's inception_v1 models were trained as."""


def _torchvision(spec: ZooSpec) -> nn.Module:
    params, classes = spec.params, spec.num_classes
    if spec.family == "mobilenet_v2":
        return tvm.mobilenet_v2(weights=None, width_mult=float(params["alpha"]), num_classes=classes)
    if spec.family == "mnasnet":
        return tvm.MNASNet(float(params["alpha"]), num_classes=classes)
    if spec.family in INCEPTIONS:
        # No auxiliary heads: they are dropped in eval mode anyway and would only bloat the export.
        return INCEPTIONS[spec.family](weights=None, aux_logits=False, init_weights=True, num_classes=classes)
    # For the other families the zoo name is torchvision's builder name (squeezenet1_1, resnet18, ...).
    return getattr(tvm, get_family(spec.family).compose(params))(weights=None, num_classes=classes)


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
    else:
        net = _torchvision(spec)
    return net.eval()
