"""NAS-Bench-201 on six real devices, scored as the published few-shot predictors are (HELP's protocol): does each
architecture run and timed by the harness, plus k device measurements, rank and predict the other architectures?

    .venv/bin/python benchmarks/nb201.py [--devices FILE.csv] [--draws 20] [--profile | --session DIR]
        [--device NAME --max-latency-ms MS]
    make bench-nb201 [DEVICES=file.csv] [PROFILE=1] [SESSION=DIR] [DEVICE=name MAX_LATENCY_MS=ms]

Rescores from the committed per-architecture summary (benchmarks/data/nb201_harness.csv: harness values, per-op-kind
times and static facts of architectures 0-1899 and of HELP's ten reference architectures) in a few minutes.
`--profile` re-profiles them from scratch first (PROFILE_FLAGS: one `harness sweep` of 1,906 models, 3 repeats at
CPUS=1 with PER_OP=1, on two --parallel slots), then rewrites the summary; `--session DIR` adds the architectures of
an existing sweep to the summary (replacing those it holds).

Protocol (harness.calibration.nb201): per device, k calibration architectures are drawn from 0-899 and the
architectures 900-1899 are predicted, each pool without its fastest and slowest 10% on that device. Each of k = 5, 10
and 20 is run as `--draws` seeded draws and as `harness suggest`'s picks. The calibration is the one `harness regress`
and `predict` make (harness.calibration.calibrate_points, `auto` among its fits); Spearman's ρ, Kendall's τ, the share
within ±10% and the share inside the 95% interval are the means over the draws. Two baselines on the same draws: a
least-squares line on the cell's op counts, and FLOPs alone (the builder's MACs), whose ρ must land within 0.03 of the
published FLOPs row (a check of the protocol).

The global choices (which fits `auto` takes, the few-models threshold) are made leave-one-device-out: each device is
scored with the policy best (mean ρ over k = 5, 10 and 20) on the five others, as a device this project never saw
would be. Writes results/bench/nb201.json (--out) and, with --device, nb201_<device>.md beside it: the test
architectures ranked by predicted latency with their 95% intervals (only those whose interval lies under
--max-latency-ms, when given), and the k-curve.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from _common import OUT_DIR, ROOT, print_table, rescore

from harness.calibration.calibrate import AUTO_CANDIDATES, calibrate_points, points_design
from harness.calibration.choice import Candidates
from harness.calibration.few_shot import FIRST_PICKS_FIT
from harness.calibration.fits import FACT_NAMES, FIT_NAMES, WORK_FACTS
from harness.calibration.nb201 import op_counts, read_devices, score, split
from harness.calibration.suggest import suggest_first
from harness.calibration.transfer import Library
from harness.core.errors import DataError, HarnessError
from harness.device.library import all_tables

DATA = ROOT / "benchmarks" / "data"
DEVICES_CSV = ROOT / "devices" / "library" / "nb201_latency_ms.csv"
SUMMARY_CSV = DATA / "nb201_harness.csv"
REFERENCE_TXT = ROOT / "devices" / "library" / "nb201_reference_archs.txt"
SWEEP_DIR = ROOT / "results" / "nb201"
REFERENCE = tuple(int(line) for line in REFERENCE_TXT.read_text().splitlines() if line.strip().isdigit())
"""HELP's ten reference architectures, measured on every device for its hardware embedding (HELP's loader)."""
ARCHITECTURES = tuple(dict.fromkeys((*range(0, 1900), *REFERENCE)))
PROFILE_FLAGS = ("--cpus", "1", "--repeats", "3", "--iterations", "30", "--warmup", "5", "--per-op", "--parallel", "2",
                 "--device-name", "nb201-sweep", "--no-report")
K_VALUES = (5, 10, 20)
DRAWS = 20
SEED = 201
CHOICE_K = 10
"""The k of suggest's picks in the report."""
PUBLISHED = {
    "FLOPs": {"pixel2": 0.765, "raspi4": 0.846, "gold_6226": 0.826, "titan_rtx_256": 0.950, "eyeriss": 0.437,
              "fpga": 0.900},
    "BRP-NAS (900 samples)": {"pixel2": 0.666, "raspi4": 0.847, "gold_6226": 0.796, "titan_rtx_256": 0.814,
                              "eyeriss": 0.811, "fpga": 0.801},
    "HELP (10 samples)": {"pixel2": 0.802, "raspi4": 0.890, "gold_6226": 0.989, "titan_rtx_256": 0.987,
                          "eyeriss": 0.940, "fpga": 0.985},
}
"""Spearman's ρ on the test architectures, HELP's Table 3 (NeurIPS 2021)."""
FLOPS_TOLERANCE = 0.03


