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
    dims: dict[str, int] | None = None
    """For a model exported with dynamic dims besides the batch: the sizes its figures are published at. Its facts
    are counted with those dims fixed (onnx_facts(path, dims)), since the facts count a symbolic dim as 1."""


_V3 = "MobileNetV3 paper (Howard et al. 2019, arXiv:1905.02244v5), Table 3"
_PADDLE = "PaddleClas model table (ppcls ImageNet1k)"
_PADDLE_HALVED = f"{_PADDLE}; its FLOPs halved (its MobileNetV2 1.0 lists 0.60G, twice 300M)"
_GHOST = "GhostNet paper (Han et al. 2020), Table 7"
_LITE = ("EfficientNet-Lite README (tensorflow/tpu) for the parameters; efficientnet-lite.pytorch (d-li14) for the "
         "multiply-adds")
_TINY = ("Silicon Labs MLTK reference-model docs (mltk summarize --tflite, Total MACs) of the MLPerf Tiny model: {}. "
         "No parameter count is published at 2%: the MLPerf Tiny paper's Table 1 (Banbury et al. 2021, "
         "arXiv:2106.07597) gives the int8 TFLite size, {}")
_TURC = ("Turc et al. 2019 (arXiv:1908.08962), the compact BERTs' parameter counts; the zoo counts the embeddings, the "
         "layers and the pooler")

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
    "kws_dscnn": Published(2.657e6, None, _TINY.format(
        "keyword_spotting, 2.657M (its 50 x 10 input maps to the same 25 x 5 as the reference's 49 x 10)",
        "52.5 kB; the 38.6K parameters the paper's text quotes are the memory figure of Hello Edge's DS-CNN-S "
        "(Zhang et al. 2017), not this network's 22.6K")),
    "vww_mobilenet_v1_0.25_96": Published(7.490e6, None, _TINY.format("visual_wake_words, 7.490M", "325 kB")),
    "resnet8_cifar10": Published(12.502e6, None, _TINY.format("image_classification, 12.502M", "96 kB")),
    "ad_fc_autoencoder": Published(264.192e3, None, _TINY.format("anomaly_detection, 264.192K", "270 kB")),
    "bert_tiny": Published(None, 4.4e6, _TURC),
    "bert_mini": Published(None, 11.3e6, _TURC),
    "bert_small": Published(None, 29.1e6, _TURC),
    "bert_medium": Published(None, 41.7e6, _TURC),
    "ssdlite320_mobilenet_v3_large": Published(
        0.583e9, 3_440_060, "torchvision's SSDLite320_MobileNet_V3_Large_Weights.COCO_V1 at 320 x 320: 3,440,060 "
        "parameters, 0.583 GFLOPS, which torchvision counts as multiply-adds (ResNet-50: 4.09)",
        dims={"height": 320, "width": 320}),
}
