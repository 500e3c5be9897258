"""The zoo's newer families against their published multiply-adds and parameter counts: each export's facts (MACs
of one sample, initializer elements after BatchNorm folding) within 2% of the paper's or the maintainers' figure. A
model exported with dynamic dims (the detector's height and width) is counted at the size its figures are for."""

from __future__ import annotations

import pytest

from harness import zoo
from harness.models.facts import onnx_facts
from harness.zoo.published import PUBLISHED, TOLERANCE
from tests.zoo_support import zoo_cache  # noqa: F401  (fixture)

FAST = {"mobilenet_v3_small_0.75_224", "efficientnet_b0", "efficientnet_lite0", "regnet_y_400mf", "ghostnet_0.5_224",
        "shufflenet_v2_x0_25", "kws_dscnn", "vww_mobilenet_v1_0.25_96", "resnet8_cifar10", "ad_fc_autoencoder",
        "bert_tiny"}
"""Checked in every `make test`: the smallest variant of each new family with a published figure (test_zoo and
test_zoo_tiny export them anyway), and MobileNetV3-Small 0.75, which tells the paper's expansion widths from
torchvision's. The rest (7-50 s of export each, AlexNet and VGG-16 hundreds of MB) run in `make test-slow`."""


def test_every_published_model_is_a_listed_zoo_model() -> None:
    listed = {m["name"] for m in zoo.list_models()}
    assert FAST <= set(PUBLISHED) <= listed
    assert all(figure.macs or figure.params for figure in PUBLISHED.values())
    for name, figure in PUBLISHED.items():  # dims fix a signature's dynamic dims, and only those
        signature = zoo.parse(name).signature
        dynamic = {dim.name for dim in signature.dims} if signature else set()
        assert set(figure.dims or {}) <= dynamic, name
        assert figure.macs is None or set(figure.dims or {}) == dynamic, f"{name}: a dynamic model's MACs need sizes"


@pytest.mark.usefixtures("zoo_cache")
@pytest.mark.parametrize("name", [n if n in FAST else pytest.param(n, marks=pytest.mark.slow) for n in PUBLISHED])
def test_facts_match_the_published_figures(name: str) -> None:
    pytest.importorskip("torchvision", reason="needs the zoo extra: make setup-zoo")
    figure = PUBLISHED[name]
    facts = onnx_facts(zoo.export(name), figure.dims)
    for key, published in (("macs", figure.macs), ("params", figure.params)):
        if published is not None:
            error = facts[key] / published - 1
            assert abs(error) <= TOLERANCE, f"{name} {key}: {facts[key] / 1e6:.2f}M vs {published / 1e6:g}M " \
                                            f"({error:+.1%}, {figure.source})"