@dataclass(frozen=True)
class Policy:
    """The global choices scored leave-one-device-out: the fits `auto` takes and the few-models threshold."""

    candidates: Candidates

    @property
    def label(self) -> str:
        names = self.candidates.names
        fits = ("every fit" if names == FIT_NAMES else f"{names[0]} alone" if len(names) == 1 else
                "no " + ", ".join(n for n in FIT_NAMES if n not in names))
        return f"{fits}, few-models threshold {self.candidates.few_models}"


HARNESS_ONLY = Policy(replace(AUTO_CANDIDATES, names=tuple(n for n in FIT_NAMES if n != "library")))
POLICIES = (Policy(AUTO_CANDIDATES), Policy(replace(AUTO_CANDIDATES, few_models=0)), HARNESS_ONLY,
            Policy(replace(HARNESS_ONLY.candidates, few_models=0)),
            Policy(replace(AUTO_CANDIDATES, names=tuple(n for n in FIT_NAMES if n != "work"))),
            Policy(Candidates(("work",), few_models=0)), Policy(Candidates(("library",), few_models=0)))
"""In order of preference on equal scores: the shipped defaults first; then every fit from any number of models (the
threshold changes k = 5 only); then the harness's own fits without the device library, at either threshold; then
every fit but `work`; then `work` alone; then `library` alone."""
SHIPPED = Policy(AUTO_CANDIDATES)


def profile() -> Path:
    """One sweep of ARCHITECTURES through the real CLI; returns its session directory and prints its wall time."""
    names = [f"nb201_{index}" for index in ARCHITECTURES]
    before = set(SWEEP_DIR.glob("*")) if SWEEP_DIR.exists() else set()
    started = time.monotonic()
    argv = [sys.executable, "-m", "harness.cli", "sweep", *names, *PROFILE_FLAGS, "--backend", "local",
            "--results-dir", str(SWEEP_DIR)]
    if subprocess.run(argv, cwd=ROOT).returncode != 0:
        raise SystemExit("the sweep did not finish; resume it with `harness profile --resume SESSION --parallel 2 "
                         f"--results-dir {SWEEP_DIR}`, then rerun with --session")
    (session,) = set(SWEEP_DIR.glob("*")) - before
    print(f"sweep of {len(names)} architectures: {(time.monotonic() - started) / 60:.1f} min")
    return session


def summarise(session: Path) -> pd.DataFrame:
    """Per architecture: the harness values (fastest inference over the repeats, median of the runs' medians), the
    median op time per kind, and the static facts of its graph."""
    from harness.models.facts import onnx_facts
    from harness.store.results import load_runs
    from harness.zoo import export
    from harness.zoo.nb201_cells import cell_ops, cell_string

    rows: dict[int, dict[str, Any]] = {}
    runs: dict[int, list[dict[str, Any]]] = {}
    for run in load_runs(session):
        if run["status"] == "ok" and run["model_name"].startswith("nb201_"):
            runs.setdefault(int(run["model_name"].removeprefix("nb201_")), []).append(run)
    for index, done in sorted(runs.items()):
        facts = onnx_facts(export(f"nb201_{index}"))
        op_ms = pd.DataFrame([run.get("op_time_ms") or {} for run in done]).median()
        rows[index] = {"arch_str": cell_string(cell_ops(index)), "runs": len(done),
                       "harness_ms": min(min(run["latencies_ms"]) for run in done),
                       "harness_median_ms": float(np.median([run["latency_stats_ms"]["p50"] for run in done])),
                       **{key: facts[key] for key in (*FACT_NAMES, "nodes", *WORK_FACTS)},
                       **{f"op_ms.{kind}": value for kind, value in op_ms.items()}}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("arch_idx")


