"""The device library on the published model tables: how far off is a prediction for a device never seen, from the
harness alone, with the other devices' tables as evidence, and for a novel model that no table holds?

    .venv/bin/python benchmarks/library.py [--devices DIR] [--draws 20] [--session DIR]
    make bench-library [DEVICES=dir/] [SESSION=DIR]

Rescores from the committed summary (benchmarks/data/library_harness.csv: the harness's latency of every zoo model
the tables hold, onnxruntime at CPUS=1, with each model's static facts, work per operator kind and depthwise share).
`--session DIR` rebuilds that summary from a profile session of those models (PROFILE_FLAGS below; about 40 minutes
on a 2-core host).

Each scored table (devices/library.csv's device CSVs, or every CSV of --devices DIR in the examples/ format) is a
target never seen: its library is every other shipped table, never one of the same device at any thread count
(harness.calibration.transfer.Library.for_target). Three figures, each the share of the table's models within ±10%:
- `harness_only`: the calibration without the library (every fit but `library`), as before the library;
- `in_library`: with the library; a held-out model may appear in other tables;
- `novel`: with the library, the held-out model removed from every library table too (what a user's own model
  faces: its evidence is only the library devices' predictions from the harness);
- `new_family`: a user's own model of a family the table does not hold: each family in turn held out of the
  calibration and of every library table, predicted from the other families (share within ±10%, and how often the
  95% interval covers the device's value).
Whether to learn from the library at all is chosen leave-one-table-out (`chosen`: the policy with the best mean
nested share on the other tables). Each figure is scored with the nested leave-one-out (`within_10pct`: every other
model of the target calibrates, the fit chosen again in each fold) and from k = 5 drawn models (`within_10pct_k5`:
the rest predicted, mean over --draws seeded draws). Writes results/bench/library.json.
"""

from __future__ import annotations

import argparse
import os
from collections import Counter
from dataclasses import replace
from functools import lru_cache, partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from _common import OUT_DIR, ROOT, print_table, rescore

from harness.analysis.run_values import harness_values
from harness.calibration.calibrate import AUTO_CANDIDATES, Calibration, calibrate_points
from harness.calibration.choice import AUTO, error_stats
from harness.calibration.fits import FIT_FACTS, FIT_NAMES
from harness.calibration.points import model_facts_table, paired_points
from harness.calibration.transfer import Library
from harness.core.errors import HarnessError
from harness.device.data import DeviceData
from harness.device.importer import DeviceFile, read_device
from harness.device.library import METRIC, LibraryTable, shipped_tables
from harness.store.results import load_runs

SUMMARY_CSV = ROOT / "benchmarks" / "data" / "library_harness.csv"
PROFILE_FLAGS = ("--backend", "local", "--cpus", "1", "--memory", "2g", "--repeats", "3", "--iterations", "30",
                 "--warmup", "5", "--per-op")
"""How the committed summary's session was profiled (models: every zoo model the shipped tables hold)."""
DRAWS = 20
K = 5
SEED = 5
HARNESS_ONLY = replace(AUTO_CANDIDATES, names=tuple(n for n in FIT_NAMES if n != "library"))
"""The calibration as it was before the library: every fit but `library`."""
VALUE_COLUMNS = ("model_name", "cpus", "value", "n", "over", "across")


def summarise(session: Path) -> pd.DataFrame:
    """Per model: the harness value as `regress` takes it (latency_ms, fastest inference) and the facts fits read."""
    runs = load_runs(session)
    values = harness_values(runs, METRIC).set_index("model_name")
    facts = model_facts_table(runs).reindex(columns=list(FIT_FACTS))
    return values.join(facts).rename_axis("model_name")


def scored_tables(directory: Path | None) -> list[LibraryTable]:
    """The shipped device CSVs scored, or every CSV of `directory` (each a device never seen: none of them enters
    another's library)."""
    if directory is None:
        return [t for t in shipped_tables() if not t.column and t.scored]
    return [LibraryTable(path.stem, path.stem, str(path), "", None, "", "", "score", "given", path)
            for path in sorted(Path(directory).glob("*.csv"))]


def _data(table: LibraryTable) -> DeviceData:
    return read_device([DeviceFile(table.path)], table.name)


def _share(calibration: Calibration, key: str = "within_10pct") -> float | None:
    return next(row.get(key) for row in calibration.comparison if row["fit"] == AUTO)


def _k_draws(points: pd.DataFrame, draws: int) -> list[np.ndarray]:
    rng = np.random.default_rng(SEED)
    return [rng.choice(len(points), K, replace=False) for _ in range(draws)] if len(points) > K else []


