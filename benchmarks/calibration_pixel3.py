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
import os
import sys
from pathlib import Path
from typing import Any

from _common import ROOT, Goal, print_table, profile_runs, write_report

from harness.calibrate import Calibration, calibrate_device, model_facts_table
from harness.device_data import DeviceData, parse_device_csv
from harness.metric_registry import ACROSS_REPEATS, FASTEST_INFERENCE
from harness.run_values import harness_values, metric_table
from harness.store import load_runs

EXAMPLE = ROOT / "examples" / "pixel3_quant_tflite.csv"
PROFILE_DIR = ROOT / "results" / "calibration-pixel3"
MOBILENET_V1 = [f"mobilenet_v1_{a}_{r}_int8_static" for a in ("0.25", "0.5", "0.75", "1.0")
                for r in (128, 160, 192, 224)]
MODELS = [*MOBILENET_V1, "mobilenet_v2_1.0_224_int8_static", "inception_v1_int8_static", "inception_v3_int8_static",
          "squeezenet1_0_int8_static", "resnet18_int8_static"]
SEVERAL_FAMILIES = ("mobilenet_v1_", "mobilenet_v2_", "inception_v3_")
EVERY_MODEL = "several families + Inception-v1"
GROUPS: dict[str, tuple[str, ...]] = {
    "MobileNetV1 family": ("mobilenet_v1_",),
    "several families": SEVERAL_FAMILIES,
    EVERY_MODEL: (*SEVERAL_FAMILIES, "inception_v1_"),
}
"""The first two are the groups the goals name; the third adds a model the zoo gained later: every model of the
example the zoo has, on which the coverage goal is checked."""
SHARE_GOALS = {"MobileNetV1 family": 0.90, "several families": 0.85}
"""Each goal group's least nested share within ±10% (device latency_ms, the fastest inference)."""
COVERAGE_GOAL = (0.90, 0.98)


def profiled_sessions(args: argparse.Namespace) -> list[Path]:
    """The session directories to calibrate: --session, or a new profiling session kept under PROFILE_DIR."""
    if args.session:
        return [Path(directory) for directory in args.session]
    # Zoo names, not the cached files' paths: a path's stem carries the cache's content hash, which no device
    # row's model name matches.
    session = profile_runs(PROFILE_DIR, None, [], backend="local", repeats=args.repeats, models=MODELS,
                           extra_flags=["--per-op", "--cpus", "1", "--memory", "2g",
                                        "--iterations", str(args.iterations), "--warmup", str(args.warmup)])
    return [PROFILE_DIR / "results" / session.runs[0]["session_id"]]


def calibrate_group(device: DeviceData, runs: list[dict[str, Any]], prefixes: tuple[str, ...],
                    column: str, across: str) -> Calibration:
    """The device rows of one group, fitted against harness latency (whichever device column is compared), each
    model's repeats summarised as `across` says."""
    table = device.table[device.table["model"].str.startswith(prefixes)].reset_index(drop=True)
    subset = DeviceData(device.name, table, device.info)
    values = {column: harness_values(runs, "latency_ms", across)}
    (calibration,) = calibrate_device(subset, values, facts=model_facts_table(runs)).calibrations
    return calibration


def repeat_spread(runs: list[dict[str, Any]]) -> float:
    """Median over models of the spread of their repeats' latency, (max − min) / median: the harness's own noise,
    which no fit can remove (a busy host inflates some repeats' per-inference times)."""
    values = metric_table(runs, "latency_ms").groupby("model_name")["value"]
    return float(((values.max() - values.min()) / values.median()).median())


def goal_calibrations(device: DeviceData, runs: list[dict[str, Any]]) -> dict[str, Calibration]:
    """Each group's calibration that the goals are checked on: device latency_ms, the fastest inference."""
    return {group: calibrate_group(device, runs, prefixes, "latency_ms", FASTEST_INFERENCE)
            for group, prefixes in GROUPS.items()}