def points(summary: pd.DataFrame, latency: pd.Series, library: Library) -> pd.DataFrame:
    """Calibration points as `regress` pairs them: one per architecture, its harness value beside the device's, and
    the library devices' latencies of it (the `library` fit's evidence)."""
    frame = summary.join(latency.rename("device"), how="inner")
    names = [f"nb201_{index}" for index in frame.index]
    evidence = library.evidence(pd.Series(frame["harness_ms"].to_numpy(float), index=names))
    frame = frame.assign(model=names, harness_model=names, harness=frame["harness_ms"], family="nb201", cpus=1.0)
    return frame.join(evidence.set_axis(frame.index))


def library_for(device: str) -> Library:
    """The shipped NAS-Bench-201 tables a device learns from: all but those of its own physical device (a column of
    a DEVICES file is a device never seen, so it learns from all of them)."""
    tables = [table for table in all_tables() if table.column]
    return Library.for_target(tables, f"nb201-{device.replace('_', '-')}")


BUDGETS = ("ref10_k10", *(f"k{k}" for k in K_VALUES))
"""`k<k>`: k architectures drawn; `ref10_k10` adds HELP's ten reference architectures to the ten drawn (HELP's
budget: 20 target-device measurements)."""


@dataclass(frozen=True)
class Device:
    """One device's points, its protocol split, the library it learns from, and the seeded draws every policy and
    baseline shares."""

    name: str
    points: pd.DataFrame
    pool: list[str]
    test: pd.DataFrame
    draws: dict[str, list[list[str]]]
    suggested: list[str]
    library: tuple[str, ...]

    @classmethod
    def of(cls, name: str, summary: pd.DataFrame, latency: pd.Series, draws: int) -> Device:
        library = library_for(name)
        frame = points(summary, latency, library)
        protocol = split(frame["device"].loc[frame.index.isin(range(0, 1900))])
        pool = frame.loc[protocol.pool, "harness_model"].tolist()
        rng = np.random.default_rng(SEED)
        chosen = {f"k{k}": [list(rng.choice(pool, k, replace=False)) for _ in range(draws)] for k in K_VALUES}
        reference = [f"nb201_{index}" for index in REFERENCE if index in frame.index]
        if len(reference) == len(REFERENCE):  # a table without them (a DEVICES file of 0-1899) has no HELP budget
            chosen["ref10_k10"] = [reference + [m for m in draw if m not in reference] for draw in chosen["k10"]]
        pool_points = frame.loc[protocol.pool]
        picks = suggest_first(points_design(pool_points), pool, FIRST_PICKS_FIT, max(K_VALUES))
        return cls(name, frame.set_index("harness_model", drop=False), pool, frame.loc[protocol.test].set_index(
            "harness_model", drop=False), chosen, [pick.model for pick in picks], library.names)


def predict(device: Device, chosen: list[str], candidates: Candidates) -> dict[str, Any]:
    """Calibrate on `chosen` as `regress` does, predict the test architectures, score them."""
    calibration = calibrate_points("latency", {}, device.points.loc[chosen].reset_index(drop=True), figures=False,
                                   candidates=candidates)
    test = device.test
    found = calibration.intervals(calibration.design(test["harness"], test, test["harness_model"]))
    return {**score(test["device"].to_numpy(float), found.predicted, found.low, found.high),
            "fit": calibration.model.name}


