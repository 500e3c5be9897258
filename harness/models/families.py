"""Which architecture family a model belongs to: calibration holds best within a family, so `regress` reports its
held-out share per family, `predict` widens the interval of a model whose family has no calibration model, and
`suggest` measures such a family first.

A zoo name knows its family (`mobilenet_v1_0.5_160_int8_static` → `mobilenet_v1`). Any other name is its family
once the trailing variant tokens are dropped: numbers (width, resolution, version) and precision words
(`resnet_v2_101_quant` → `resnet_v2`, `my_net_1.0_224` → `my_net`). A device CSV's `family` column overrides both.
"""

from __future__ import annotations

import re
from functools import cache

from harness.zoo import registry as zoo_registry

_VARIANT_TOKEN = r"(?:\d+(?:\.\d+)?|int8|uint8|quant|quantized|qdq|static|dynamic|float|float32|fp32)"
_TRAILING_VARIANTS = re.compile(rf"(?:[_-]{_VARIANT_TOKEN})+$", re.IGNORECASE)


@cache  # a NAS loop asks for thousands of names, each matched against every zoo family's pattern
def model_family(name: str) -> str:
    """The family of a harness model name: the zoo's family key, else the name without its variant tokens."""
    return zoo_registry.family_key(name) or _TRAILING_VARIANTS.sub("", name) or name
