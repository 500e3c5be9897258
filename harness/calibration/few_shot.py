"""How well the calibration does from a few device measurements: the learning curve.

Users measure 3 to 10 models on a device, not 20. For k calibration models, the rest of the matched models play
the models to predict: the fit is chosen and trained on the k alone (as `regress` would on them), predicts each of
the others, and the curve records the share of those within ±10% of the device and the share inside their 95%
interval. The k models are picked two ways: by `suggest` before any measurement (suggest_first: families first,
then spread over harness values and op mix), and at random (RANDOM_DRAWS seeded draws, their mean and their
10th–90th percentiles), which shows what the picks are worth.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness.calibration.calibrate import AUTO_CANDIDATES, Calibration, calibrate_points, points_design
from harness.calibration.choice import Candidates, error_stats
from harness.calibration.suggest import suggest_first
from harness.core.errors import DataError

K_VALUES: tuple[int, ...] = (3, 5, 8, 10)
RANDOM_DRAWS = 40
SEED = 0
MIN_LEFT = 3
"""A k is shown only when at least this many models are left to predict."""
FIRST_PICKS_FIT = "relative"
"""The fit whose intervals the picks before any measurement shrink (the prior's shape)."""


@dataclass(frozen=True)
class Trial:
    """One set of k calibration models and how the fit from them did on the rest."""

    how: str
    k: int
    models: tuple[str, ...]
    left: int
    """How many models the fit predicted: the others."""
    within_10pct: float
    coverage: float
    fit: str


def held_out_of(calibration: Calibration, rest: pd.DataFrame) -> tuple[float, float]:
    """(share within ±10%, share inside the 95% interval) of the chosen fit's predictions for `rest`."""
    found = calibration.intervals(calibration.design(rest["harness"], rest.set_index("harness_model"),
                                                     rest["harness_model"]))
    y = rest["device"].to_numpy(float)
    return error_stats(y, found.predicted)["within_10pct"], float(np.mean((found.low <= y) & (y <= found.high)))


def trial(points: pd.DataFrame, chosen: list[str], how: str, candidates: Candidates) -> Trial | None:
    """Calibrate on the models `chosen` (harness model names) as `regress` would (`auto` among `candidates`), score
    on the others; None when they cannot be fitted (two equal harness values, say)."""
    used = points["harness_model"].isin(chosen)
    try:
        calibration = calibrate_points("latency", {}, points[used], figures=False, candidates=candidates)
    except DataError:
        return None
    within, coverage = held_out_of(calibration, points[~used])
    return Trial(how, len(chosen), tuple(chosen), int((~used).sum()), within, coverage, calibration.model.name)


def learning_curve(points: pd.DataFrame, candidates: Candidates = AUTO_CANDIDATES,
                   k_values: tuple[int, ...] = K_VALUES, draws: int = RANDOM_DRAWS, seed: int = SEED) -> list[Trial]:
    """Trials for every k that leaves MIN_LEFT models to predict: the suggested picks, and `draws` random sets."""
    points = points.reset_index(drop=True)
    names = points["harness_model"].tolist()
    usable = [k for k in k_values if k + MIN_LEFT <= len(points)]
    if not usable:
        return []
    picks = [pick.model for pick in suggest_first(points_design(points), names, FIRST_PICKS_FIT, max(usable))]
    rng = np.random.default_rng(seed)
    trials = []
    for k in usable:
        trials.append(trial(points, picks[:k], "suggest", candidates))
        trials += [trial(points, list(rng.choice(names, k, replace=False)), "random", candidates)
                   for _ in range(draws)]
    return [t for t in trials if t is not None]


def curve_table(trials: list[Trial]) -> pd.DataFrame:
    """Per k and way of picking: the mean share within ±10% and coverage, and the random draws' 10th and 90th
    percentiles of the share."""
    frame = pd.DataFrame([vars(t) for t in trials])
    if frame.empty:
        return frame
    grouped = frame.groupby(["k", "how"])
    table = grouped.agg(left=("left", "first"), within_10pct=("within_10pct", "mean"), coverage=("coverage", "mean"),
                        draws=("within_10pct", "size"),
                        within_10pct_p10=("within_10pct", lambda s: s.quantile(0.1)),
                        within_10pct_p90=("within_10pct", lambda s: s.quantile(0.9)))
    return table.reset_index()