def _few_shot(points: pd.DataFrame, chosen: np.ndarray, candidates: Any,
              evidence_without: Any | None = None) -> np.ndarray:
    """Within ±10% of the models not in `chosen`, calibrated from `chosen`; with `evidence_without` each predicted
    model is novel: removed from every library table, for its calibration and its prediction."""
    rest = np.setdiff1d(np.arange(len(points)), chosen)
    y = points["device"].to_numpy(float)
    if evidence_without is None:
        calibration = calibrate_points(METRIC, {}, points.iloc[chosen], figures=False, candidates=candidates)
        test = points.iloc[rest]
        yhat = calibration.intervals(calibration.design(test["harness"], test, test["harness_model"])).predicted
        return np.abs(yhat - y[rest]) / y[rest] <= 0.10 + 1e-12
    within = []
    models = points["harness_model"].tolist()
    for i in rest:
        evidence = evidence_without(models[i]).reindex(models)
        frame = points.drop(columns=[c for c in points if str(c).startswith("library:")]).join(
            evidence, on="harness_model")
        calibration = calibrate_points(METRIC, {}, frame.iloc[chosen], figures=False, candidates=candidates)
        one = frame.iloc[[i]]
        yhat = float(calibration.intervals(calibration.design(one["harness"], one, one["harness_model"])).predicted[0])
        within.append(abs(yhat - y[i]) / y[i] <= 0.10 + 1e-12)
    return np.array(within)


def _new_family(points: pd.DataFrame, library: Library, harness: pd.Series) -> dict[str, float | None]:
    """Each family held out of the calibration and of every library table, its models predicted from the other
    families' (at least K + 2 of them): within ±10%, and the 95% intervals' coverage, over every held-out model."""
    within, covered = [], []
    for family in sorted(set(points["family"])):
        held = (points["family"] == family).to_numpy()
        if (~held).sum() < K + 2:
            continue
        family_models = points.loc[held, "harness_model"].tolist()
        evidence = library.evidence(harness, without=family_models)
        frame = points.join(evidence, on="harness_model")
        calibration = calibrate_points(METRIC, {}, frame[~held], figures=False, candidates=AUTO_CANDIDATES)
        test = frame[held]
        found = calibration.intervals(calibration.design(test["harness"], test, test["harness_model"]))
        y = test["device"].to_numpy(float)
        within += list(np.abs(found.predicted - y) / y <= 0.10 + 1e-12)
        covered += list((found.low <= y) & (y <= found.high))
    return {"within_10pct": float(np.mean(within)) if within else None,
            "coverage": float(np.mean(covered)) if covered else None, "models": len(within)}


def _mean(parts: list[np.ndarray]) -> float | None:
    return float(np.mean(np.concatenate(parts))) if parts else None


def score_table(table: LibraryTable, summary: pd.DataFrame, library_tables: list[LibraryTable],
                draws: int) -> dict[str, Any] | None:
    values = summary.reset_index()[list(VALUE_COLUMNS)]
    facts = summary[[c for c in FIT_FACTS if c in summary]]
    points = paired_points(_data(table), values, METRIC, "cpus")
    if len(points) < K + 2:
        return None
    points = points.join(facts, on="harness_model").reset_index(drop=True)
    library = Library.for_target(library_tables, table.name)
    harness = summary["value"]
    evidence = library.evidence(harness)
    with_library = points.join(evidence, on="harness_model")
    novel = lru_cache(maxsize=None)(partial(library.evidence, harness))  # the same fold in every draw
    only = calibrate_points(METRIC, {}, points, candidates=HARNESS_ONLY)
    full = calibrate_points(METRIC, {}, with_library, novel=novel)
    samples = _k_draws(points, draws)
    return {
        "models": len(points), "library": list(library.names),
        "harness_only": {"within_10pct": _share(only),
                         "within_10pct_k5": _mean([_few_shot(points, s, HARNESS_ONLY) for s in samples]),
                         "mape_pct": error_stats(points["device"], only.held_out.predicted)["mape_pct"]},
        "in_library": {"within_10pct": _share(full),
                       "within_10pct_k5": _mean([_few_shot(with_library, s, AUTO_CANDIDATES) for s in samples]),
                       "mape_pct": error_stats(with_library["device"], full.held_out.predicted)["mape_pct"],
                       "fits": dict(Counter(full.held_out.picks))},
        "novel": {"within_10pct": _share(full, "within_10pct_novel"),
                  "within_10pct_k5": _mean([_few_shot(with_library, s, AUTO_CANDIDATES, novel) for s in samples])},
        "new_family": _new_family(points, library, harness),
    }


