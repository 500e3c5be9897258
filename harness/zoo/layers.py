"""The conv + batch-norm + activation unit every hand-written zoo network is made of (2D or 3D)."""

from __future__ import annotations

from torch import nn


def conv_bn(
    cin: int,
    cout: int,
    kernel: int,
    stride: int | tuple[int, int, int] = 1,
    *,
    groups: int = 1,
    act: type[nn.Module] | None = nn.ReLU,
    dims: int = 2,
) -> nn.Sequential:
    """Bias-free convolution with 'same' padding for odd kernels, BatchNorm, then `act` (None: linear). A stride per
    axis (time, height, width) is for 3D only."""
    conv: nn.Module
    if dims == 3:
        conv = nn.Conv3d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False)
    elif isinstance(stride, int):
        conv = nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False)
    else:
        raise ValueError(f"stride {stride} is per axis of a 3D layer; give dims=3 or one stride")
    layers: list[nn.Module] = [conv, nn.BatchNorm3d(cout) if dims == 3 else nn.BatchNorm2d(cout)]
    if act is not None:
        layers.append(act(inplace=True))
    return nn.Sequential(*layers)
