"""MobileNetV1 (Howard et al. 2017, arXiv:1704.04861, Table 1). Written here because torchvision ships only
MobileNetV2/V3; it is a plain stack of depthwise-separable blocks, so a few lines reproduce it exactly
(569M multiply-adds at alpha 1.0 and 224 x 224, as the paper's Table 8 states)."""

from __future__ import annotations

from torch import nn

from harness.zoo.layers import PooledClassifier, conv_bn

# (output channels, stride) of the 13 depthwise-separable blocks after the 3x3/2 stem of 32 channels.
_BLOCKS = ((64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2)) + ((512, 1),) * 5 + ((1024, 2), (1024, 1))


class MobileNetV1(PooledClassifier):
    """Width multiplier `alpha` thins every layer (channels = int(c * alpha)); input size is free."""

    def __init__(self, alpha: float = 1.0, num_classes: int = 1000) -> None:
        cin = int(32 * alpha)
        layers: list[nn.Module] = [conv_bn(3, cin, 3, 2)]
        for channels, stride in _BLOCKS:
            cout = int(channels * alpha)
            layers += [conv_bn(cin, cin, 3, stride, groups=cin), conv_bn(cin, cout, 1)]
            cin = cout
        super().__init__(layers, cin, num_classes)
