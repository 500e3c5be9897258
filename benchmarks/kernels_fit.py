"""The `kernels` fit in the nested choice: what a device's own kernel table adds to its model-level calibration.

    .venv/bin/python benchmarks/kernels_fit.py --device PER_OP_SESSION SECOND_SESSION --harness SESSION
                                               [--counts 5 10] [--draws 10]

The device: a per-op session of it (its rows become the device's kernel table, `<device>-fp32`, written with
harness.kernels.table.write_table) and a second session without the profiler (each model's median headline latency
is the device's measurement, imported with `harness import-device`). The harness: a session of the same models under
other conditions (e.g. this host at CPUS=2 for a 1-thread board). Everything else is the product's own path:
`harness.regress` and `harness.load_predictor` on a results folder holding the harness session and the device.

Two arms, the same in all but one thing: the kernel table is in the results folder or it is not (the library is on in
both). Printed per arm: `regress`'s nested leave-one-out `auto` on every model (the figure `regress` prints, and which
fit each fold picked), then for k calibration models drawn at random (the same draws in both arms) the share of the
other models predicted within ±10% and ±20%, the median error and the 95% intervals' coverage.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
from _common import Goal, print_table, write_report
from kernels import ENGINE, headline

import harness
from harness.cli import main as cli
from harness.kernels.table import kernels_root, now_utc, write_table
from harness.kernels.training import as_table_rows, session_tables

DEVICE = "board-onnxruntime-1t"


def kernel_table(folder: Path, per_op_session: Path) -> None:
    """The device's per-op session as its kernel table, named as a probe of the device's board names it, under
    `folder` (a results folder's kernels/ links to it: one table, so its fits without each family are made once)."""
    rows = as_table_rows(t for t in session_tables([per_op_session], ENGINE) if t.latency_ms > 0)
    name = f"{DEVICE}-fp32"
    meta = {"name": name, "device": DEVICE, "engine": ENGINE, "threads": 1, "cpus": 1.0, "precision": "fp32",
            "created": now_utc(), "probing_s": 0.0, "sessions": [per_op_session.name], "source": str(per_op_session),
            "cpu": ""}
    write_table(folder / name, meta, rows, {})


def results_folder(root: Path, harness_session: Path, device: dict[str, float], models: list[str],
                   with_kernels: Path | None) -> Path:
    """A results folder holding the harness session (linked), the device's measurements of `models` and, with
    `with_kernels` (the folder kernel_table wrote), its kernel table (linked)."""
    root.mkdir(parents=True)
    (root / harness_session.name).symlink_to(harness_session.resolve())
    csv = root / "device.csv"
    csv.write_text("model,threads,latency_ms\n" + "".join(f"{m},1,{device[m]!r}\n" for m in models))
    if cli(["import-device", str(csv), "--device", DEVICE, "--results-dir", str(root)]) != 0:
        raise SystemExit(f"import-device failed for {csv}")
    if with_kernels is not None:
        kernels_root(root).symlink_to(with_kernels.resolve())
    return root


def scores(predicted: pd.DataFrame) -> dict[str, Any]:
    error = (predicted["predicted"] / predicted["device"] - 1).abs()
    inside = (predicted["low"] <= predicted["device"]) & (predicted["device"] <= predicted["high"])
    return {"within ±10%": f"{(error <= 0.10).mean():.0%}", "within ±20%": f"{(error <= 0.20).mean():.0%}",
            "median |error|": f"{error.median():.1%}", "95% coverage": f"{inside.mean():.0%}",
            "predictions": len(predicted)}


def arm(folder: Path, args: argparse.Namespace, device: dict[str, float], with_kernels: bool) -> list[dict[str, Any]]:
    """One arm's rows: the nested leave-one-out on every model, then each count's random draws."""
    models = sorted(device)
    kernels = None
    if with_kernels:
        kernels = folder / "kernels"
        kernel_table(kernels, args.device[0])
    name = "with" if with_kernels else "without"
    root = results_folder(folder / f"{name}-all", args.harness, device, models, kernels)
    (calibration,) = harness.regress(DEVICE, session=args.harness.name, results_dir=root).calibrations.calibrations
    auto = next(row for row in calibration.comparison if row["fit"] == "auto")
    rows = [{"arm": f"{name} kernel table", "calibration": f"all {len(models)}, nested leave-one-out",
             "within ±10%": f"{auto['within_10pct']:.0%}", "within ±20%": f"{auto['within_20pct']:.0%}",
             "median |error|": "-", "95% coverage": f"{auto['coverage']:.0%}", "predictions": len(models),
             "fits chosen": auto["note"].removeprefix("picked per fold: ")}]
    for count in args.counts:
        found, chosen = [], Counter()
        for draw in range(args.draws):
            picked = sorted(random.Random(draw).sample(models, count))
            root = results_folder(folder / f"{name}-{count}-{draw}", args.harness, device, picked, kernels)
            predictor = harness.load_predictor(DEVICE, session=args.harness.name, results_dir=root)
            rest = [m for m in models if m not in picked]
            for p in predictor.predict(rest):
                if p.predicted is not None:
                    found.append({"model": p.model, "predicted": p.predicted, "low": p.pi_low, "high": p.pi_high,
                                  "device": device[p.model], "fit": p.fit})
                    chosen[p.fit] += 1
        rows.append({"arm": f"{name} kernel table", "calibration": f"{count} models, {args.draws} draws",
                     **scores(pd.DataFrame(found)),
                     "fits chosen": ", ".join(f"{fit} {n}" for fit, n in chosen.most_common())})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", nargs=2, type=Path, required=True, metavar=("PER_OP_SESSION", "SECOND_SESSION"))
    parser.add_argument("--harness", type=Path, required=True, metavar="SESSION")
    parser.add_argument("--counts", nargs="+", type=int, default=[5, 10])
    parser.add_argument("--draws", type=int, default=10)
    args = parser.parse_args()
    device = {m: v for m, v in headline(args.device[1]).items() if m in headline(args.harness)}
    with tempfile.TemporaryDirectory(prefix="bench-kernels-fit-") as tmp:
        rows = [*arm(Path(tmp), args, device, False), *arm(Path(tmp), args, device, True)]
    print_table(f"{DEVICE}: {len(device)} models, the harness session {args.harness.name}", rows)
    nested = {row["arm"]: float(row["within ±10%"].rstrip("%")) for row in rows if "nested" in row["calibration"]}
    better = nested["with kernel table"] >= nested["without kernel table"]
    goals = [Goal("nested auto within ±10% with the kernel table", "≥ without it",
                  f"{nested['with kernel table']:.0f}% against {nested['without kernel table']:.0f}%", better)]
    write_report("kernels-fit", rows, goals, [f"device sessions {args.device[0]} and {args.device[1]}, harness "
                                              f"session {args.harness}; median device latency "
                                              f"{statistics.median(device.values()):.3g} ms"],
                 raw={"device_ms": device, "counts": args.counts, "draws": args.draws})
    return 0


if __name__ == "__main__":
    sys.exit(main())