def mean_figures(trials: list[dict[str, Any]]) -> dict[str, Any]:
    frame = pd.DataFrame(trials)
    out = {key: (float(frame[key].mean()) if frame[key].notna().any() else None)
           for key in ("spearman", "kendall", "within_10pct", "coverage") if key in frame}
    if "fit" in frame:
        out["fits"] = frame["fit"].value_counts().to_dict()
    return out | {"draws": len(frame)}


def policy_figures(device: Device, policy: Policy) -> dict[str, Any]:
    """Per budget: the mean figures over the seeded draws; per k, those of suggest's picks."""
    out: dict[str, Any] = {budget: mean_figures([predict(device, chosen, policy.candidates) for chosen in draws])
                           for budget, draws in device.draws.items()}
    out["suggest"] = {f"k{k}": predict(device, device.suggested[:k], policy.candidates) for k in K_VALUES}
    return out


def op_count_baseline(device: Device) -> dict[str, Any]:
    """A least-squares line on the cell's op counts (one coefficient per op but `none`, and a constant), from k
    architectures and from the whole calibration pool (`pool`: what a per-kind line reaches when the device has run
    every architecture it may be calibrated on, the ceiling of a few-shot one)."""
    counts = op_counts(device.points["arch_str"]).drop(columns="none")
    design = np.column_stack([np.ones(len(counts)), counts.to_numpy(float)])
    rows = {name: i for i, name in enumerate(device.points.index)}
    test_rows = [rows[name] for name in device.test.index]
    y = device.points["device"].to_numpy(float)
    out = {}
    for budget, draws in device.draws.items():
        trials = []
        for chosen in draws:
            train = [rows[name] for name in chosen]
            coef = np.linalg.lstsq(design[train], y[train], rcond=None)[0]
            trials.append(score(y[test_rows], design[test_rows] @ coef))
        out[budget] = mean_figures(trials)
    pool = [rows[name] for name in device.pool]
    coef = np.linalg.lstsq(design[pool], y[pool], rcond=None)[0]
    out["pool"] = score(y[test_rows], design[test_rows] @ coef) | {"k": len(pool)}
    return out


def flops_baseline(device: Device) -> dict[str, Any]:
    """FLOPs alone: the order of the builder's MACs (no device sample needed)."""
    figures = score(device.test["device"].to_numpy(float), device.test["macs"].to_numpy(float))
    return {"spearman": figures["spearman"], "kendall": figures["kendall"]}


def leave_one_device_out(scores: dict[str, dict[str, float]]) -> dict[str, str]:
    """For each device, the policy with the best mean ρ over the other devices (ties: POLICIES order)."""
    chosen = {}
    for device in next(iter(scores.values())):
        def others(label: str, held_out: str = device) -> float:
            return float(np.mean([value for name, value in scores[label].items() if name != held_out]))

        chosen[device] = max(scores, key=lambda label: (round(others(label), 6),
                                                        -[p.label for p in POLICIES].index(label)))
    return chosen