def issue_goals(calibrations: dict[str, Calibration]) -> list[Goal]:
    """The goals: each goal group's nested share within ±10%, and the coverage on every model of the example."""
    goals = []
    for group, target in SHARE_GOALS.items():
        stats = calibrations[group].stats
        goals.append(Goal(f"{group}: nested leave-one-out within ±10%", f"≥ {target:.0%}",
                          f"{stats['loo_within_10pct']:.0%} (±20%: {stats['loo_within_20pct']:.0%})",
                          stats["loo_within_10pct"] >= target))
    every = calibrations[EVERY_MODEL]
    coverage = every.stats["loo_coverage"]
    goals.append(Goal("95% prediction intervals: leave-one-out coverage, every model of the example", "90% to 98%",
                      f"{coverage:.0%} of {every.fit.n}", COVERAGE_GOAL[0] <= coverage <= COVERAGE_GOAL[1]))
    return goals


def rows_of(group: str, column: str, across: str, calibration: Calibration) -> list[dict[str, Any]]:
    return [
        {"group": group, "device column": column, "repeats →": across, "n": calibration.fit.n,
         "fit": f"{row['fit']} ✓" if row["chosen"] else row["fit"],
         "within ±10%": row.get("within_10pct"), "within ±20%": row.get("within_20pct"), "MAPE %": row.get("mape_pct"),
         "Kendall τ": row.get("kendall_tau"), "95% PI coverage": row.get("coverage"), "note": row["note"]}
        for row in calibration.comparison
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--session", nargs="+", default=os.environ.get("HARNESS_BENCH_SESSION", "").split() or None,
                        help="reuse these session directories (their runs pooled) instead of profiling "
                             "(make: SESSION=\"DIR [DIR ...]\")")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    args = parser.parse_args()
    table, info = parse_device_csv(EXAMPLE)
    device = DeviceData("pixel-3", table, info)
    sessions = profiled_sessions(args)
    runs = [run for session in sessions for run in load_runs(session)]
    rows, chosen = [], {}
    for across in ACROSS_REPEATS:
        for column in ("latency_ms", "nnapi_ms"):
            for group, prefixes in GROUPS.items():
                calibration = calibrate_group(device, runs, prefixes, column, across)
                rows += rows_of(group, column, across, calibration)
                chosen[(group, column, across)] = calibration
    print_table("Pixel 3 against the harness at CPUS=1: leave-one-out figures per fit; `auto` is nested", rows)
    for (group, column, across), calibration in chosen.items():
        print(f"{group}, {column}, {across}: chosen {calibration.model.name}: {calibration.model.equation}; "
              f"{calibration.choice['reason']}")
    goals = issue_goals({group: chosen[(group, "latency_ms", FASTEST_INFERENCE)] for group in GROUPS})
    every = chosen[(EVERY_MODEL, "latency_ms", FASTEST_INFERENCE)]
    goals.append(Goal("harness noise: median spread of a model's repeats, (max − min) / median", "information",
                      f"{repeat_spread(runs):.0%}", None))
    for (group, column, across), calibration in chosen.items():
        if (column, across) != ("latency_ms", FASTEST_INFERENCE) or group not in SHARE_GOALS:
            goals.append(Goal(f"{group}, {column}, {across}: nested within ±10%", "information",
                              f"{calibration.stats['loo_within_10pct']:.0%}", None))
    print_table("Goals", [{"goal": g.name, "target": g.target, "measured": g.measured,
                           "verdict": {True: "met", False: "MISSED", None: "info"}[g.met]} for g in goals])
    regress_session, holding = (sessions[0].name, "that session") if len(sessions) == 1 else ("all", "those only")
    notes = [f"harness runs: {' '.join(map(str, sessions))} (reuse them with --session); the latency_ms figures "
             f"of the {every.fit.n} models, as regress prints them: harness import-device examples/{EXAMPLE.name} "
             f"--device pixel-3 --results-dir DIR && harness regress --device pixel-3 --results-dir DIR "
             f"--session {regress_session}, DIR holding {holding}"]
    raw = {f"{group} / {column} / {across}": c.points.to_dict(orient="records")
           for (group, column, across), c in chosen.items()}
    write_report("calibration_pixel3", rows, goals, notes, raw)


if __name__ == "__main__":
    sys.exit(main())
