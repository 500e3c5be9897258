"""One prediction of one model's device value: the record every predictor returns and every caller reads by name (the
CLI's table and JSON, the report, the Python face, the few-shot curve, the NAS loop, the benchmarks)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from harness.calibration.choice import CONFIDENCE
from harness.calibration.fits import OP_SPLIT, FittedModel

INSIDE, OUTSIDE = "inside", "outside"
MAX_SPREAD = 100.0
"""The widest 95% interval a prediction is given with, as a factor either side of it. Beyond it the fit cannot bound
the model from the models it learned from (three models leave a two-coefficient fit one degree of freedom: t = 12.7),
and the prediction says so instead of printing a number."""


def float_or_none(value: Any) -> float | None:
    return None if value is None else float(value)


KERNEL_FIGURE = "device's kernel table's prediction from the graph, the model's family left out of the table"
"""What a prediction of the `kernels` fit gives as its `harness` value: the number that fit reads."""

@dataclass(frozen=True)
class Intervals:
    """Calibration.intervals: per model, the fit that predicts it, the prediction, its 95% interval and why the model
    lies outside the calibration models' reach (empty inside)."""

    fits: np.ndarray
    predicted: np.ndarray
    low: np.ndarray
    high: np.ndarray
    outside: list[list[str]]


@dataclass(frozen=True)
class Prediction:
    """A model's predicted device value, its 95% prediction interval, and what made it.

    `predicted`, `pi_low` and `pi_high` are None when the model got no prediction; `note` then says why."""

    model: str
    metric: str
    group: dict[str, Any]
    """The calibrated group the fit belongs to (`{"cpus": 1.0}`, with the device's --group-by column beside it)."""
    fit: str
    """The fit that made the prediction (harness.calibration.fits)."""
    harness: float
    """The value the fit reads for the model: its harness value, the model's repeats summarised as `harness_figure`
    says (for NAS-Bench-201 cells, never run, the cell's MACs)."""
    harness_figure: str
    """Which figure `harness` is: how the model's repeats became one value (e.g. the median of each run's fastest
    inference), or `static MACs`."""
    predicted: float | None
    pi_low: float | None
    pi_high: float | None
    measured_on_device: float | None = None
    """The device's own value of the model, when the device data holds it (it then is a calibration model)."""
    outside: tuple[str, ...] = ()
    """Why the model lies outside the calibration models' reach (harness value, op mix, family): its interval is
    widened for it (harness.calibration.reach). Empty inside."""
    out_of_range: bool = False
    """The harness value lies outside the calibration models' range: the fit is extrapolated there."""
    calibrated_range: tuple[float, float] = (math.nan, math.nan)
    library_devices: tuple[str, ...] = ()
    """The library devices whose latencies the `library` fit read for it (empty for every other fit)."""
    kernel_table: str = ""
    """The kernel table (harness probe) whose kernel regressors predicted it from its graph (empty for every other
    fit)."""
    note: str = ""
    counts_note: str = ""
    device: str = ""
    confidence: float = CONFIDENCE

    @property
    def reach(self) -> str:
        """`outside` when the model lies beyond the calibration models' reach, else `inside`."""
        return OUTSIDE if self.outside else INSIDE

    @property
    def carried_by(self) -> str:
        """What carried the prediction: the kernel table or the library devices the fit read, or the fit alone."""
        if self.kernel_table:
            return f"kernel table {self.kernel_table}"
        if self.library_devices:
            return f"the {self.fit} fit on library devices {', '.join(self.library_devices)}"
        return f"the {self.fit} fit"

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe (NaN and inf as None), keys as the fields."""
        return json_safe(asdict(self))


def json_safe(value: Any) -> Any:
    """JSON-safe: numpy scalars to Python, tuples to lists, NaN/inf to None (JSON has no NaN)."""
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    if isinstance(value, (np.floating, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value


def missing_facts_note(model: FittedModel) -> str:
    """Why a model gets no prediction from `model`: it lacks a fact the fit reads, and how to get it."""
    if OP_SPLIT in model.fact_names:
        return f"no per-op profile for the {model.name} fit: profile it with PER_OP=1 (--per-op)"
    return f"no static facts ({', '.join(model.fact_names)}) for the {model.name} fit"


def unbounded_note(fit: str, models: int, predicted: float, low: float, high: float) -> str:
    """Why the `fit` trained on `models` models cannot give this prediction (empty when it can): a value at or below
    zero, or an interval not finite or beyond MAX_SPREAD either side of it."""
    if not predicted > 0:
        return (f"the {fit} fit predicts a value at or below zero from these {models} models; measure more models "
                "on the device or choose another fit (--fit)")
    if not (math.isfinite(low) and math.isfinite(high) and low > 0 and high / predicted <= MAX_SPREAD
            and predicted / low <= MAX_SPREAD):
        return (f"the {fit} fit cannot bound it from these {models} models (its 95% interval reaches beyond "
                f"×{MAX_SPREAD:g} either side of the prediction); measure more models on the device or choose another "
                "fit (--fit)")
    return ""
