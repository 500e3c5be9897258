"""The conv + batch-norm + activation unit every hand-written zoo network is made of (2D or 3D)."""

from __future__ import annotations

from torch import nn


def conv_bn(
    cin: int,
    cout: int,
    kernel: int,
    stride: int | tuple[int, ...] = 1,
    *,
    groups: int = 1,
    act: type[nn.Module] | None = nn.ReLU,
    dims: int = 2,
) -> nn.Sequential:
    """Bias-free convolution with 'same' padding for odd kernels, BatchNorm, then `act` (None: linear)."""
    conv = nn.Conv2d if dims == 2 else nn.Conv3d
    norm = nn.BatchNorm2d if dims == 2 else nn.BatchNorm3d
    layers: list[nn.Module] = [conv(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False), norm(cout)]
    if act is not None:
        layers.append(act(inplace=True))
    return nn.Sequential(*layers)
