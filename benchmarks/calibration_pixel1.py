"""Calibration against a second published table, one the fits were not designed on: float MobileNetV2 latencies on
a Pixel 1's large core, every fit's leave-one-out figures and the nested automatic choice.

    .venv/bin/python benchmarks/calibration_pixel1.py [--session DIR [DIR ...]] [--repeats 15] [--iterations 100]
        [--warmup 10]
    make bench-calibration-pixel1 [SESSION="DIR [DIR ...]"]

Without --session it profiles, in one interleaved session at CPUS=1 (local backend, PER_OP=1), the zoo's float
builds of the 22 MobileNetV2 width × resolution variants of examples/pixel1_mobilenet_v2_float.csv (their
parameter and MAC counts equal the table's) into results/calibration-pixel1/results/, 15 repeats each: about
20 minutes on a 2-core host. `--session DIR [DIR ...]` reuses (and pools) sessions, as in calibration_pixel3.py.

Goals, the Pixel 3 family's: nested leave-one-out within ±10% at least 90% of the family, and the leave-one-out
coverage of the chosen fit's 95% prediction intervals between 90% and 98%.
"""

from __future__ import annotations

import argparse
import sys

from _calibration import PublishedTable, add_arguments, run_benchmark
from _common import ROOT

FAMILY = "MobileNetV2 family"
PIXEL1 = PublishedTable(
    benchmark="calibration_pixel1",
    csv=ROOT / "examples" / "pixel1_mobilenet_v2_float.csv",
    device="pixel-1",
    models=tuple(f"mobilenet_v2_{a}_{r}" for a in ("0.35", "0.5", "0.75", "1.0") for r in (96, 128, 160, 192, 224))
    + ("mobilenet_v2_1.3_224", "mobilenet_v2_1.4_224"),
    groups={FAMILY: ("mobilenet_v2_",)},
    share_goals={FAMILY: 0.90},
    coverage_group=FAMILY,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    run_benchmark(PIXEL1, "Pixel 1 (float MobileNetV2, one large core) against the harness at CPUS=1",
                  parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
