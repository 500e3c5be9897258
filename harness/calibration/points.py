"""Calibration points: which device row stands beside which harness value (by model and thread count), the
model facts the fits read, and how the harness values were made from the repeats."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from harness.calibration.fits import FACT_NAMES, FIT_FACTS, OP_SPLIT, WORK_FACTS
from harness.core import metric_registry
from harness.core.errors import DataError, ModelError
from harness.core.records import RunRecord
from harness.device.data import DeviceData
from harness.models.families import model_family


def device_threads(device: DeviceData) -> set[float]:
    table = device.table
    return set(table["cpus"].dropna()) if "cpus" in table else set()


def device_rows_for_cpus(device: DeviceData, cpus: float, harness_cpus: set[float]) -> pd.DataFrame:
    """Device rows to pair with harness runs at `cpus`: those run with as many threads. When the device data
    states no thread count, or a single one at which the harness has no runs (a host with fewer cores than
    the phone), every harness CPUS value is paired with it: each gets its own fit."""
    table, threads = device.table, device_threads(device)
    if not threads:
        return table
    if cpus in threads:
        return table[table["cpus"] == cpus]
    if len(threads) == 1 and not threads & harness_cpus:
        return table
    return table.iloc[0:0]


def threads_note(device: DeviceData, cpus: float) -> str:
    """How the device's thread count met the harness CPUS value of a group, in words."""
    threads = device_threads(device)
    if not threads:
        return f"device data states no thread count; harness CPUS={cpus:g}"
    if cpus in threads:
        return f"device threads {cpus:g} matched to harness CPUS={cpus:g}"
    (only,) = threads
    return f"device threads {only:g}; no harness runs at CPUS={only:g}, so harness CPUS={cpus:g} is used"


def _one_device_row(device: DeviceData, rows: list[pd.Series], harness_model: str, metric: str) -> pd.Series:
    """The device row that stands for `harness_model`: a harness_model cell settles a tie; two rows without
    one would put two device numbers at one harness value, and leave-one-out would keep the twin in."""
    if len(rows) == 1:
        return rows[0]
    explicit = [row for row in rows if row.get("harness_model") == harness_model]
    if len(explicit) == 1:
        return explicit[0]
    first, second = (str(row["model"]) for row in rows[:2])
    raise DataError(
        f"device {device.name}: rows {first} and {second} both match harness model {harness_model} for {metric}; "
        f"a harness model takes one device row per metric: write {harness_model} in a harness_model column on "
        "the row that stands for it, or drop the other row"
    )


def paired_points(device: DeviceData, measured: pd.DataFrame, metric: str, group_by: str,
                  twins: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Device values beside the harness values: one row per matched model and harness CPU count. A model's `twins`
    entry (the zoo model its graph is) matches device rows and gives its family, as its own name would."""
    twins = twins or {}
    mapping = device.match(sorted(set(measured["model_name"])), twins)
    harness_cpus = set(measured["cpus"])
    rows = []
    for (harness_model, cpus), entry in measured.set_index(["model_name", "cpus"]).iterrows():
        candidates = [
            device_row for _, device_row in device_rows_for_cpus(device, cpus, harness_cpus).iterrows()
            if mapping.get(device_row["model"]) == harness_model and not pd.isna(device_row.get(metric))
        ]
        if not candidates:
            continue
        device_row = _one_device_row(device, candidates, harness_model, metric)
        row = {
            "model": device_row["model"],
            "harness_model": harness_model,
            "cpus": cpus,
            "harness": entry["value"],
            "harness_n": int(entry["n"]),
            "harness_over": entry["over"],
            "device": float(device_row[metric]),
            "device_n": int(device_row["n"]),
            "family": model_family(twins.get(harness_model, harness_model)),
        }
        if group_by != "cpus":
            tag = device_row.get(group_by)
            row[group_by] = "unknown" if pd.isna(tag) else str(tag)
        rows.append(row)
    return pd.DataFrame(rows)


STATIC_FACTS = (*FACT_NAMES, *WORK_FACTS)
"""The facts of a model's graph that a run records (`model_facts`)."""


def model_facts_table(runs: list[RunRecord]) -> pd.DataFrame:
    """The facts fits read (FIT_FACTS) per harness model, NaN where unknown: static facts from its newest run's
    `model_facts`, and the per-op split as the median over its runs that have a per-op profile.

    A fact that runs recorded before the harness computed it is read from the model file when that is an ONNX
    file still on disk (for sessions profiled by an older version)."""
    newest = {run.model_name: run for run in runs if run.model_name}
    rows = {}
    for name, run in newest.items():
        facts = run.model.get("model_facts") or {}
        if any(key not in facts for key in STATIC_FACTS) and run.model.get("model_kind") == "onnx":
            facts = {**_facts_from_file(run.model.get("model_path")), **facts}
        rows[name] = {key: facts.get(key) if isinstance(facts.get(key), (int, float)) else np.nan
                      for key in STATIC_FACTS}
        splits = [run["per_op"][OP_SPLIT] for run in runs if run.model_name == name
                  and isinstance((run.get("per_op") or {}).get(OP_SPLIT), (int, float))]
        rows[name][OP_SPLIT] = float(np.median(splits)) if splits else np.nan
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(FIT_FACTS), dtype=float)


def _facts_from_file(path: str | None) -> dict[str, Any]:
    from harness.models.facts import onnx_facts  # onnx loads only for old sessions that lack a fact

    try:
        return onnx_facts(path) if path else {}
    except ModelError:
        return {}


def no_match_reason(device: DeviceData, measured: pd.DataFrame) -> str:
    threads = sorted(device_threads(device))
    cpus = sorted(measured["cpus"].unique())
    if len(threads) > 1 and not set(threads) & set(cpus):
        return (f"the device's thread counts ({', '.join(f'{t:g}' for t in threads)}) never equal the harness's "
                f"cpus ({', '.join(f'{c:g}' for c in cpus)}); profile with CPUS set to one of them")
    return "no device model matches a model with ok runs"


def repeats_note(values: pd.DataFrame, repeats: pd.Series) -> str:
    """How the fitted harness values were made from the repeats, for the output: `fastest inference of 5 repeats`."""
    how = values["across"].iloc[0] if "across" in values and len(values) else metric_registry.MEDIAN
    low, high = int(repeats.min()), int(repeats.max())
    count = f"{low}" if low == high else f"{low} to {high}"
    return f"{how.replace('-', ' ')} of {count} repeats"


def counts_note(over: float, calibrated: pd.Series, across: str) -> str | None:
    """Why a minimum over another count than the calibration models' is biased (None when the counts match, or
    for the median, which does not drift with them)."""
    low, high = calibrated.min(), calibrated.max()
    if across == metric_registry.MEDIAN or pd.isna(over) or low <= over <= high:
        return None
    unit = "inferences" if across == metric_registry.FASTEST_INFERENCE else "repeats"
    span = f"{low:g}" if low == high else f"{low:g} to {high:g}"
    return (f"its harness value is the fastest of {over:g} {unit}, the calibration models' of {span}: a minimum "
            f"is lower over more values, so profile it with the calibration models' REPEATS and ITERATIONS")
