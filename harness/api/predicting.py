"""harness.predict: a device's values for models, with 95% prediction intervals: a short convenience over
harness.load_predictor (harness.api.predictors), which picks what calibrates them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.api.predictors import (
    PREDICTORS,
    Cell,
    CellsPredictor,
    Predictor,
    is_cell,
    load_predictor,
)
from harness.api.results import Predictions
from harness.api.session import Session
from harness.core.errors import ConfigError, DataError


def predict(models: Iterable[Cell] | Cell, device: str | Sequence[str], *,
            measured: Mapping[Cell, float] | None = None, session: Session | str | Path | None = None,
            metric: str | None = None, fit: str | None = None, across_repeats: str | None = None,
            library: bool | None = None, runtime: str | None = None,
            results_dir: str | Path | None = None) -> Predictions:
    """`device`'s values for `models` from load_predictor(device, ...), given only the keywords set here: NAS-Bench-201
    cells from static facts (none run), profiled models or model files. Several devices give one Predictions, each
    Prediction naming its device; its `by_device` is the table of models by devices."""
    wanted = [models] if isinstance(models, (int, str)) else list(models)
    every = {"measured": measured, "session": session, "metric": metric, "fit": fit, "across_repeats": across_repeats,
             "library": library, "runtime": runtime, "results_dir": results_dir}
    given: dict[str, Any] = {name: value for name, value in every.items() if value is not None}
    if not isinstance(device, str):
        return Predictions.several([predict(wanted, one, **given) for one in dict.fromkeys(device)])
    if not wanted:
        raise ConfigError("predict: name the models to predict (make predict MODEL=\"a.onnx b.onnx\" DEVICE=...)")
    if all(is_cell(model) for model in wanted) and (CellsPredictor.serves(device, given) or not any(
            kind.serves(device, given) for kind in PREDICTORS)):  # on an unknown device: what cells need
        predictor: Predictor = CellsPredictor.load(device, **given)
    else:
        predictor = load_predictor(device, **given)
    rows = predictor.predict(wanted)
    if not any(p.predicted is not None for p in rows):
        why = "; ".join(dict.fromkeys(p.note for p in rows if p.note)) or \
            "none has ok runs at a calibrated CPU count; see `harness regress`"
        raise DataError(f"{', '.join(map(str, wanted))} not predicted: {why}")
    return Predictions(predictor.device, rows, predictor.notes, predictor.session)
