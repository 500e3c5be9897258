"""SSDLite320 with MobileNetV3-Large (torchvision's ssdlite320_mobilenet_v3_large: Howard et al. 2019, SSDLite of
Sandler et al. 2018), its backbone and head only: what runs per frame on an edge device, with anchor decoding and
non-maximum suppression left to the caller (they have no weights and depend on the detections, not the network).

torchvision's model also normalises and resizes its input (GeneralizedRCNNTransform); here the caller feeds images
already normalised at the size it wants. Built as torchvision builds the published COCO model (weights=None: the
reduced tail of MobileNetV3-Large, 3,440,060 parameters for 91 classes)."""

from __future__ import annotations

from torch import Tensor, nn
from torchvision.models.detection import ssdlite320_mobilenet_v3_large


class SSDLiteRaw(nn.Module):
    """forward(images [batch, 3, height, width]) -> (box regressions [batch, anchors, 4], class logits
    [batch, anchors, classes]); 3,234 anchors at 320 x 320."""

    def __init__(self, num_classes: int = 91) -> None:
        super().__init__()
        model = ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=num_classes)
        self.backbone, self.head = model.backbone, model.head

    def forward(self, images: Tensor) -> tuple[Tensor, Tensor]:
        outputs = self.head(list(self.backbone(images).values()))
        return outputs["bbox_regression"], outputs["cls_logits"]
