"""Calibration against published Pixel 3 latencies: every fit's leave-one-out figures and the nested automatic
choice, within one architecture family and across several.

    .venv/bin/python benchmarks/calibration_pixel3.py [--session DIR [DIR ...]] [--repeats 15] [--iterations 100]
        [--warmup 10]
    make bench-calibration [SESSION="DIR [DIR ...]"]

Without --session it profiles, in one interleaved session at CPUS=1 (local backend, PER_OP=1 so that the `ops`
fit is a candidate), the zoo's int8 builds of the models of examples/pixel3_quant_tflite.csv that the zoo has
(16 MobileNetV1 width × resolution variants, MobileNetV2 1.0/224, Inception-v1, Inception-v3) plus SqueezeNet
1.0 and ResNet-18, which the phone's table lacks (the candidates `harness suggest` ranks), into
results/calibration-pixel3/results/, 15 repeats each (fewer leave the goals to the host's noise: see
docs/calibration.md). That takes about 20 minutes on a 2-core host.
`--session DIR` reuses a session directory such a run (or `harness profile`) left; several directories pool
their runs (each model's fastest inference of all their repeats), as `harness regress --session all` does.

Groups: the MobileNetV1 family (16 models) and the several families together (18 models); as information, the
several families with Inception-v1 (19 models; sessions profiled before the zoo had it lack it). Device columns:
`latency_ms` (TFLite CPU, 4 threads) carries the goals; `nnapi_ms` (the NNAPI delegate, another execution
engine: in effect a second device) is shown as information on how the fits fare on other data. Each is fitted
from each model's fastest inference of all repeats (the default for latency) and, for comparison on the same runs,
from its fastest repeat and from the median of its repeats.
Goals: nested leave-one-out within ±10% at least 90% for the family and 85% across families; the leave-one-out
coverage of the chosen fit's 95% prediction intervals between 90% and 98% on the example data (all its models the
session has: 19, or 18 without Inception-v1).
"""

from __future__ import annotations

import argparse
import sys

from _calibration import PublishedTable, add_arguments, run_benchmark
from _common import ROOT

MOBILENET_V1 = tuple(f"mobilenet_v1_{a}_{r}_int8_static" for a in ("0.25", "0.5", "0.75", "1.0")
                     for r in (128, 160, 192, 224))
SEVERAL_FAMILIES = ("mobilenet_v1_", "mobilenet_v2_", "inception_v3_")
EVERY_MODEL = "several families + Inception-v1"
PIXEL3 = PublishedTable(
    benchmark="calibration_pixel3",
    csv=ROOT / "examples" / "pixel3_quant_tflite.csv",
    device="pixel-3",
    models=(*MOBILENET_V1, "mobilenet_v2_1.0_224_int8_static", "inception_v1_int8_static", "inception_v3_int8_static",
            "squeezenet1_0_int8_static", "resnet18_int8_static"),
    # The first two are the groups the goals name; the third adds a model the zoo gained later: every model of the
    # example the zoo has, on which the coverage goal is checked.
    groups={"MobileNetV1 family": ("mobilenet_v1_",), "several families": SEVERAL_FAMILIES,
            EVERY_MODEL: (*SEVERAL_FAMILIES, "inception_v1_")},
    share_goals={"MobileNetV1 family": 0.90, "several families": 0.85},
    coverage_group=EVERY_MODEL,
    columns=("latency_ms", "nnapi_ms"),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    run_benchmark(PIXEL3, "Pixel 3 against the harness at CPUS=1", parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
