"""harness.regress: a session's runs calibrated against a device's measurements, per metric and group, with every
candidate fit's held-out figures and the one chosen; what `harness regress` prints."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.analysis.run_values import select_runs
from harness.calibration.calibrate import CalibrationSet, calibrate_runs
from harness.calibration.transfer import device_library
from harness.core.config import resolve_results_dir
from harness.device.data import load_device

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class Regression:
    """One device's calibrations: `calibrations.calibrations` a Calibration per metric and group (`.model` the fit
    chosen, `.comparison` every candidate held out), `harness` each model's harness values per metric, and `notes`
    what the device library could not be learned from."""

    device: str
    session: str
    calibrations: CalibrationSet
    harness: dict[str, pd.DataFrame]
    notes: tuple[str, ...] = ()


def regress(device: str, *, session: str | None = None, metric: str | None = None, group_by: str = "cpus",
            fit: str = "auto", across_repeats: str | None = None, library: bool = True, runtime: str | None = None,
            results_dir: str | Path | None = None) -> Regression:
    """Calibrate `device` (imported, or a library table: `harness devices`) against a session's runs (default: the
    newest; "all" pools them): each metric the device has (or `metric`), per CPUS value and `group_by` tag, the fit
    `fit` or the best held out (auto); `library=False` learns nothing from the other devices' tables."""
    directory = resolve_results_dir(None if results_dir is None else str(results_dir))
    data = load_device(directory, device)
    runs, name = select_runs(directory, session, runtime, data)
    learned = device_library(directory, data.name) if library else None
    cset, values = calibrate_runs(data, runs, metric, group_by, fit, across_repeats, learned)
    notes = (learned.refused_note(data.name),) if learned is not None and learned.refused else ()
    return Regression(data.name, name, cset, values, notes)
