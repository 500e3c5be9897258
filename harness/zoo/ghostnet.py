"""GhostNet (Han et al., "GhostNet: More Features from Cheap Operations", CVPR 2020, arXiv:1911.11907), after the
authors' reference code (github.com/huawei-noah/Efficient-AI-Backbones, ghostnet_pytorch/ghostnet.py). Written here
because neither torchvision nor any other maintained zoo dependency ships it. The paper's Table 7 gives 42M / 141M /
226M multiply-adds and 2.6M / 5.2M / 7.3M parameters at widths 0.5 / 1.0 / 1.3 on 224 x 224 inputs."""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torchvision.models._utils import _make_divisible

from harness.zoo.layers import conv_bn

# Bottlenecks in order: (kernel, expanded channels, output channels, squeeze-excite, stride), the paper's Table 1.
_BOTTLENECKS = (
    (3, 16, 16, False, 1), (3, 48, 24, False, 2), (3, 72, 24, False, 1), (5, 72, 40, True, 2),
    (5, 120, 40, True, 1), (3, 240, 80, False, 2), (3, 200, 80, False, 1), (3, 184, 80, False, 1),
    (3, 184, 80, False, 1), (3, 480, 112, True, 1), (3, 672, 112, True, 1), (5, 672, 160, True, 2),
    (5, 960, 160, False, 1), (5, 960, 160, True, 1), (5, 960, 160, False, 1), (5, 960, 160, True, 1),
)
_DIVISOR = 4  # the reference rounds every width to a multiple of 4, so a Ghost module's two halves are exact
_HEAD = 1280


class _GhostModule(nn.Module):
    """Half the output channels from a 1x1 convolution, the other half from a cheap 3x3 depthwise one on them."""

    def __init__(self, cin: int, cout: int, relu: bool) -> None:
        super().__init__()
        act = nn.ReLU if relu else None
        self.primary = conv_bn(cin, cout // 2, 1, act=act)
        self.cheap = conv_bn(cout // 2, cout // 2, 3, groups=cout // 2, act=act)

    def forward(self, x: Tensor) -> Tensor:
        primary = self.primary(x)
        return torch.cat([primary, self.cheap(primary)], 1)


class _SqueezeExcite(nn.Module):
    """Channel gate: pool, 1x1 down to a quarter (ReLU), 1x1 back up, hard sigmoid."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        reduced = _make_divisible(channels * 0.25, _DIVISOR)
        self.gate = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(channels, reduced, 1), nn.ReLU(inplace=True),
                                  nn.Conv2d(reduced, channels, 1), nn.Hardsigmoid())

    def forward(self, x: Tensor) -> Tensor:
        return x * self.gate(x)


class _GhostBottleneck(nn.Module):
    """Ghost module (expand), a depthwise convolution when strided, optional SE, Ghost module (project), plus a
    shortcut: identity, or depthwise + 1x1 convolutions when the shape changes."""

    def __init__(self, cin: int, mid: int, cout: int, kernel: int, stride: int, se: bool) -> None:
        super().__init__()
        layers: list[nn.Module] = [_GhostModule(cin, mid, relu=True)]
        if stride > 1:
            layers.append(conv_bn(mid, mid, kernel, stride, groups=mid, act=None))
        if se:
            layers.append(_SqueezeExcite(mid))
        layers.append(_GhostModule(mid, cout, relu=False))
        self.body = nn.Sequential(*layers)
        self.shortcut = nn.Identity() if cin == cout and stride == 1 else nn.Sequential(
            conv_bn(cin, cin, kernel, stride, groups=cin, act=None), conv_bn(cin, cout, 1, act=None))

    def forward(self, x: Tensor) -> Tensor:
        return self.body(x) + self.shortcut(x)


class GhostNet(nn.Module):
    """Every width but the 1280-channel head scales with `width`; input size is free."""

    def __init__(self, width: float = 1.0, num_classes: int = 1000) -> None:
        super().__init__()
        cin = _make_divisible(16 * width, _DIVISOR)
        layers: list[nn.Module] = [conv_bn(3, cin, 3, 2)]
        for kernel, expanded, channels, se, stride in _BOTTLENECKS:
            cout = _make_divisible(channels * width, _DIVISOR)
            layers.append(_GhostBottleneck(cin, _make_divisible(expanded * width, _DIVISOR), cout, kernel, stride, se))
            cin = cout
        last = _make_divisible(_BOTTLENECKS[-1][1] * width, _DIVISOR)
        layers.append(conv_bn(cin, last, 1))
        self.features = nn.Sequential(*layers)
        # The reference's head: pool, a biased 1x1 convolution to 1280 channels without batch norm, ReLU, linear.
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(last, _HEAD, 1), nn.ReLU(inplace=True),
                                  nn.Flatten(1), nn.Dropout(0.2), nn.Linear(_HEAD, num_classes))

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.features(x))
