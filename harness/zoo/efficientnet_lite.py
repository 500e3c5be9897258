"""EfficientNet-Lite0..4, after Google's EfficientNet-Lite builder (github.com/tensorflow/tpu,
models/official/efficientnet/lite): EfficientNet-B0's blocks (Tan & Le 2019, Table 1) without squeeze-excite, with
ReLU6 instead of swish, and the 32-channel stem, the 1280-channel head and the first and last stages' repeats kept
fixed while the width and depth coefficients scale the rest. Written here because torchvision ships only the
original EfficientNets. The builder pads 'same'; a k // 2 padding gives the same output sizes at every
resolution used here, so the same multiply-adds."""

from __future__ import annotations

import math

from torch import Tensor, nn
from torchvision.models._utils import _make_divisible

from harness.zoo.layers import conv_bn

# Stages: (kernel, repeats, stride, expansion, output channels), EfficientNet-B0's Table 1 (its inputs are the
# previous stage's outputs, and the stem's 32 channels for the first).
_STAGES = ((3, 1, 1, 1, 16), (3, 2, 2, 6, 24), (5, 2, 2, 6, 40), (3, 3, 2, 6, 80), (5, 3, 1, 6, 112), (5, 4, 2, 6, 192),
           (3, 1, 1, 6, 320))
_COEFFICIENTS = {"0": (1.0, 1.0), "1": (1.0, 1.1), "2": (1.1, 1.2), "3": (1.2, 1.4), "4": (1.4, 1.8)}
"""Lite version -> (width coefficient, depth coefficient), as the builder sets them."""
_STEM, _HEAD = 32, 1280


class _MBConv(nn.Module):
    """1x1 expansion (none when the expansion is 1), depthwise convolution, linear 1x1 projection; a residual when
    the shape is kept."""

    def __init__(self, cin: int, cout: int, kernel: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        layers = [conv_bn(cin, hidden, 1, act=nn.ReLU6)] if expand != 1 else []
        layers += [conv_bn(hidden, hidden, kernel, stride, groups=hidden, act=nn.ReLU6),
                   conv_bn(hidden, cout, 1, act=None)]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: Tensor) -> Tensor:
        return x + self.body(x) if self.residual else self.body(x)


class EfficientNetLite(nn.Module):
    """The Lite network of `version` ("0".."4"); its resolution (224..300) is the input's, set by the registry."""

    def __init__(self, version: str = "0", num_classes: int = 1000) -> None:
        super().__init__()
        width, depth = _COEFFICIENTS[version]
        layers: list[nn.Module] = [conv_bn(3, _STEM, 3, 2, act=nn.ReLU6)]
        cin = _STEM
        for index, (kernel, repeats, stride, expand, channels) in enumerate(_STAGES):
            cout = _make_divisible(channels * width, 8)
            fixed = index in (0, len(_STAGES) - 1)
            for i in range(repeats if fixed else math.ceil(repeats * depth)):
                layers.append(_MBConv(cin, cout, kernel, stride if i == 0 else 1, expand))
                cin = cout
        layers.append(conv_bn(cin, _HEAD, 1, act=nn.ReLU6))
        self.features = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(1), nn.Dropout(0.2),
                                  nn.Linear(_HEAD, num_classes))

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.features(x))