def run(devices_csv: Path, summary: pd.DataFrame, draws: int) -> dict[str, Any]:
    table = read_devices(devices_csv)
    missing = sorted(set(table.index) & set(ARCHITECTURES) - set(summary.index))
    if len(missing) == len(ARCHITECTURES):
        raise DataError(f"{devices_csv}: no architecture 0-1899 has harness values; profile with --profile")
    devices = {name: Device.of(name, summary, table[name], draws) for name in table.columns if name != "arch_str"}
    by_policy = {policy.label: {name: policy_figures(device, policy) for name, device in devices.items()}
                 for policy in POLICIES}
    scores = {label: {name: float(np.mean([figures[f"k{k}"]["spearman"] for k in K_VALUES]))
                      for name, figures in per_device.items()} for label, per_device in by_policy.items()}
    chosen = leave_one_device_out(scores)
    result: dict[str, Any] = {"devices": {}, "policies": scores, "shipped": SHIPPED.label, "draws": draws,
                              "missing_architectures": len(missing)}
    for name, device in devices.items():
        ours = by_policy[chosen[name]][name]
        budgets = [budget for budget in BUDGETS if budget in device.draws]
        result["devices"][name] = {
            **{budget: ours[budget] for budget in budgets}, "suggest": ours["suggest"], "policy": chosen[name],
            "shipped": {budget: by_policy[SHIPPED.label][name][budget] for budget in budgets},
            "harness_only": {budget: by_policy[HARNESS_ONLY.label][name][budget] for budget in budgets},
            "library": list(device.library),
            "baselines": {"op_counts": op_count_baseline(device), "flops": flops_baseline(device)},
            "published": {method: rows.get(name) for method, rows in PUBLISHED.items()},
            "test_architectures": len(device.test), "pool": len(device.pool),
        }
    return result


def show(result: dict[str, Any]) -> None:
    devices = result["devices"]
    rows = []
    for name, figures in devices.items():
        published = figures["published"]
        help_budget = figures.get("ref10_k10", {})
        rows.append({"device": name, "ρ ref10+k10": help_budget.get("spearman", ""),
                     "±10% ref10+k10": help_budget.get("within_10pct", ""),
                     "coverage ref10+k10": help_budget.get("coverage", ""),
                     "ρ ref10+k10 harness only": figures["harness_only"].get("ref10_k10", {}).get("spearman", ""),
                     **{f"ρ k={k}": figures[f"k{k}"]["spearman"] for k in K_VALUES},
                     "τ k=10": figures["k10"]["kendall"], "±10% k=10": figures["k10"]["within_10pct"],
                     "coverage k=10": figures["k10"]["coverage"],
                     "ρ op counts k=10": figures["baselines"]["op_counts"]["k10"]["spearman"],
                     "ρ / ±10% op counts, whole pool": "{spearman:.3f} / {within_10pct:.2f}".format(
                         **figures["baselines"]["op_counts"]["pool"]),
                     "ρ FLOPs": figures["baselines"]["flops"]["spearman"],
                     **{f"ρ {method}": published[method] if published[method] is not None else "" for method in
                        PUBLISHED}})
    print_table("NAS-Bench-201: test architectures, mean over the draws (each device scored with the policy chosen on "
                "the other five)", rows)
    print_table("Policies: mean ρ over k per device", [{"policy": label, **values}
                                                          for label, values in result["policies"].items()])
    picks = [{"device": name, **{f"ρ k={k}": f["suggest"][f"k{k}"]["spearman"] for k in K_VALUES},
              **{f"±10% k={k}": f["suggest"][f"k{k}"]["within_10pct"] for k in K_VALUES}}
             for name, f in devices.items()]
    print_table("suggest's picks", picks)


