"""Engines side by side on published device tables: how far off the held-out predictions are from onnxruntime's,
ncnn's and LiteRT's timings on this host, and with the engine chosen inside the nested leave-one-out.

    .venv/bin/python benchmarks/calibration_engines.py [--session DIR [DIR ...]] [--repeats 5] [--iterations 100]
        [--warmup 10]
    make bench-calibration-engines [SESSION="DIR [DIR ...]"]

The tables: calibration_tables.TABLES (TFLite on Pixel 1, 2 and 3: LiteRT's tables) and ncnn's own one-thread
tables on six devices (examples/ncnn_*_1t.csv, ncnn's fp32 models the zoo builds). Without --session it profiles at
CPUS=1, one session per engine (RUNTIME=onnxruntime, ncnn, litert; PER_OP=1 where the engine has a per-op table),
every zoo model the tables hold; ncnn runs the float ones only (the int8 tables are TFLite's, whose int8 models
LiteRT's converter makes from the float ones), LiteRT all but VGG-16 (NOT_ON). About 40 minutes on a 2-core host,
conversions included. `--session DIR ...` reuses
sessions, their runs split by the engine they ran on.

Per table and group (every family of FAMILY_MIN models or more, and across families), on the models every engine of
the table ran: each engine's nested `auto` share within ±10% (the shipped harness-value rule and fits), and `auto
engine`, the (engine, fit) pair chosen again inside each fold from the others only
(harness.calibration.engine_choice). The engine policies scored: onnxruntime (what the harness did before engines),
the engine the table was measured with, and `auto engine`. Leave one table out: each table is scored with the policy
whose mean score is best over the *other* tables, so a policy ships only where it wins on tables it was not chosen on.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from _common import ROOT, Goal, print_table, profile_runs, write_report
from calibration_tables import FAMILY_MIN, METRIC, MODELS, SHIPPED, TABLES, Table, groups_of, table_points
from goals import VERDICTS

from harness.analysis.run_values import harness_values, split_by_engine
from harness.calibration.engine_choice import AUTO_ENGINE, common_points, compare_engines
from harness.calibration.points import model_facts_table
from harness.device.data import normalise_model_name
from harness.store.results import load_runs

PROFILE_DIR = ROOT / "results" / "calibration-engines"
ENGINES = ("onnxruntime", "ncnn", "litert")
NCNN_TABLES = tuple(
    Table(f"{device} ncnn fp32, 1 thread", f"ncnn_{slug}_1t.csv", f"ncnn-{slug.replace('_', '-')}")
    for slug, device in (("rpi4b", "Raspberry Pi 4B"), ("jetson_nano_cpu", "Jetson Nano CPU"),
                         ("sd835_big", "Snapdragon 835"), ("kirin970_big", "Kirin 970"), ("rk3588_big", "RK3588"),
                         ("celeron_n5105", "Celeron N5105")))
NCNN_MODELS = ("squeezenet1_1", "mobilenet_v1_1.0_224", "mobilenet_v2_1.0_224", "mobilenet_v3_large_1.0_224",
               "shufflenet_v2_x1_0", "mnasnet_1.0_224", "efficientnet_b0", "regnet_y_400mf", "inception_v1",
               "resnet18", "alexnet", "vgg16", "resnet50")
"""The zoo's builds of ncnn's fp32 benchmark models (each CSV's header names the architectures)."""
ALL_MODELS = tuple(dict.fromkeys((*MODELS, *NCNN_MODELS)))
NOT_ON = {"ncnn": "_int8", "litert": "vgg16"}
"""Left out per engine: ncnn runs float models (ncnn's int8 models are its own, not the tables'); onnx2tf needs more
than 24 GiB to convert VGG-16."""
PER_OP = ("onnxruntime", "ncnn")
"""The engines profiled with PER_OP=1 (the `ops` fit's depthwise share); LiteRT's Python interpreter has no profiler."""
MEASURED_WITH = {**{table.name: "litert" for table in TABLES}, **{table.name: "ncnn" for table in NCNN_TABLES}}
"""The engine each table was measured with: TFLite on the phones, benchncnn on ncnn's devices."""
OWN, BEFORE = "own engine", "onnxruntime"
POLICIES = (BEFORE, OWN, AUTO_ENGINE)
"""In order of preference on equal scores: what the harness did before engines first, so a change must win."""
GOAL = 0.85


@dataclass(frozen=True)
class Case:
    """One table and group: the models every engine of the table ran, which engines the nested (engine, fit) choice
    took, and compare_engines's rows (each engine's held-out figures, then the choice's)."""

    table: str
    group: str
    models: int
    picks: str
    rows: tuple[dict[str, Any], ...]

    def score(self, policy: str) -> float:
        return self.figure(policy, "within_10pct")

    def figure(self, policy: str, key: str) -> float:
        """One held-out figure (error_stats' keys) of the engine `policy` names; NaN where that engine ran nothing."""
        engine = MEASURED_WITH[self.table] if policy == OWN else policy
        return next((float(row[key]) for row in self.rows if row["engine"] == engine), np.nan)


def same_precision(points: pd.DataFrame) -> pd.DataFrame:
    """The pairs whose device model and harness model are both int8 or both float: a device's int8 row meets a float
    harness model when that engine ran no int8 variant (ncnn here), which is not the model the device ran."""
    if points.empty:
        return points
    int8 = [normalise_model_name(str(name))[1] is not None for name in points["model"]]
    harness_int8 = [normalise_model_name(str(name))[1] is not None for name in points["harness_model"]]
    return points[np.array(int8) == np.array(harness_int8)]


def table_cases(table: Table, values: dict[str, pd.DataFrame], facts: pd.DataFrame) -> list[Case]:
    """The table's groups, each compared across the engines whose runs hold the table's models
    (harness.calibration.engine_choice.compare_engines)."""
    device = table.device_data()
    points = {engine: same_precision(table_points(device, measured, facts)) for engine, measured in values.items()}
    same = common_points({engine: frame for engine, frame in points.items() if len(frame) >= FAMILY_MIN})
    if not same:
        return []
    cases = []
    for group, subset in groups_of(next(iter(same.values()))).items():
        names = set(subset["harness_model"])
        rows = compare_engines(METRIC, {engine: frame[frame["harness_model"].isin(names)]
                                        for engine, frame in same.items()}, SHIPPED.candidates)
        if rows:
            cases.append(Case(table.name, group, len(names),
                              next((row["fit"] for row in rows if row["engine"] == AUTO_ENGINE), ""), tuple(rows)))
    return cases


def table_score(cases: list[Case], table: str, policy: str, key: str = "within_10pct") -> float:
    """A table's figure `key` under `policy`, the mean over its groups: each table counts once."""
    return float(np.mean([case.figure(policy, key) for case in cases if case.table == table]))


def choose_policy(cases: list[Case], tables: list[str]) -> str:
    scores = {policy: np.nanmean([table_score(cases, table, policy) for table in tables]) for policy in POLICIES}
    return max(POLICIES, key=lambda policy: (round(float(scores[policy]), 9), -POLICIES.index(policy)))


def policy_means(cases: list[Case]) -> list[dict[str, Any]]:
    """Each engine policy's figures, a table counting once (the mean over its groups), averaged over the TFLite
    tables and over the ncnn tables: in-sample, beside the leave-one-table-out choice. With 8 to 22 models a table's
    share within ±10% moves by a model or two on noise; MAPE and the share within ±20% move less."""
    rows = []
    for kind, engine in (("TFLite tables", "litert"), ("ncnn tables", "ncnn")):
        tables = [t for t in dict.fromkeys(c.table for c in cases) if MEASURED_WITH[t] == engine]
        for policy in POLICIES:
            means = {key: float(np.nanmean([table_score(cases, table, policy, key) for table in tables]))
                     for key in ("within_10pct", "within_20pct", "mape_pct")}
            rows.append({"tables": f"{kind} ({len(tables)})", "policy": policy, **means})
    return rows


def side_by_side(cases: list[Case]) -> list[dict[str, Any]]:
    """Per table and group: each engine's nested share within ±10% and ±20% and MAPE, and the engine choice's."""
    def cell(rows: dict[str, dict[str, Any]], engine: str) -> str:
        row = rows.get(engine)
        return "—" if row is None else (f"{row['within_10pct']:.0%} / {row['within_20pct']:.0%} "
                                        f"({row['mape_pct']:.0f}%)")

    out = []
    for case in cases:
        rows = {row["engine"]: row for row in case.rows}
        out.append({"table": case.table, "group": case.group, "models": case.models,
                    "measured with": MEASURED_WITH[case.table],
                    **{engine: cell(rows, engine) for engine in (*ENGINES, AUTO_ENGINE)},
                    "engines picked per fold": case.picks})
    return out


def loto_rows(cases: list[Case]) -> list[dict[str, Any]]:
    tables = list(dict.fromkeys(case.table for case in cases))
    rows = []
    for table in tables:
        policy = choose_policy(cases, [other for other in tables if other != table])
        for case in (c for c in cases if c.table == table):
            rows.append({"table": table, "group": case.group, "models": case.models,
                         "policy (chosen on the others)": policy, "LOTO within ±10%": case.score(policy),
                         "own engine": case.score(OWN), "onnxruntime": case.score(BEFORE)})
    return rows


def goals_of(rows: list[dict[str, Any]], cases: list[Case]) -> list[Goal]:
    goals = []
    for row in rows:
        if row["group"] != "across families":
            continue
        goals.append(Goal(f"{row['table']}, across families: LOTO nested within ±10%", f"≥ {GOAL:.0%}",
                          f"{row['LOTO within ±10%']:.0%} of {row['models']} ({row['policy (chosen on the others)']})",
                          row["LOTO within ±10%"] >= GOAL))
        goals.append(Goal(f"{row['table']}, across families: from the engine it was measured with", f"≥ {GOAL:.0%}",
                          f"{row['own engine']:.0%} of {row['models']} (onnxruntime {row['onnxruntime']:.0%})",
                          row["own engine"] >= GOAL))
    tables = list(dict.fromkeys(case.table for case in cases))
    goals.append(Goal("shipped engine policy = the one chosen on every table", "information",
                      choose_policy(cases, tables), None))
    return goals


def profiled_sessions(args: argparse.Namespace) -> list[Path]:
    if args.session:
        return [Path(directory) for directory in args.session]
    flags = ["--cpus", "1", "--memory", "2g", "--iterations", str(args.iterations), "--warmup", str(args.warmup)]
    sessions = []
    for engine in ENGINES:
        models = [m for m in ALL_MODELS if engine not in NOT_ON or NOT_ON[engine] not in m]
        session = profile_runs(PROFILE_DIR, None, [], backend="local", repeats=args.repeats, models=models,
                               extra_flags=[*flags, "--runtime", engine, *(["--per-op"] if engine in PER_OP else [])])
        sessions.append(PROFILE_DIR / "results" / session.runs[0]["session_id"])
    return sessions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--session", nargs="+", default=os.environ.get("HARNESS_BENCH_SESSION", "").split() or None,
                        help="reuse these session directories (their runs split by engine) instead of profiling")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    args = parser.parse_args()
    sessions = profiled_sessions(args)
    runs = [run for session in sessions for run in load_runs(session)]
    facts = model_facts_table(runs)
    values = {engine: harness_values(engine_runs, METRIC, SHIPPED.rule)
              for engine, engine_runs in split_by_engine(runs).items()}
    cases = [case for table in (*TABLES, *NCNN_TABLES) for case in table_cases(table, values, facts)]
    side = side_by_side(cases)
    print_table("Each table's nested share within ±10% / ±20% (MAPE) from each engine's timings, and with the engine "
                "chosen inside each fold", side)
    means = policy_means(cases)
    print_table("Each engine policy's mean over the tables measured with each engine (in-sample)", means)
    rows = loto_rows(cases)
    print_table("Leave-one-table-out: each table scored with the engine policy chosen on the others", rows)
    goals = goals_of(rows, cases)
    print_table("Goals", [{"goal": g.name, "target": g.target, "measured": g.measured, "verdict": VERDICTS[g.met]}
                          for g in goals])
    write_report("calibration_engines", rows, goals, [f"harness runs: {' '.join(map(str, sessions))}"],
                 {"side_by_side": side, "policy_means": means,
                  "engines": {f"{case.table} / {case.group}": case.rows for case in cases}})


if __name__ == "__main__":
    sys.exit(main())
