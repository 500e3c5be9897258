"""Leave-one-table-out calibration: how far off the harness's predictions are on a device table that no choice of
the calibration was made on, and how that grows with the number of models measured on the device.

    .venv/bin/python benchmarks/calibration_tables.py [--session DIR [DIR ...]] [--repeats 15] [--iterations 100]
        [--warmup 10] [--draws 40]
    make bench-calibration [SESSION="DIR [DIR ...]"]

The tables are every published device table under examples/ (TABLES: TFLite latencies of int8 and float image
classifiers on Pixel 1, 2 and 3 phones, from TensorFlow's hosted-models page and the TF-Slim MobileNetV2 README;
each CSV's header names its source). Without --session it profiles, in one interleaved session at CPUS=1 with
PER_OP=1 and 15 repeats, the zoo's builds of every model those tables hold (MODELS: int8 and float; about two hours
on a 2-core host) into results/calibration-tables/results/. `--session DIR ...` reuses sessions, their runs pooled.

Each table's groups: every architecture family with at least FAMILY_MIN models of the table ("one family"), and,
for a table of several families, all its models ("across families"). Each group is calibrated as `harness regress`
does (every fit's leave-one-out, the nested automatic choice) under every policy (POLICIES: a harness-value rule,
`--across-repeats`, and the fits `auto` chooses among).

Every global choice is made the way a table never sees it: for each table, the policy is the one with the best mean
nested share within ±10% over the *other* tables, the extrapolation spread (harness.calibration.reach) the one whose
widened intervals cover the other tables' models outside their folds' reach closest to 95%, and the few-models
threshold (harness.calibration.choice.FEW_MODELS) the one whose learning curves, from suggest's picks, are best on
the other tables. The table is then scored with those choices: its leave-one-table-out (LOTO) figure. Beside it: the
in-table figure (the policy best on that table itself: what a choice made on its own test data would claim) and the
figure with the harness's shipped defaults, which must be the choices made on all the tables.

Few-shot: each table's models are calibrated from k = 3, 5, 8, 10 of them, picked by `harness suggest` before any
measurement and at random (--draws seeded draws), and the rest predicted: the share within ±10% and inside the 95%
interval (harness.calibration.few_shot), printed and drawn as learning curves (results/bench/
calibration_tables_learning.png).
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from _common import OUT_DIR, ROOT, Goal, print_table, profile_runs, write_report
from goals import VERDICTS

from harness.analysis.run_values import harness_values
from harness.calibration.calibrate import AUTO_CANDIDATES, Calibration, calibrate_points
from harness.calibration.choice import Candidates
from harness.calibration.few_shot import Trial, curve_table, learning_curve
from harness.calibration.fits import FIT_NAMES
from harness.calibration.points import model_facts_table, paired_points
from harness.calibration.reach import EXTRAPOLATION_SPREAD
from harness.core.metric_registry import ACROSS_REPEATS, get
from harness.device.data import DeviceData
from harness.device.importer import DeviceFile, read_device
from harness.report.figures import draw_learning_curve
from harness.store.results import load_runs

EXAMPLES = ROOT / "examples"
PROFILE_DIR = ROOT / "results" / "calibration-tables"
METRIC = "latency_ms"
FAMILY_MIN = 4
SPREADS = (0.0, 0.025, 0.05, 0.075, 0.10, 0.125, 0.15, 0.2, 0.25, 0.3)
COVERAGE_TARGET = 0.95
GOALS = {"across families": 0.85, "one family": 0.95, "coverage": (0.90, 0.98), "suggest k=5": 0.80}
GOAL_K = 5


@dataclass(frozen=True)
class Table:
    """One published device table: its name, CSV under examples/, and the device name its rows are stored as."""

    name: str
    csv: str
    device: str

    def device_data(self) -> DeviceData:
        return read_device([DeviceFile(EXAMPLES / self.csv)], self.device)


TABLES = (
    Table("Pixel 3 int8, 4 threads", "pixel3_quant_tflite.csv", "pixel-3"),
    Table("Pixel 2 int8, 1 thread", "pixel2_quant_tflite.csv", "pixel-2"),
    Table("Pixel 2 float, 1 thread", "pixel2_float_tflite.csv", "pixel-2"),
    Table("Pixel 1 float MobileNetV2, 1 thread", "pixel1_mobilenet_v2_float.csv", "pixel-1"),
    Table("Pixel 1 float MnasNet, 1 thread", "pixel1_mnasnet_float.csv", "pixel-1"),
)
_MOBILENET_V1 = tuple(f"mobilenet_v1_{a}_{r}" for a in ("0.25", "0.5", "0.75", "1.0") for r in (128, 160, 192, 224))
_MOBILENET_V2 = ("mobilenet_v2_1.4_224", "mobilenet_v2_1.3_224",
                 *(f"mobilenet_v2_{a}_{r}" for a in ("0.35", "0.5", "0.75", "1.0") for r in (96, 128, 160, 192, 224)))
_MNASNET = ("mnasnet_0.5_224", "mnasnet_0.75_224", *(f"mnasnet_1.0_{r}" for r in (96, 128, 160, 192, 224)),
            "mnasnet_1.3_224")
MODELS = (
    *(f"{name}_int8_static" for name in (*_MOBILENET_V1, "mobilenet_v2_1.0_224", "inception_v1", "inception_v3")),
    *_MOBILENET_V1, *_MOBILENET_V2, *_MNASNET, "squeezenet1_0", "inception_v3",
)
"""The zoo models the tables hold: int8 (static quantization, as TFLite's `_quant` models) and float."""


@dataclass(frozen=True)
class Policy:
    """The global choices scored on the tables: a harness-value rule and the fits the automatic choice takes."""

    rule: str
    candidates: Candidates

    @property
    def label(self) -> str:
        names = self.candidates.names
        fits = "every fit" if names == FIT_NAMES else "no " + ", ".join(n for n in FIT_NAMES if n not in names)
        return f"{self.rule}, {fits}"


WITHOUT_FEATURES = tuple(name for name in FIT_NAMES if name != "features")
POLICIES = tuple(Policy(rule, replace(AUTO_CANDIDATES, names=names)) for rule in ACROSS_REPEATS
                 for names in (FIT_NAMES, WITHOUT_FEATURES))
"""In order of preference on equal scores: the rules as ACROSS_REPEATS lists them, every fit before fewer."""
SHIPPED = Policy(get(METRIC).across_repeats, AUTO_CANDIDATES)
FEW_MODELS_OPTIONS = (12, 10, 8, 6, 0)
"""Thresholds below which `auto` takes only FEW_MODEL_FITS, scored on the learning curves; on equal scores the
larger (the simpler fits more often) is preferred. 0: never."""


@dataclass
class Case:
    """One table × group × policy, calibrated: its nested held-out figures."""

    table: str
    group: str
    policy: Policy
    calibration: Calibration

    @property
    def share(self) -> float:
        return float(self.calibration.stats["loo_within_10pct"])

    def inside(self, spread: float) -> np.ndarray:
        low, high = self.calibration.held_out.interval(spread)
        y = self.calibration.points["device"].to_numpy(float)
        return (low <= y) & (y <= high)

    @property
    def outside(self) -> np.ndarray:
        return self.calibration.held_out.outside > 0


def groups_of(points: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """One group per family with FAMILY_MIN models or more, and all models when there are several families."""
    counts = points["family"].value_counts()
    groups = {f"one family: {family}": points[points["family"] == family]
              for family, count in counts.items() if count >= FAMILY_MIN}
    if len(counts) > 1:
        groups["across families"] = points
    return groups


def table_points(device: DeviceData, values: pd.DataFrame, facts: pd.DataFrame) -> pd.DataFrame:
    """The table's device latencies beside the harness's, each model's repeats summarised by `rule`."""
    points = paired_points(device, values, METRIC, "cpus")
    return points if points.empty else points.join(facts, on="harness_model")


def all_points(runs: list[dict[str, Any]]) -> dict[tuple[Table, str], pd.DataFrame]:
    """Every table's points under every harness-value rule: each table read once, the runs summarised once per
    rule, the models' facts read once."""
    facts = model_facts_table(runs)
    values = {rule: harness_values(runs, METRIC, rule) for rule in ACROSS_REPEATS}
    points = {}
    for table in TABLES:
        device = table.device_data()
        for rule in ACROSS_REPEATS:
            points[(table, rule)] = table_points(device, values[rule], facts)
    return points


def calibrate_cases(points_by: dict[tuple[Table, str], pd.DataFrame]) -> list[Case]:
    cases = []
    for (table, rule), points in points_by.items():
        if points.empty:
            continue
        for group, subset in groups_of(points).items():
            for policy in (p for p in POLICIES if p.rule == rule):
                calibration = calibrate_points(METRIC, {}, subset, candidates=policy.candidates)
                cases.append(Case(table.name, group, policy, calibration))
    return cases


def table_score(cases: list[Case], table: str, policy: Policy) -> float:
    """A table's mean nested share within ±10% over its groups, under `policy`: each table counts once."""
    return float(np.mean([c.share for c in cases if c.table == table and c.policy == policy]))


def choose_policy(cases: list[Case], tables: list[str]) -> Policy:
    """The policy with the best mean table score over `tables`; a tie goes to the earlier one in POLICIES."""
    scores = {p: np.mean([table_score(cases, table, p) for table in tables]) for p in POLICIES}
    return max(POLICIES, key=lambda p: (round(scores[p], 9), -POLICIES.index(p)))


def coverage_cases(cases: list[Case], tables: list[str], policy: Policy) -> list[Case]:
    """Per table, the group with every model of it (across families, or its one family)."""
    chosen = []
    for table in tables:
        own = [c for c in cases if c.table == table and c.policy == policy]
        across = [c for c in own if c.group == "across families"]
        chosen += across or own[:1]
    return chosen


def choose_spread(cases: list[Case], tables: list[str], policy: Policy) -> float:
    """The spread whose widened intervals cover the models outside their folds' reach closest to
    COVERAGE_TARGET, pooled over `tables`; a tie goes to the smaller spread."""
    chosen = coverage_cases(cases, tables, policy)
    outside = [c.outside for c in chosen]
    if not any(mask.any() for mask in outside):
        return 0.0

    def miss(spread: float) -> float:
        inside = np.concatenate([c.inside(spread)[c.outside] for c in chosen])
        return round(abs(float(inside.mean()) - COVERAGE_TARGET), 9)

    return min(SPREADS, key=lambda spread: (miss(spread), spread))


def policy_rows(cases: list[Case]) -> list[dict[str, Any]]:
    """Every table's score (mean nested share within ±10% over its groups) under every policy: what the choices
    are made from."""
    tables = list(dict.fromkeys(c.table for c in cases))
    return [{"policy": policy.label, **{table: table_score(cases, table, policy) for table in tables}}
            for policy in POLICIES]


def loto_rows(cases: list[Case]) -> tuple[list[dict[str, Any]], dict[str, tuple[Policy, float]]]:
    """Per table and group: the LOTO figures, the in-table figure and the shipped defaults' figure."""
    tables = [t.name for t in TABLES if any(c.table == t.name for c in cases)]
    rows, chosen = [], {}
    for table in tables:
        others = [t for t in tables if t != table]
        policy = choose_policy(cases, others)
        spread = choose_spread(cases, others, policy)
        in_table = choose_policy(cases, [table])
        chosen[table] = (policy, spread)

        def case_of(group: str, wanted: Policy, table: str = table) -> Case:
            return next(c for c in cases if c.table == table and c.group == group and c.policy == wanted)

        for case in [c for c in cases if c.table == table and c.policy == policy]:
            shipped, best = case_of(case.group, SHIPPED), case_of(case.group, in_table)
            rows.append({"table": table, "group": case.group, "models": case.calibration.reference_line.n,
                         "policy (chosen on the others)": policy.label, "LOTO within ±10%": case.share,
                         "spread (others)": spread, "LOTO 95% coverage": float(case.inside(spread).mean()),
                         "outside reach": int(case.outside.sum()),
                         "in-table policy": in_table.label, "in-table within ±10%": best.share,
                         "shipped defaults within ±10%": shipped.share,
                         "shipped coverage": float(shipped.inside(EXTRAPOLATION_SPREAD).mean())})
    return rows, chosen


def few_shot_trials(points_by: dict[tuple[Table, str], pd.DataFrame], draws: int
                    ) -> dict[tuple[str, int], list[Trial]]:
    """Per table and few-models threshold: the learning-curve trials of every model of the table, from the shipped
    rule, the same picks and random draws for every threshold."""
    trials = {}
    for table in TABLES:
        points = points_by[(table, SHIPPED.rule)]
        if points.empty:
            continue
        for few_models in FEW_MODELS_OPTIONS:
            candidates = replace(AUTO_CANDIDATES, few_models=few_models)
            trials[(table.name, few_models)] = learning_curve(points, candidates, draws=draws)
    return trials


def curve_score(trials: list[Trial]) -> float:
    """The mean share within ±10% of the suggested picks' curve, over its k."""
    return float(np.mean([t.within_10pct for t in trials if t.how == "suggest"] or [np.nan]))


def choose_few_models(trials: dict[tuple[str, int], list[Trial]], tables: list[str]) -> int:
    scores = {few: np.nanmean([curve_score(trials[(table, few)]) for table in tables if (table, few) in trials])
              for few in FEW_MODELS_OPTIONS}
    return max(FEW_MODELS_OPTIONS, key=lambda few: (round(scores[few], 9), few))


def few_shot_rows(trials: dict[tuple[str, int], list[Trial]]) -> tuple[list[dict[str, Any]], dict[str, pd.DataFrame]]:
    """Per table: the learning curve with the few-models threshold chosen on the other tables."""
    tables = list(dict.fromkeys(table for table, _ in trials))
    rows, curves = [], {}
    for table in tables:
        few = choose_few_models(trials, [other for other in tables if other != table])
        curve = curve_table(trials[(table, few)])
        if curve.empty:
            continue
        curves[table] = curve
        rows += [{"table": table, "few models (others)": few, **row} for row in curve.to_dict(orient="records")]
    return rows, curves


def learning_figure(curves: dict[str, pd.DataFrame], path: Path) -> None:
    """One panel per table: the report's learning curve (harness.report.figures.draw_learning_curve)."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(3.6 * len(curves), 3.6), layout="constrained")
    for ax, (name, curve) in zip(figure.subplots(1, len(curves), squeeze=False)[0], curves.items(), strict=True):
        draw_learning_curve(ax, curve, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)


def goals_of(rows: list[dict[str, Any]], few: list[dict[str, Any]]) -> list[Goal]:
    goals = []
    for row in rows:
        kind = "across families" if row["group"] == "across families" else "one family"
        target = GOALS[kind]
        goals.append(Goal(f"{row['table']}, {row['group']}: LOTO nested within ±10%", f"≥ {target:.0%}",
                          f"{row['LOTO within ±10%']:.0%} of {row['models']}", row["LOTO within ±10%"] >= target))
    low, high = GOALS["coverage"]
    every = [next((row for row in own if row["group"] == "across families"), own[0])
             for own in ([row for row in rows if row["table"] == table]
                         for table in dict.fromkeys(row["table"] for row in rows))]
    for row in every:
        goals.append(Goal(f"{row['table']}: LOTO 95% interval coverage, every model", "information",
                          f"{row['LOTO 95% coverage']:.0%} of {row['models']}", None))
    models = sum(row["models"] for row in every)
    inside = sum(row["LOTO 95% coverage"] * row["models"] for row in every)
    goals.append(Goal("every table's models: LOTO 95% interval coverage (a table of 8 models can only be 88% or "
                      "100%, so the goal is on all of them)", f"{low:.0%} to {high:.0%}", f"{inside / models:.0%} of "
                      f"{models}", low <= inside / models <= high))
    for row in few:
        if row["how"] == "suggest" and row["k"] == GOAL_K:
            target = GOALS["suggest k=5"]
            goals.append(Goal(f"{row['table']}: k = {GOAL_K} picked by suggest, the other models within ±10%",
                              f"≥ {target:.0%}", f"{row['within_10pct']:.0%} of {row['left']}",
                              row["within_10pct"] >= target))
    return goals


def profiled_sessions(args: argparse.Namespace) -> list[Path]:
    if args.session:
        return [Path(directory) for directory in args.session]
    session = profile_runs(PROFILE_DIR, None, [], backend="local", repeats=args.repeats, models=MODELS,
                           extra_flags=["--per-op", "--cpus", "1", "--memory", "2g",
                                        "--iterations", str(args.iterations), "--warmup", str(args.warmup)])
    return [PROFILE_DIR / "results" / session.runs[0]["session_id"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--session", nargs="+", default=os.environ.get("HARNESS_BENCH_SESSION", "").split() or None,
                        help="reuse these session directories (their runs pooled) instead of profiling")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--draws", type=int, default=40, help="random draws of k models per k")
    args = parser.parse_args()
    sessions = profiled_sessions(args)
    runs = [run for session in sessions for run in load_runs(session)]
    points_by = all_points(runs)
    cases = calibrate_cases(points_by)
    scores = policy_rows(cases)
    print_table("Each table's mean nested share within ±10% under each policy", scores)
    rows, chosen = loto_rows(cases)
    print_table("Leave-one-table-out: each table scored with the policy and spread chosen on the others", rows)
    all_tables = list(chosen)
    policy = choose_policy(cases, all_tables)
    everywhere = (policy, choose_spread(cases, all_tables, policy))
    trials = few_shot_trials(points_by, args.draws)
    few, curves = few_shot_rows(trials)
    print_table("Few-shot: k models measured on the device, the others predicted (shipped rule; `auto` below the "
                "few-models threshold chosen on the other tables)",
                [{key: value for key, value in row.items() if key != "draws"} for row in few])
    figure = OUT_DIR / "calibration_tables_learning.png"
    if curves:
        learning_figure(curves, figure)
    goals = goals_of(rows, few)
    few_everywhere = choose_few_models(trials, all_tables)
    goals.append(Goal("shipped defaults = the choices on every table (policy; spread; few-models threshold)",
                      f"{everywhere[0].label}; {everywhere[1]:g}; {few_everywhere}",
                      f"{SHIPPED.label}; {EXTRAPOLATION_SPREAD:g}; {SHIPPED.candidates.few_models}",
                      (SHIPPED.rule, SHIPPED.candidates.names, EXTRAPOLATION_SPREAD, SHIPPED.candidates.few_models)
                      == (everywhere[0].rule, everywhere[0].candidates.names, everywhere[1], few_everywhere)))
    print_table("Goals", [{"goal": g.name, "target": g.target, "measured": g.measured, "verdict": VERDICTS[g.met]}
                          for g in goals])
    notes = [f"harness runs: {' '.join(map(str, sessions))} (reuse them with --session)",
             f"learning curves: {figure}"]
    raw = {f"{c.table} / {c.group} / {c.policy.label}": c.calibration.points.to_dict(orient="records")
           for c in cases}
    write_report("calibration_tables", rows + few, goals, notes, {"policies": scores, **raw})


if __name__ == "__main__":
    sys.exit(main())
