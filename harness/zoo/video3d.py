"""Compact 3D CNNs for video clips (N, 3, frames, H, W), after Efficient-3DCNNs: Köpüklü, Kose, Gunduz,
Rigoll, "Resource Efficient 3D Convolutional Neural Networks", ICCVW 2019, and its reference code at
github.com/okankop/Efficient-3DCNNs (models/squeezenet.py, shufflenetv2.py, mobilenetv2.py).

Written here because no maintained library ships them (torchvision's video models are R(2+1)D, MC3, R3D,
S3D, MViT and Swin3D). Layer widths, strides and block counts follow the reference code; the final
fixed-size average pool is an adaptive one, which is the same for the 16 x 112 x 112 clips used here.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from harness.zoo.layers import conv_bn

_STEM_STRIDE = (1, 2, 2)  # every reference model keeps the temporal resolution in its stem


class _Head(nn.Module):
    """Global average pool over time and space, then a linear classifier."""

    def __init__(self, cin: int, num_classes: int, dropout: float) -> None:
        super().__init__()
        self.pool = nn.AdaptiveAvgPool3d(1)
        self.fc = nn.Sequential(nn.Dropout(dropout), nn.Linear(cin, num_classes))

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(self.pool(x).flatten(1))


class _Fire(nn.Module):
    """SqueezeNet's fire module in 3D: squeeze 1x1x1, expand 1x1x1 and 3x3x3 side by side, optional bypass."""

    def __init__(self, cin: int, squeeze: int, expand: int, bypass: bool = False) -> None:
        super().__init__()
        self.bypass = bypass
        self.squeeze = conv_bn(cin, squeeze, 1, dims=3)
        self.expand1 = conv_bn(squeeze, expand, 1, act=None, dims=3)
        self.expand3 = conv_bn(squeeze, expand, 3, act=None, dims=3)

    def forward(self, x: Tensor) -> Tensor:
        s = self.squeeze(x)
        out = torch.cat([self.expand1(s), self.expand3(s)], 1)
        return torch.relu(out + x if self.bypass else out)


class SqueezeNet3D(nn.Module):
    """Versions 1.0 (7x7x7 stem, 96 channels) and 1.1 (3x3x3 stem, 64 channels, earlier pooling)."""

    def __init__(self, version: str = "1.1", num_classes: int = 600) -> None:
        super().__init__()
        stem, kernel = (96, 7) if version == "1.0" else (64, 3)

        def pool() -> nn.Module:
            return nn.MaxPool3d(3, 2, 1)

        fires = [_Fire(stem, 16, 64), _Fire(128, 16, 64, True), pool(), _Fire(128, 32, 128), _Fire(256, 32, 128, True)]
        if version == "1.0":
            fires += [pool(), _Fire(256, 48, 192), _Fire(384, 48, 192, True), _Fire(384, 64, 256), pool()]
            fires += [_Fire(512, 64, 256, True)]
        else:
            fires += [pool(), _Fire(256, 48, 192), _Fire(384, 48, 192, True), pool()]
            fires += [_Fire(384, 64, 256), _Fire(512, 64, 256, True)]
        self.features = nn.Sequential(conv_bn(3, stem, kernel, _STEM_STRIDE, dims=3), pool(), *fires)
        # The reference classifies with a 1x1x1 convolution + ReLU before the pool, not a linear layer.
        self.classifier = nn.Sequential(
            nn.Dropout(0.5), nn.Conv3d(512, num_classes, 1), nn.ReLU(inplace=True), nn.AdaptiveAvgPool3d(1)
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.features(x)).flatten(1)


