"""The report's first section: the answer, before any detail.

Under this profile: the ranking (ties marked), which models no other model beats on latency, peak memory and
size at once (the Pareto set, with its chart), and for each imported device the predicted device numbers with
their 95% prediction intervals. Scripts profiled as a whole have no latency: they are ranked by runtime.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.analysis.ranking import MIN_RELATIVE_GAP, RankEntry, rank_runs
from harness.analysis.run_values import harness_values
from harness.calibration.calibrate import calibrate_runs, group_label
from harness.calibration.transfer import device_library
from harness.core import metric_registry
from harness.core.errors import DataError
from harness.core.records import RunRecord, SessionInfo
from harness.device.accuracy import Accuracy, accuracies
from harness.device.data import DeviceData, load_device
from harness.report.figures import pareto_chart
from harness.report.format import mib, sig, with_interval

LATENCY = metric_registry.LATENCY
"""The accuracy table's latency column: the metric's own name."""

TIE = "="
"""Appended to a shared rank: `1=` reads "first, tied"."""
PEAK = metric_registry.get(metric_registry.PEAK_MEMORY)


def primary_metric(runs: list[RunRecord]) -> str:
    """Latency when any run reported it; otherwise (scripts profiled as a whole) the runtime."""
    latency = metric_registry.get(metric_registry.LATENCY)
    has_latency = any(run.ok and latency.value(run.line) is not None for run in runs)
    return latency.name if has_latency else metric_registry.RUNTIME


def model_sizes(runs: list[RunRecord]) -> dict[str, float]:
    """Model file size per model; none for scripts profiled as a whole (a script's size is no model size)."""
    return {run.model_name: run.model["model_size_mib"] for run in runs
            if run.model.get("model_size_mib") is not None and run.model.get("model_kind") != "script"}


def non_dominated(values: pd.DataFrame, tolerance: float = MIN_RELATIVE_GAP) -> pd.Series:
    """True where no other row dominates: is within `tolerance` of it or better in every column, and better by
    more than `tolerance` in one (lower is better). Gaps under the ranking's minimum factor are noise, so a model
    0.1% lighter but twice as slow as another is not kept on the frontier for that 0.1%."""
    array = values.to_numpy(float)
    flags = []
    for row in array:
        no_worse = np.all(array <= row * (1 + tolerance), axis=1)
        better = np.any(array * (1 + tolerance) < row, axis=1)
        flags.append(not np.any(no_worse & better))
    return pd.Series(flags, index=values.index)


def pareto_points(runs: list[RunRecord], metric: str, cpus: float) -> pd.DataFrame:
    """Per model at `cpus`: median `metric` (x), median peak memory (y), size, and the non-dominated flag."""
    x = harness_values(runs, metric, metric_registry.MEDIAN)
    y = harness_values(runs, PEAK.name, metric_registry.MEDIAN)
    points = x[x["cpus"] == cpus].merge(y[y["cpus"] == cpus], on=["model_name", "cpus"], suffixes=("_x", "_y"))
    points = points.rename(columns={"model_name": "model", "value_x": "x", "value_y": "y"})[["model", "x", "y"]]
    sizes = model_sizes(runs)
    points["size_mib"] = points["model"].map(sizes).astype(float)
    criteria = ["x", "y"] + (["size_mib"] if points["size_mib"].notna().all() else [])
    points["non_dominated"] = non_dominated(points[criteria]) if len(points) else []
    return points.sort_values("x").reset_index(drop=True)


def device_energy_points(device: DeviceData) -> pd.DataFrame | None:
    """The device's own latency (x) against its energy per inference (y), per measured model and thread count,
    with the non-dominated flag; None when its data lacks either. Measured numbers only: no fit in between."""
    latency, energy = metric_registry.LATENCY, metric_registry.ENERGY
    if latency not in device.metrics or energy not in device.metrics:
        return None
    rows = device.table.dropna(subset=[latency, energy])
    if rows.empty:
        return None
    several = "cpus" in rows and rows["cpus"].nunique() > 1
    points = pd.DataFrame({
        "model": [f"{m} (cpus={c:g})" if several else m for m, c in zip(
            rows["model"], rows["cpus"] if "cpus" in rows else [math.nan] * len(rows), strict=True)],
        "x": rows[latency].to_numpy(float), "y": rows[energy].to_numpy(float), "size_mib": math.nan})
    points["non_dominated"] = non_dominated(points[["x", "y"]])
    return points.sort_values("x").reset_index(drop=True)


def ranking_table(rankings: dict[float, list[RankEntry]], metric: str, points: dict[float, pd.DataFrame],
                  sizes: dict[str, float]) -> pd.DataFrame:
    """One row per model and CPU count, best first, at full precision: rank, tie, median with CI, peak, size."""
    rows = []
    for cpus, entries in rankings.items():
        frame = points[cpus].set_index("model")
        for e in entries:
            tied = e.rank is not None and sum(o.rank == e.rank for o in entries) > 1
            rows.append({"rank": e.rank, "status": e.status, "tied": tied, "model": e.model,
                         "cpus": cpus, f"{metric}_median": e.median, f"{metric}_ci95_low": e.ci95_low,
                         f"{metric}_ci95_high": e.ci95_high,
                         f"{PEAK.name}_median": frame["y"].get(e.model), "size_mib": sizes.get(e.model),
                         "non_dominated": bool(frame["non_dominated"].get(e.model, False))})
    return pd.DataFrame(rows)


def ranking_display(table: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The ranking as read: `1=` for a shared rank, the median with its CI in one cell, units in the labels."""
    shown = pd.DataFrame({"rank": [f"{int(r)}{TIE if t else ''}" if pd.notna(r) else f"— ({status})"
                                   for r, t, status in zip(table["rank"], table["tied"], table["status"], strict=True)],
                          "model": table["model"]})
    if table["cpus"].nunique() > 1:
        shown["cpus"] = [f"{c:g}" for c in table["cpus"]]
    shown[metric_registry.get(metric).label_with_unit + " [95% CI]"] = [with_interval(*v) for v in zip(
        table[f"{metric}_median"], table[f"{metric}_ci95_low"], table[f"{metric}_ci95_high"], strict=True)]
    shown[PEAK.label_with_unit] = table[f"{PEAK.name}_median"].map(sig)
    if table["size_mib"].notna().any():
        shown["size (MiB)"] = table["size_mib"].map(sig)
    shown["Pareto"] = ["✓" if flag else "" for flag in table["non_dominated"]]
    return shown


def answer_sentence(rankings: dict[float, list[RankEntry]], metric: str, points: pd.DataFrame, cpus: float,
                    profile: dict[str, Any]) -> str:
    """The answer in words: who is best, who is tied with it, and which models are worth a look at all."""
    best = [e for e in rankings[cpus] if e.rank == 1]
    unit = metric_registry.get(metric).unit
    what = "fastest" if metric == metric_registry.LATENCY else "quickest to finish"
    names = ", ".join(f"{e.model} ({sig(e.median)} {unit})" for e in best)
    lead = f"{what.capitalize()}, tied (not significantly different): {names}" if len(best) > 1 else \
        f"{what.capitalize()}: {names}"
    frontier = ", ".join(points.loc[points["non_dominated"], "model"])
    criteria = "latency, peak memory" + (" and size" if points["size_mib"].notna().all() else "")
    limits = f"cpus={cpus:g}, memory {mib(int(profile['MEMORY']))}" if str(profile.get("MEMORY", "")).isdigit() \
        else f"cpus={cpus:g}"
    return (f"Under this profile ({profile.get('DEVICE_NAME', 'generic')}: {limits}). {lead}. "
            f"Non-dominated (no other model is as good on {criteria} and over {MIN_RELATIVE_GAP:.0%} better on "
            f"one): {frontier}.")


def device_predictions(results_dir: Path, device_name: str,
                       runs: list[RunRecord]) -> tuple[pd.DataFrame, pd.DataFrame] | str:
    """Predicted device values with 95% prediction intervals for every profiled model (full precision, and as
    read), or the reason there are none."""
    try:
        cset, measured = calibrate_runs(load_device(results_dir, device_name), runs,
                                        library=device_library(results_dir, device_name))
    except DataError as err:
        return f"{device_name}: no predictions yet. {err}"
    models = sorted({run.model_name for run in runs if run.model_name})
    predictions = cset.predict(measured, models)
    if not predictions:
        return f"{device_name}: no predictions yet; no metric could be fitted (see its calibration section)"
    predicted = pd.DataFrame([p.to_dict() for p in predictions]).drop(columns=["calibrated_range"])
    predicted["group"] = predicted["group"].map(group_label)
    shown = pd.DataFrame({
        "model": [p.model for p in predictions], "metric": [p.metric for p in predictions],
        "group": predicted["group"],
        "device, predicted [95% PI]": [
            with_interval(p.predicted, p.pi_low, p.pi_high)
            + (" (outside the calibration models' reach)" if p.outside else "") for p in predictions],
        "device, measured": [sig(p.measured_on_device) for p in predictions],
    })
    return predicted, shown


def device_ranking(predicted: pd.DataFrame) -> pd.DataFrame | None:
    """The models by a device's predicted latency, fastest first, at full precision: a model whose 95% prediction
    interval overlaps that of the first model of the rank above it shares that rank (the intervals cannot order
    them). Overlap with the first, not with the neighbour: neighbours' overlaps chain, and would tie models whose own
    intervals lie far apart. None when the device has no latency predictions. One CPU group: the one with the most
    models predicted."""
    rows = predicted[(predicted["metric"] == metric_registry.LATENCY) & predicted["predicted"].notna()]
    if rows.empty:
        return None
    group = rows["group"].value_counts().index[0]
    rows = rows[rows["group"] == group].sort_values("predicted").reset_index(drop=True)
    ranks, tied, first = [1], [False], 0
    for i in range(1, len(rows)):
        overlaps = rows.loc[i, "pi_low"] <= rows.loc[first, "pi_high"]
        if not overlaps:
            first = i
        ranks.append(ranks[-1] if overlaps else i + 1)
        tied.append(bool(overlaps))
        if overlaps:
            tied[first] = True
    return pd.DataFrame({"rank": ranks, "tied": tied, "model": rows["model"], "group": rows["group"],
                         "predicted_ms": rows["predicted"], "pi_low_ms": rows["pi_low"], "pi_high_ms": rows["pi_high"]})


def devices_side_by_side(predictions: dict[str, tuple[pd.DataFrame, pd.DataFrame] | str]) -> pd.DataFrame | None:
    """With two devices or more predicted: models as rows, a column per device, each predicted latency with its 95%
    interval (the group each device has most predictions in); None otherwise."""
    columns = {}
    for name, predicted in predictions.items():
        ranking = None if isinstance(predicted, str) else device_ranking(predicted[0])
        if ranking is not None:
            columns[name] = {m: with_interval(p, lo, hi) for m, p, lo, hi in zip(
                ranking["model"], ranking["predicted_ms"], ranking["pi_low_ms"], ranking["pi_high_ms"], strict=True)}
    if len(columns) < 2:
        return None
    table = pd.DataFrame(columns).fillna("—")
    return table.rename_axis("model").reset_index()


def device_ranking_display(ranking: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({
        "rank": [f"{r}{TIE if t else ''}" for r, t in zip(ranking["rank"], ranking["tied"], strict=True)],
        "model": ranking["model"],
        "predicted latency (ms) [95% PI]": [with_interval(*v) for v in zip(
            ranking["predicted_ms"], ranking["pi_low_ms"], ranking["pi_high_ms"], strict=True)]})


def device_sentence(device: str, ranking: pd.DataFrame) -> str:
    """The answer on the device: the fastest by its predicted latency, with the models it cannot be told from."""
    best = ranking[ranking["rank"] == 1]
    names = ", ".join(f"{m} ({with_interval(p, lo, hi)} ms)" for m, p, lo, hi in zip(
        best["model"], best["predicted_ms"], best["pi_low_ms"], best["pi_high_ms"], strict=True))
    lead = "fastest, tied (their 95% prediction intervals overlap)" if len(best) > 1 else "fastest"
    return f"On {device}, by its predicted latency ({ranking['group'].iloc[0]}): {lead}: {names}."


def accuracy_table(found: dict[str, Accuracy], points: pd.DataFrame, device: str | None,
                   by_device: pd.DataFrame | None) -> pd.DataFrame | None:
    """Per model with an accuracy: its accuracy and source, its latency (the device's predicted one, with its
    interval, where a device answers; else this host's median), its peak memory here, and whether no other model
    is as accurate, as fast and as light and over MIN_RELATIVE_GAP better on one (the error, 100 - accuracy,
    counted as lower is better)."""
    if not found:
        return None
    host = points.set_index("model")
    predicted = by_device.set_index("model") if by_device is not None else None
    rows = []
    for model, accuracy in found.items():
        if predicted is not None and model in predicted.index:
            latency, low, high = (float(predicted.loc[model, c]) for c in ("predicted_ms", "pi_low_ms", "pi_high_ms"))
        elif predicted is None and model in host.index:
            latency, low, high = float(host.loc[model, "x"]), math.nan, math.nan
        else:
            continue
        rows.append({"model": model, "accuracy_pct": accuracy.value, "source": accuracy.source,
                     LATENCY: latency, "latency_low_ms": low, "latency_high_ms": high,
                     "latency_on": device or "this host", PEAK.name: float(host["y"].get(model, math.nan))})
    if not rows:
        return None
    table = pd.DataFrame(rows).sort_values(LATENCY).reset_index(drop=True)
    criteria = pd.DataFrame({"latency": table[LATENCY], "error": 100.0 - table["accuracy_pct"]})
    if table[PEAK.name].notna().all():
        criteria["memory"] = table[PEAK.name]
    table["non_dominated"] = non_dominated(criteria).to_numpy()
    return table


def accuracy_display(table: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({
        "model": table["model"], "accuracy (%)": table["accuracy_pct"].map(sig),
        "latency (ms)": [with_interval(*v) for v in zip(table[LATENCY], table["latency_low_ms"],
                                                        table["latency_high_ms"], strict=True)],
        "on": table["latency_on"], PEAK.label_with_unit: table[PEAK.name].map(sig),
        "Pareto": ["✓" if flag else "" for flag in table["non_dominated"]], "accuracy from": table["source"]})


def accuracy_sentence(table: pd.DataFrame, max_latency_ms: float | None) -> str:
    """The pick: the accuracy-latency frontier, and the most accurate model within the latency budget."""
    where = table["latency_on"].iloc[0]
    front = table[table["non_dominated"]]
    text = (f"Accuracy against latency on {where} (no other model as accurate, as fast and as light): "
            + ", ".join(f"{m} ({sig(a)}%, {sig(t)} ms)" for m, a, t in zip(
                front["model"], front["accuracy_pct"], front[LATENCY], strict=True)) + ".")
    if max_latency_ms is None:
        return text
    within = table[table[LATENCY] <= max_latency_ms]
    if within.empty:
        fastest = table.iloc[0]
        return (f"{text} No model with a known accuracy is under {sig(max_latency_ms)} ms on {where}; the fastest is "
                f"{fastest['model']} ({sig(fastest[LATENCY])} ms).")
    best = within.sort_values(["accuracy_pct", LATENCY], ascending=[False, True]).iloc[0]
    reach = (f"; its 95% interval reaches {sig(best['latency_high_ms'])} ms"
             if best["latency_high_ms"] > max_latency_ms else "")
    return (f"{text} Most accurate under {sig(max_latency_ms)} ms on {where}: {best['model']} "
            f"({sig(best['accuracy_pct'])}%, {sig(best[LATENCY])} ms{reach}).")


@dataclass(frozen=True)
class AnswerParts:
    """Everything the answer section shows, computed before any of it is laid out."""

    metric: str  # what the models are ranked by: latency_ms, or runtime_s for scripts profiled as a whole
    cpus: float  # the CPU count the sentence and chart answer at: the session's largest
    chart: bytes  # the Pareto chart at `cpus`, PNG
    sentence: str
    ranking: pd.DataFrame  # full precision, every CPU count
    ranking_shown: pd.DataFrame  # the same, as read
    devices: dict[str, tuple[pd.DataFrame, pd.DataFrame] | str]  # per imported device: predictions, or why none
    device: str | None = None  # the device the answer ranks by: the first of `devices` with latency predictions
    device_ranking: pd.DataFrame | None = None  # its models by predicted latency, and as read
    device_ranking_shown: pd.DataFrame | None = None
    accuracy: pd.DataFrame | None = None  # accuracy against latency, where any model's accuracy is known
    accuracy_shown: pd.DataFrame | None = None
    by_devices: pd.DataFrame | None = None  # predicted latency per model and device, with two devices or more


def answer_parts(results_dir: Path, runs: list[RunRecord], info: SessionInfo, devices: list[str],
                 accuracy_file: Path | None = None, max_latency_ms: float | None = None) -> AnswerParts:
    """Everything the answer section shows: sentence, ranking table, Pareto chart, device predictions, and where
    accuracies are known (harness.device.accuracy) the accuracy-latency frontier and the pick under the budget."""
    metric = primary_metric(runs)
    rankings = rank_runs(runs, metric)
    cpus = max(rankings)  # a sweep answers at its largest CPU count; the details have every count
    points = {c: pareto_points(runs, metric, c) for c in rankings}
    x = metric_registry.get(metric)
    chart = pareto_chart(points[cpus], f"{x.label}, median ({x.unit})", f"{PEAK.label}, median ({PEAK.unit})",
                         f"Pareto chart at cpus={cpus:g}")
    ranking = ranking_table(rankings, metric, points, model_sizes(runs))
    predictions = {name: device_predictions(results_dir, name, runs) for name in devices}
    sentence = answer_sentence(rankings, metric, points[cpus], cpus, info.profile)
    device, by_device = None, None
    for name, predicted in predictions.items():  # a named device answers first, by its predictions
        by_device = None if isinstance(predicted, str) else device_ranking(predicted[0])
        if by_device is not None:
            device, sentence = name, f"{device_sentence(name, by_device)} {sentence}"
            break
    models = sorted({run.model_name for run in runs if run.model_name})
    accuracy = accuracy_table(accuracies(models, results_dir, accuracy_file), points[cpus], device, by_device) \
        if metric == metric_registry.LATENCY else None
    if accuracy is not None:
        sentence += f" {accuracy_sentence(accuracy, max_latency_ms)}"
    return AnswerParts(metric, cpus, chart, sentence, ranking, ranking_display(ranking, metric), predictions, device,
                       by_device, None if by_device is None else device_ranking_display(by_device), accuracy,
                       None if accuracy is None else accuracy_display(accuracy), devices_side_by_side(predictions))
