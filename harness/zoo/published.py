"""Published multiply-adds and parameter counts of the zoo's newer families, each with where it is published: what
their builds are checked against (tests/test_zoo_published.py, benchmarks/zoo_facts.py, docs/zoo.md).

A figure is None where its source gives none precise enough to check at 2% (PaddleClas rounds the FLOPs of its
0.25x and 0.33x ShuffleNetV2 to one digit). Torch-free data, so reading it costs nothing."""

from __future__ import annotations

from dataclasses import dataclass

TOLERANCE = 0.02
"""How far the zoo's count may be from the published one, relative."""


@dataclass(frozen=True)
class Published:
    """One model's published figures: multiply-adds and parameters (None: not published at that precision)."""

    macs: float | None
    params: float | None
    source: str
    macs_counted_otherwise: float | None = None
    """A multiply-add figure its authors publish but count with more than convolutions and linear layers (see
    docs/zoo.md): shown beside the zoo's count, never checked against it."""


_V3 = "MobileNetV3 paper (Howard et al. 2019, arXiv:1905.02244v5), Table 3"
_PADDLE = "PaddleClas model table (ppcls ImageNet1k)"
_PADDLE_HALVED = f"{_PADDLE}; its FLOPs halved (its MobileNetV2 1.0 lists 0.60G, twice 300M)"
_GHOST = "GhostNet paper (Han et al. 2020), Table 7"
_LITE = ("EfficientNet-Lite README (tensorflow/tpu) for the parameters; efficientnet-lite.pytorch (d-li14) for the "
         "multiply-adds")

PUBLISHED: dict[str, Published] = {
    "mobilenet_v3_large_1.0_224": Published(219e6, 5.4e6, _V3),
    "mobilenet_v3_large_0.75_224": Published(155e6, 4.0e6, _V3),
    "mobilenet_v3_large_1.25_224": Published(356e6, 7.5e6, "ShuffleNet-Series README (megvii-model), MobileNetV3 rows"),
    "mobilenet_v3_small_1.0_224": Published(56e6, 2.5e6, _V3),
    "mobilenet_v3_small_0.75_224": Published(44e6, 2.0e6, _V3),
    "efficientnet_b0": Published(0.39e9, 5.3e6, "EfficientNet paper (Tan & Le 2019), Table 2"),
    "efficientnet_lite0": Published(0.385e9, 4.7e6, _LITE, 407e6),
    "efficientnet_lite1": Published(0.600e9, 5.4e6, _LITE, 631e6),
    "efficientnet_lite2": Published(0.860e9, 6.1e6, _LITE, 899e6),
    "efficientnet_lite3": Published(1.383e9, 8.2e6, _LITE, 1.44e9),
    "efficientnet_lite4": Published(2.553e9, 13.0e6, _LITE, 2.64e9),
    "regnet_y_400mf": Published(0.40e9, 4.3e6, "RegNet paper (Radosavovic et al. 2020) and pycls model zoo"),
    "ghostnet_0.5_224": Published(42e6, 2.6e6, _GHOST),
    "ghostnet_1.0_224": Published(141e6, 5.2e6, _GHOST),
    "ghostnet_1.3_224": Published(226e6, 7.3e6, _GHOST),
    "shufflenet_v2_x0_25": Published(None, 0.60e6, _PADDLE),
    "shufflenet_v2_x0_33": Published(None, 0.64e6, _PADDLE),
    "mobilenet_v2_1.5_224": Published(660e6, 6.76e6, _PADDLE_HALVED),
    "mobilenet_v2_2.0_224": Published(1160e6, 11.13e6, _PADDLE_HALVED),
    "alexnet": Published(0.71e9, 60e6, "AlexNet paper (Krizhevsky et al. 2012): 60M parameters; torchvision model "
                                       "table: 0.71G multiply-adds"),
    "vgg16": Published(15.3e9, 138e6, "VGG paper (Simonyan & Zisserman 2015), Table 2; ResNet paper (He et al. "
                                      "2016): 15.3G multiply-adds"),
}