def _channel_shuffle(x: Tensor, groups: int) -> Tensor:
    n, c, t, h, w = x.shape
    return x.view(n, groups, c // groups, t, h, w).transpose(1, 2).reshape(n, c, t, h, w)


class _ShuffleUnit(nn.Module):
    """ShuffleNetV2 unit: stride 1 splits channels and transforms one half; stride 2 transforms both paths."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        half = cout // 2
        self.stride = stride
        branch_in = cin if stride == 2 else half
        self.branch2 = nn.Sequential(
            conv_bn(branch_in, half, 1, dims=3),
            conv_bn(half, half, 3, stride, groups=half, act=None, dims=3),
            conv_bn(half, half, 1, dims=3),
        )
        if stride == 2:
            self.branch1 = nn.Sequential(
                conv_bn(cin, cin, 3, stride, groups=cin, act=None, dims=3), conv_bn(cin, half, 1, dims=3)
            )

    def forward(self, x: Tensor) -> Tensor:
        if self.stride == 1:
            keep, move = x.chunk(2, dim=1)
            out = torch.cat([keep, self.branch2(move)], 1)
        else:
            out = torch.cat([self.branch1(x), self.branch2(x)], 1)
        return _channel_shuffle(out, 2)


# Stage widths per width multiplier, as in the reference (not a plain product: they keep channels even).
_SHUFFLE_WIDTHS = {
    "0.25": (32, 64, 128, 1024),
    "0.5": (48, 96, 192, 1024),
    "1.0": (116, 232, 464, 1024),
    "1.5": (176, 352, 704, 1024),
    "2.0": (224, 488, 976, 2048),
}


class ShuffleNetV2_3D(nn.Module):
    """Stem 24 channels, stages of 4 / 8 / 4 units, a 1x1x1 conv to 1024 (2048 at 2.0x), then the head."""

    def __init__(self, width: str = "1.0", num_classes: int = 600) -> None:
        super().__init__()
        *stages, last = _SHUFFLE_WIDTHS[width]
        layers: list[nn.Module] = [conv_bn(3, 24, 3, _STEM_STRIDE, dims=3), nn.MaxPool3d(3, 2, 1)]
        cin = 24
        for cout, repeats in zip(stages, (4, 8, 4), strict=True):
            layers += [_ShuffleUnit(cin if i == 0 else cout, cout, 2 if i == 0 else 1) for i in range(repeats)]
            cin = cout
        layers.append(conv_bn(cin, last, 1, dims=3))
        self.features = nn.Sequential(*layers)
        self.head = _Head(last, num_classes, 0.2)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.features(x))


class _InvertedResidual(nn.Module):
    """MobileNetV2 block: 1x1x1 expand (skipped when t = 1), 3x3x3 depthwise, linear 1x1x1 projection."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = round(cin * expand)
        self.residual = stride == 1 and cin == cout
        layers: list[nn.Module] = [conv_bn(cin, hidden, 1, act=nn.ReLU6, dims=3)] if expand != 1 else []
        layers += [
            conv_bn(hidden, hidden, 3, stride, groups=hidden, act=nn.ReLU6, dims=3),
            conv_bn(hidden, cout, 1, act=None, dims=3),
        ]
        self.conv = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        return x + self.conv(x) if self.residual else self.conv(x)


# (expansion t, channels c, repeats n, stride s) as in MobileNetV2's Table 2, strides applied in 3D.
_MOBILENET_V2_SETTING = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                         (6, 320, 1, 1))


class MobileNetV2_3D(nn.Module):
    """Channels int(c * width); the last 1x1x1 conv keeps 1280 channels unless width > 1."""

    def __init__(self, width: float = 1.0, num_classes: int = 600) -> None:
        super().__init__()
        cin = int(32 * width)
        last = int(1280 * width) if width > 1.0 else 1280
        layers: list[nn.Module] = [conv_bn(3, cin, 3, _STEM_STRIDE, act=nn.ReLU6, dims=3)]
        for expand, channels, repeats, stride in _MOBILENET_V2_SETTING:
            cout = int(channels * width)
            for i in range(repeats):
                layers.append(_InvertedResidual(cin, cout, stride if i == 0 else 1, expand))
                cin = cout
        layers.append(conv_bn(cin, last, 1, act=nn.ReLU6, dims=3))
        self.features = nn.Sequential(*layers)
        self.head = _Head(last, num_classes, 0.2)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.features(x))
