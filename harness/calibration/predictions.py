"""Device predictions with 95% prediction intervals for models the device never ran, from a calibrated device's
chosen fits (harness.calibration.calibrate): what `harness predict` and the report give."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from harness.calibration.calibrate import CalibrationSet
from harness.calibration.points import counts_note
from harness.calibration.prediction import Prediction


def predict_models(cset: CalibrationSet, values_by_metric: dict[str, pd.DataFrame],
                   models: list[str]) -> list[Prediction]:
    """Device predictions with 95% prediction intervals for `models`, from every fitted cpus group's chosen fit
    (Calibration.predict), each with a note where its harness value is a minimum over another count of values than
    the calibration models' (points.counts_note)."""
    out = []
    for calibration in cset.calibrations:
        measured = values_by_metric[calibration.metric]
        at_cpus = measured[(measured["cpus"] == calibration.group["cpus"]) & measured["model_name"].isin(models)]
        names = at_cpus["model_name"].tolist()
        design = calibration.design(at_cpus["value"], calibration.facts_for(cset.facts).reindex(names), names)
        for prediction, over, across in zip(calibration.predict(design, names), at_cpus["over"], at_cpus["across"],
                                            strict=True):
            note = counts_note(over, calibration.points["harness_over"], across) or ""
            out.append(replace(prediction, device=cset.device, counts_note=note))
    return out
