"""A device's calibration as JSON: what `harness regress --json` prints (the calibration itself returns data:
harness.calibration.calibrate.CalibrationSet)."""

from __future__ import annotations

from typing import Any

from harness.calibration.calibrate import Calibration, CalibrationSet
from harness.calibration.prediction import json_safe


def calibration_json(calibration: Calibration) -> dict[str, Any]:
    """One metric × group: the chosen fit, why, every candidate's held-out figures, the OLS reference line, the
    points."""
    return json_safe({
        "metric": calibration.metric,
        "group": calibration.group,
        "library_devices": calibration.library_devices(),
        "families": calibration.by_family(),
        "threads": calibration.threads,
        "harness_value": calibration.harness_value,
        "chosen_fit": calibration.model.name,
        "equation": calibration.model.equation,
        "choice": calibration.choice,
        "fits": calibration.comparison,
        "ols": vars(calibration.reference_line),
        "stats": calibration.stats,
        "flipped_pairs": calibration.flipped_pairs,
        "points": calibration.points.to_dict(orient="records"),
    })


def calibration_set_json(cset: CalibrationSet) -> dict[str, Any]:
    """Every fitted group of one device, what could not be fitted and why, the unmatched models, the notes."""
    return json_safe({
        "device": cset.device,
        "group_by": cset.group_by,
        "calibrations": [calibration_json(c) for c in cset.calibrations],
        "skipped": cset.skipped,
        "unmatched_device_models": cset.unmatched_device_models,
        "notes": cset.notes,
    })
