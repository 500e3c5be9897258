"""Device predictions with 95% prediction intervals for models the device never ran, from a calibrated device's
chosen fits (harness.calibration.calibrate): what `harness predict` and the report give."""

from __future__ import annotations

import math

import pandas as pd

from harness.calibration.calibrate import BEYOND_REACH, CalibrationSet, json_safe
from harness.calibration.choice import CONFIDENCE
from harness.calibration.fits import OP_SPLIT, FittedModel
from harness.calibration.points import counts_note


def predict_models(cset: CalibrationSet, values_by_metric: dict[str, pd.DataFrame], models: list[str]) -> list[dict]:
    """Device predictions with 95% prediction intervals for `models`, from every fitted cpus group's chosen fit.

    `out_of_range` marks a harness value outside the calibrated range: the fit is extrapolated there. `outside`
    says why a model lies outside the calibration models' reach (harness value, op mix, family; empty inside it),
    and its interval is widened for it (harness.calibration.reach). A model without a fact the group's chosen fit
    reads (static facts, the per-op split) gets no prediction, and a `note` saying so.
    """
    out = []
    for calibration in cset.calibrations:
        measured = values_by_metric[calibration.metric]
        at_cpus = measured[(measured["cpus"] == calibration.group["cpus"]) & measured["model_name"].isin(models)]
        on_device = dict(zip(calibration.points["harness_model"], calibration.points["device"], strict=True))
        used = list(calibration.model.fact_names)
        facts = calibration.facts_for(cset.facts)
        known = at_cpus["model_name"].isin(facts.dropna(subset=used).index) | (not used)
        x_min, x_max = calibration.fit.x_min, calibration.fit.x_max
        base = [{"model": name, "metric": calibration.metric, "group": calibration.group, "fit": calibration.model.name,
                 "harness": value, "confidence": CONFIDENCE, "out_of_range": not x_min <= value <= x_max,
                 "calibrated_range": [x_min, x_max], "measured_on_device": on_device.get(name),
                 "counts_note": counts_note(over, calibration.points["harness_over"], across)}
                for name, value, over, across in zip(at_cpus["model_name"], at_cpus["value"], at_cpus["over"],
                                                     at_cpus["across"], strict=True)]
        ready = at_cpus[known.to_numpy()]
        design = calibration.design(ready["value"], facts.reindex(ready["model_name"]), ready["model_name"])
        predicted = dict(zip(ready["model_name"], calibration.predictions(design), strict=True))
        unpredicted: tuple[str, float, float, float, list[str]] = (calibration.model.name, math.nan, 0.0, 0.0, [])
        for row in base:
            fit, yhat, low, high, outside = predicted.get(row["model"], unpredicted)
            if math.isfinite(yhat):
                row.update(predicted=yhat, pi_low=low, pi_high=high, fit=fit, outside=outside)
                if fit == "library":
                    row["library_devices"] = [d["device"] for d in calibration.library_devices()]
                if fit != calibration.model.name:
                    row["note"] = (f"{BEYOND_REACH}: predicted by {fit}, not by {calibration.model.name}, which was "
                                   "tuned among them")
            else:
                row.update(predicted=None, pi_low=None, pi_high=None, fit=fit,
                           note=missing_facts_note(calibration.beyond if fit != calibration.model.name
                                                   and calibration.beyond is not None else calibration.model))
            out.append(json_safe(row))
    return out


def missing_facts_note(model: FittedModel) -> str:
    """Why a model gets no prediction from `model`: it lacks a fact the fit reads, and how to get it."""
    if OP_SPLIT in model.fact_names:
        return f"no per-op profile for the {model.name} fit: profile it with PER_OP=1 (--per-op)"
    return f"no static facts ({', '.join(model.fact_names)}) for the {model.name} fit"
