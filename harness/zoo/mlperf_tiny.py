"""The MLPerf Tiny reference models (Banbury et al. 2021, "MLPerf Tiny Benchmark", arXiv:2106.07597), after their
Keras definitions in github.com/mlcommons/tiny (training/<task>/keras_model.py; the visual wake words network is the
zoo's MobileNetV1 at width 0.25, see build.py).

Keras' convolutions carry a bias before their batch norm; here they are bias-free, which exports the same graph once
the batch norm is folded into the convolution. Keras pads 'same' unevenly where the torch padding below is even; the
output sizes, so the multiply-adds, are the same. Dropout and the final softmax are left out, as in the zoo's other
classifiers (the softmax has no weights and no multiply-adds)."""

from __future__ import annotations

from torch import Tensor, nn

from harness.zoo.layers import PooledClassifier, conv_bn

KWS_FILTERS = 64
RESNET8_WIDTHS = (16, 32, 64)
AD_WIDTHS = (128, 128, 128, 128, 8, 128, 128, 128, 128)
"""The autoencoder's hidden layers, encoder to decoder, with the 8-wide bottleneck (the DCASE 2020 task 2 baseline)."""


class DSCNN(PooledClassifier):
    """Keyword spotting DS-CNN (Zhang et al. 2017, "Hello Edge", the small model): a 10 x 4 convolution of stride 2
    to 64 channels over the 49 x 10 MFCCs (25 x 5 out), four depthwise-separable blocks of 64, average pool, dense."""

    def __init__(self, num_classes: int = 12) -> None:
        # Keras pads 'same' 4 above and 5 below (1 and 1 across); (5, 1) on both sides gives the same 25 x 5.
        stem = nn.Sequential(nn.Conv2d(1, KWS_FILTERS, (10, 4), 2, (5, 1), bias=False), nn.BatchNorm2d(KWS_FILTERS),
                             nn.ReLU(inplace=True))
        blocks: list[nn.Module] = []
        for _ in range(4):
            blocks += [conv_bn(KWS_FILTERS, KWS_FILTERS, 3, groups=KWS_FILTERS), conv_bn(KWS_FILTERS, KWS_FILTERS, 1)]
        super().__init__([stem, *blocks], KWS_FILTERS, num_classes)


class _Stack(nn.Module):
    """ResNet v1 basic block: two 3 x 3 convolutions (the first may stride), added to the input or, where the shape
    changes, to a strided 1 x 1 convolution of it (with a bias and no batch norm, as in the reference), then ReLU."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.body = nn.Sequential(conv_bn(cin, cout, 3, stride), conv_bn(cout, cout, 3, act=None))
        self.shortcut = nn.Identity() if stride == 1 and cin == cout else nn.Conv2d(cin, cout, 1, stride)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: Tensor) -> Tensor:
        return self.relu(self.shortcut(x) + self.body(x))


class ResNet8(PooledClassifier):
    """CIFAR-10 ResNet-8 (EEMBC's ResNet v1 for MLPerf Tiny): a 3 x 3 stem of 16, three stacks of 16, 32 and 64
    channels (the last two of stride 2), average pool, dense."""

    def __init__(self, num_classes: int = 10) -> None:
        first = RESNET8_WIDTHS[0]
        layers: list[nn.Module] = [conv_bn(3, first, 3)]
        cin = first
        for index, cout in enumerate(RESNET8_WIDTHS):
            layers.append(_Stack(cin, cout, 1 if index == 0 else 2))
            cin = cout
        super().__init__(layers, cin, num_classes)


class FCAutoEncoder(nn.Module):
    """Anomaly detection: dense layers 640 -> 128 x 4 -> 8 -> 128 x 4 -> 640, each hidden one followed by batch norm
    and ReLU; the anomaly score is the caller's (the reconstruction error)."""

    def __init__(self, features: int = 640) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        cin = features
        for width in AD_WIDTHS:
            layers += [nn.Linear(cin, width), nn.BatchNorm1d(width), nn.ReLU(inplace=True)]
            cin = width
        layers.append(nn.Linear(cin, features))
        self.layers = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        return self.layers(x)
