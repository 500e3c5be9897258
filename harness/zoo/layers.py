"""What the hand-written zoo networks are made of: the conv + batch-norm + activation unit (2D or 3D), and the
pooled classifier head of the 2D ones."""

from __future__ import annotations

from torch import Tensor, nn


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


class PooledClassifier(nn.Module):
    """`features`, a global average pool and a dense layer from their `width` channels to `num_classes`: MobileNetV1,
    the keyword-spotting DS-CNN and ResNet-8 differ only in their features."""

    def __init__(self, features: list[nn.Module], width: int, num_classes: int) -> None:
        super().__init__()
        self.features = nn.Sequential(*features)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(width, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.pool(self.features(x)).flatten(1))