POLICIES = ("harness_only", "in_library")
"""Whether the calibration learns from the library, in order of preference on equal scores: without it, as before."""


def chosen_policy(tables: dict[str, dict[str, Any]], held_out: str) -> dict[str, Any]:
    """The policy with the best mean nested share on the *other* tables, and this table's figures under it (a model
    in the library, and a novel one): how the shipped default is judged on a table it was not chosen on."""
    others = [name for name in tables if name != held_out]
    policy = max(POLICIES, key=lambda p: (round(float(np.mean([tables[n][p]["within_10pct"] for n in others])), 6),
                                          -POLICIES.index(p)))
    mine = tables[held_out]
    novel = mine["novel"] if policy == "in_library" else mine["harness_only"]
    return {"policy": policy, "within_10pct": mine[policy]["within_10pct"], "within_10pct_novel":
            novel["within_10pct"]}


def run(directory: Path | None, summary: pd.DataFrame, draws: int) -> dict[str, Any]:
    library_tables = [t for t in shipped_tables() if not t.column]  # NAS-Bench-201 cells share no model with them
    tables = {}
    for table in scored_tables(directory):
        figures = score_table(table, summary, library_tables, draws)
        if figures is not None:
            tables[table.name] = figures
    for name, figures in tables.items():
        figures["chosen"] = chosen_policy(tables, name)
    kinds = {"ncnn": [n for n in tables if n.startswith("ncnn-")], "tflite": [n for n in tables if
                                                                               not n.startswith("ncnn-")]}
    means = {kind: {policy: {key: float(np.mean([tables[n][policy][key] for n in names
                                                 if tables[n][policy][key] is not None]))
                             for key in ("within_10pct", "within_10pct_k5")}
                    for policy in ("harness_only", "in_library", "novel")} for kind, names in kinds.items() if names}
    for kind, names in kinds.items():
        scored = [tables[n]["new_family"] for n in names if tables[n]["new_family"]["models"]]
        if names and scored:
            means[kind]["new_family"] = {key: float(np.average([f[key] for f in scored],
                                                               weights=[f["models"] for f in scored]))
                                         for key in ("within_10pct", "coverage")}
    return {"tables": tables, "means": means, "draws": draws}


def show(result: dict[str, Any]) -> None:
    rows = [{"table": name, "models": f["models"],
             **{f"{policy} {label}": f[policy][key] for policy in ("harness_only", "in_library", "novel")
                for key, label in (("within_10pct", "nested"), ("within_10pct_k5", f"k={K}"))},
             "new family within ±10%": f["new_family"]["within_10pct"],
             "new family coverage": f["new_family"]["coverage"],
             "policy chosen on the others": f["chosen"]["policy"]}
            for name, f in result["tables"].items()]
    print_table("Published tables, each a device never seen: share within ±10% (nested leave-one-out, and from "
                f"{K} drawn models)", rows)
    print_table("Means by kind of table", [{"tables": kind, **{f"{policy} {key}": value for policy, figures in
                                                               by.items() for key, value in figures.items()}}
                                           for kind, by in result["means"].items()])


def main() -> None:
    env = os.environ.get  # make's variables arrive as environment variables, never through a shell
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--devices", type=Path, default=Path(env("HARNESS_LIBRARY_DEVICES")) if env(
        "HARNESS_LIBRARY_DEVICES") else None, help="score every device CSV of this folder instead of the shipped ones")
    parser.add_argument("--draws", type=int, default=DRAWS)
    parser.add_argument("--session", type=Path, default=Path(env("HARNESS_BENCH_SESSION")) if env(
        "HARNESS_BENCH_SESSION") else None, help="rebuild the summary from this profile session first")
    parser.add_argument("--summary", type=Path, default=SUMMARY_CSV)
    parser.add_argument("--out", type=Path, default=OUT_DIR / "library.json")
    args = parser.parse_args()
    try:
        if args.session:
            summarise(args.session).to_csv(args.summary, float_format="%.6g")
            print(f"summary: {args.summary}")
        summary = pd.read_csv(args.summary, index_col="model_name")
        result = rescore(args.out, lambda: run(args.devices, summary, args.draws), show)
        print(f"written: {args.out} ({result['rescore_s']} s)")
    except HarnessError as err:
        raise SystemExit(f"bench-library: {err}") from None


if __name__ == "__main__":
    main()
