"""How fast the NAS-loop predictor answers (harness.calibration.nas.CellPredictor): NAS-Bench-201 cells predicted from
static facts and the device library, none of them run.

    .venv/bin/python benchmarks/nas_loop.py [--device raspi4] [--seconds 2]
    make bench-nas-loop

Calibrates on HELP's budget (the ten reference architectures and ten drawn from 0-899) of one NAS-Bench-201 device,
its own device's tables left out of the library, then predicts batches of 1, 100 and all 15,625 cells (as indices and
as cell strings, and through harness.predict, which returns a table) for about --seconds each, and prints
predictions per second for each (goal: at least 10,000) beside the test architectures' Spearman ρ, so a faster
predictor cannot be a worse one unseen. Writes results/bench/nas_loop.json.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import pandas as pd
from _common import OUT_DIR, ROOT, print_table, write_json
from scipy import stats

import harness
from harness.calibration.nas import CellPredictor
from harness.zoo.nb201_cells import ARCHITECTURES, cell_ops, cell_string

LATENCY_CSV = ROOT / "devices" / "library" / "nb201_latency_ms.csv"
REFERENCE_TXT = ROOT / "devices" / "library" / "nb201_reference_archs.txt"
GOAL = 10_000
BATCHES = (1, 100, ARCHITECTURES)


def rate(predict: Callable[[list], object], cells: list, seconds: float) -> float:
    """Predictions per second over repeated calls for about `seconds`."""
    done, started = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - started) < seconds or done == 0:
        predict(cells)
        done += len(cells)
    return done / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="raspi4")
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    latency = pd.read_csv(LATENCY_CSV, comment="#", index_col="arch_idx")[args.device]
    reference = [int(line) for line in REFERENCE_TXT.read_text().splitlines() if line.strip().isdigit()]
    drawn = np.random.default_rng(201).choice(900, 10, replace=False)
    measured = {int(i): float(latency[i]) for i in [*reference, *drawn]}
    started = time.perf_counter()
    device = f"nb201-{args.device.replace('_', '-')}"
    predictor = CellPredictor.fit(measured, device=device)
    harness.predict([0], device, measured=measured)  # fitted once here, as a search loop's first call does
    fit_s = time.perf_counter() - started
    test = list(range(900, 1900))
    rho = float(stats.spearmanr(predictor.intervals(test).predicted, latency.loc[test]).statistic)
    rows = []
    for size in BATCHES:
        indices = list(range(size))
        strings = [cell_string(cell_ops(i)) for i in indices]
        rows.append({"batch": size, "indices per s": rate(predictor.intervals, indices, args.seconds),
                     "cell strings per s": rate(predictor.intervals, strings, args.seconds),
                     "harness.predict per s": rate(lambda cells: harness.predict(cells, device, measured=measured),
                                                   indices, args.seconds)})
    print_table(f"NAS-loop predictor on {args.device}: fit {predictor.calibration.model.name} in {fit_s:.2f} s, "
                f"test ρ {rho:.3f}", rows)
    slowest = min(min(row["indices per s"], row["cell strings per s"], row["harness.predict per s"]) for row in rows
                  if row["batch"] >= 100)
    verdict = "met" if slowest >= GOAL else "missed"
    print(f"goal ≥ {GOAL:,} predictions a second in batches of 100 or more: {verdict} (slowest {slowest:,.0f})")
    write_json(OUT_DIR / "nas_loop.json", {"device": args.device, "fit": predictor.calibration.model.name,
                                           "fit_s": fit_s, "spearman": rho, "rows": rows, "goal": GOAL,
                                           "met": slowest >= GOAL})


if __name__ == "__main__":
    main()