def report(device: Device, figures: dict[str, Any], max_latency_ms: float | None, directory: Path) -> Path:
    """A NAS user's page: the test architectures ranked by predicted latency from suggest's 10 picks, each with its
    95% interval (only those whose whole interval lies under the budget, when one is given), and the k-curve."""
    calibration = calibrate_points("latency", {}, device.points.loc[device.suggested[:CHOICE_K]]
                                   .reset_index(drop=True), figures=False, candidates=AUTO_CANDIDATES)
    test = device.test
    found = calibration.intervals(calibration.design(test["harness"], test, test["harness_model"]))
    ranked = pd.DataFrame({"architecture": test.index, "cell": test["arch_str"], "predicted_ms": found.predicted,
                           "low_ms": found.low, "high_ms": found.high, "device_ms": test["device"]})
    ranked = ranked.sort_values("predicted_ms")
    kept = ranked if max_latency_ms is None else ranked[ranked["high_ms"] <= max_latency_ms]
    budget = "" if max_latency_ms is None else f", interval under {max_latency_ms:g} ms: {len(kept)} of {len(ranked)}"
    lines = [f"# NAS-Bench-201 on {device.name}", "",
             f"Calibrated on {CHOICE_K} architectures picked by `harness suggest` ({calibration.model.name} fit: "
             f"{calibration.model.equation}){budget}.", "", "## k-curve (mean over the draws)", "",
             "| k | Spearman ρ | Kendall τ | within ±10% | 95% coverage |", "| --- | --- | --- | --- | --- |"]
    lines += [f"| {k} | {figures[f'k{k}']['spearman']:.3f} | {figures[f'k{k}']['kendall']:.3f} | "
              f"{figures[f'k{k}']['within_10pct']:.0%} | {figures[f'k{k}']['coverage']:.0%} |" for k in K_VALUES]
    lines += ["", "## Test architectures by predicted latency", "",
              "| rank | architecture | cell | predicted ms | 95% interval | device ms |",
              "| --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {rank} | nb201_{row.architecture} | `{row.cell}` | {row.predicted_ms:.2f} | {row.low_ms:.2f}–"
              f"{row.high_ms:.2f} | {row.device_ms:.2f} |" for rank, row in enumerate(kept.itertuples(), 1)]
    path = directory / f"nb201_{device.name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def main() -> None:
    env = os.environ.get  # make's variables arrive as environment variables, never through a shell
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--devices", type=Path, default=Path(env("HARNESS_NB201_DEVICES") or DEVICES_CSV))
    parser.add_argument("--draws", type=int, default=DRAWS)
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--profile", action="store_true", default=env("HARNESS_NB201_PROFILE") == "1",
                        help="re-profile the 1,900 architectures first")
    source.add_argument("--session", type=Path, default=Path(env("HARNESS_BENCH_SESSION")) if env(
        "HARNESS_BENCH_SESSION") else None, help="rebuild the summary from this sweep's session directory")
    parser.add_argument("--summary", type=Path, default=SUMMARY_CSV)
    parser.add_argument("--device", default=env("HARNESS_NB201_DEVICE") or None,
                        help="write the ranked report of this device")
    parser.add_argument("--max-latency-ms", type=float, default=float(env("HARNESS_NB201_MAX_LATENCY_MS") or "nan"),
                        help="with --device: keep architectures whose interval lies under this latency")
    parser.add_argument("--out", type=Path, default=OUT_DIR / "nb201.json")
    args = parser.parse_args()
    try:
        if args.profile or args.session:
            summary = summarise(profile() if args.profile else args.session)
            if args.session and args.summary.exists():  # a sweep of some architectures adds to the summary
                before = pd.read_csv(args.summary, index_col="arch_idx")
                summary = pd.concat([before.drop(summary.index, errors="ignore"), summary]).sort_index()
            summary.to_csv(args.summary, float_format="%.6g")
            print(f"summary of {len(summary)} architectures: {args.summary}")
        summary = pd.read_csv(args.summary, index_col="arch_idx")
        result = rescore(args.out, lambda: run(args.devices, summary, args.draws), show)
        print(json.dumps({"written": str(args.out), "rescore_s": result["rescore_s"]}))
        if args.device:
            if args.device not in result["devices"]:
                raise DataError(f"--device {args.device}: not a column of {args.devices}; choose one of "
                                f"{', '.join(result['devices'])}")
            table = read_devices(args.devices)
            device = Device.of(args.device, summary, table[args.device], args.draws)
            budget = None if np.isnan(args.max_latency_ms) else args.max_latency_ms
            print(f"report: {report(device, result['devices'][args.device], budget, args.out.parent)}")
    except HarnessError as err:
        raise SystemExit(f"bench-nb201: {err}") from None


if __name__ == "__main__":
    main()
