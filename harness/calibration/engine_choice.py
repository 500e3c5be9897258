"""The engine as a choice of the calibration: whose timings on this host, through which fit, predict a device best.

One engine's timings may track a device better than another's: the device ran it, or an engine whose kernels are
alike (depthwise, Winograd 3x3, squeeze-excite move differently per engine). Given one Design per engine over the
same models, the (engine, fit) pair is chosen as the fit alone is (harness.calibration.choice.choose: most inner
held-out models within ±10%, ties by MAPE, then the earlier pair: simpler fits first, engines in the order given),
and its held-out figure is nested the same way: without each model in turn, the pair is chosen again from the rest
only and then predicts the left-out model. A pair is named `engine:fit`.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pandas as pd

from harness.analysis.run_values import harness_values
from harness.calibration.calibrate import calibrate_points, points_design
from harness.calibration.choice import (
    AUTO,
    Candidates,
    HeldOut,
    candidate_predictions,
    choose,
    folds,
    held_out_interval,
    simplest_trainable,
)
from harness.calibration.fits import FIT_NAMES, Design, fit_spec
from harness.calibration.points import model_facts_table, paired_points
from harness.core import metric_registry
from harness.core.records import RunRecord
from harness.device.data import DeviceData

KEY = ["harness_model", "cpus"]

AUTO_ENGINE = f"{AUTO} engine"


def pair_name(engine: str, fit: str) -> str:
    return f"{engine}:{fit}"


def split_pair(name: str) -> tuple[str, str]:
    engine, fit = name.rsplit(":", 1)
    return engine, fit


def pair_predictions(designs: dict[str, Design], y: np.ndarray, candidates: Candidates,
                     queries: dict[str, Design] | None = None) -> dict[str, np.ndarray | None]:
    """Every usable (engine, fit) pair → its leave-one-out predictions of `y`, simpler fits first."""
    per_engine = {engine: candidate_predictions(design, y, candidates, None if queries is None else queries[engine])
                  for engine, design in designs.items()}
    return {pair_name(engine, fit): predicted[fit] for fit in FIT_NAMES
            for engine, predicted in per_engine.items() if fit in predicted}


def select_pair(designs: dict[str, Design], y: np.ndarray, candidates: Candidates,
                queries: dict[str, Design] | None = None) -> tuple[str, str] | None:
    """The (engine, fit) the automatic choice takes on these models, or None when no fit trains on any engine."""
    predicted = pair_predictions(designs, y, candidates, queries)
    chosen = choose(predicted, y, order=tuple(predicted))
    if chosen is not None:
        return split_pair(chosen)
    for engine, design in designs.items():
        fallback = simplest_trainable(design, y, candidates.among(len(y)))
        if fallback is not None:
            return engine, fallback.name
    return None


def nested_engine_choice(designs: dict[str, Design], y: np.ndarray, candidates: Candidates) -> HeldOut | None:
    """The (engine, fit) choice remade without each model in turn, then predicting it; its picks name the pairs."""
    n = len(y)
    predicted, low, high, outside, picks = np.empty(n), np.empty(n), np.empty(n), np.zeros(n), []
    for i, keep in folds(n):
        rest = {engine: design.take(keep) for engine, design in designs.items()}
        left_out = {engine: design.take(np.array([i])) for engine, design in designs.items()}
        pair = select_pair(rest, y[keep], candidates, left_out)
        if pair is None:
            return None
        engine, fit = pair
        model = fit_spec(fit).train(rest[engine], y[keep])
        if model is None:
            return None
        picks.append(pair_name(engine, fit))
        predicted[i], low[i], high[i], outside[i] = held_out_interval(model, rest[engine], left_out[engine])
    return HeldOut(AUTO_ENGINE, predicted, low, high, outside, tuple(picks))


def common_points(points: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """Each engine's paired points (harness.calibration.points.paired_points, facts joined) over the models and CPU
    counts every engine has, in one order: engines are compared on the same models or not at all."""
    indexed = {engine: frame.set_index(KEY) for engine, frame in points.items()}
    common = sorted(set.intersection(*(set(frame.index) for frame in indexed.values()))) if indexed else []
    return {engine: frame.loc[common].reset_index() for engine, frame in indexed.items()}


def compare_engines(metric: str, points: dict[str, pd.DataFrame], candidates: Candidates) -> list[dict[str, Any]]:
    """One row per engine: its nested `auto` figures on the models every engine ran (common_points), then the
    `auto engine` row, the (engine, fit) chosen inside each fold. Empty with fewer than two engines or models."""
    same = common_points(points)
    if len(same) < 2 or any(len(frame) < 3 for frame in same.values()):
        return []
    rows = []
    for engine, frame in same.items():
        calibration = calibrate_points(metric, {}, frame, candidates=candidates)
        assert calibration.held_out is not None  # figures=True always nests `auto`
        rows.append(_row(engine, calibration.points["device"].to_numpy(float), calibration.held_out,
                         calibration.model.name))
    y = next(iter(same.values()))["device"].to_numpy(float)
    chosen = nested_engine_choice({engine: points_design(frame) for engine, frame in same.items()}, y, candidates)
    if chosen is not None:
        picks = Counter(split_pair(pick)[0] for pick in chosen.picks)
        rows.append(_row(AUTO_ENGINE, y, chosen, ", ".join(f"{engine} {n}" for engine, n in picks.most_common())))
    return rows


def _row(engine: str, y: np.ndarray, held: HeldOut, fit: str) -> dict[str, Any]:
    figures = held.figures(y)
    return {"engine": engine, "models": len(y), "fit": fit, "within_10pct": figures["within_10pct"],
            "within_20pct": figures["within_20pct"], "mape_pct": figures["mape_pct"],
            "kendall_tau": figures["kendall_tau"]}


def compare_engine_runs(device: DeviceData, runs: dict[str, list[RunRecord]], metric: str, across: str | None,
                        candidates: Candidates) -> list[dict[str, Any]]:
    """compare_engines on `device`'s data against each engine's runs (harness.analysis.run_values.runs_by_engine),
    each model's repeats summarised as `across` says."""
    points = {}
    for engine, engine_runs in runs.items():
        values = harness_values(engine_runs, metric_registry.get(metric).harness_side, across)
        paired = paired_points(device, values, metric, "cpus")
        if not paired.empty:
            points[engine] = paired.join(model_facts_table(engine_runs), on="harness_model")
    return compare_engines(metric, points, candidates)
