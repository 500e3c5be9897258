"""harness.predict: a device's values for models, with 95% prediction intervals, from what calibrates them.

Three sources, picked by what is asked:
- NAS-Bench-201 cells (indices, `nb201_<i>` or cell strings) with a device's measured cells, or a library
  NAS-Bench-201 table: predicted from static facts and the library, none of them run (harness.calibration.nas);
- a shipped library table with no data of the user's (zero-shot): its zoo models and the user's profiled on this host
  once, under RESULTS_DIR/zero-shot;
- an imported device: the session's runs calibrated against its data, as `harness predict` does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path

import pandas as pd

from harness.analysis.run_values import select_runs
from harness.api.preparing import prepare
from harness.api.results import Predictions
from harness.calibration.calibrate import CalibrationSet, calibrate_runs, group_label
from harness.calibration.nas import CellPredictor, cell_index
from harness.calibration.predictions import predict_models
from harness.calibration.transfer import Library, device_library
from harness.core.config import resolve_results_dir
from harness.core.errors import ConfigError, DataError
from harness.device.data import list_devices, load_device
from harness.device.library import (
    METRIC,
    NB201_PREFIX,
    LibraryTable,
    all_tables,
    catalog_path,
    find_table,
    shipped_tables,
)
from harness.run.zero_shot import device_data
from harness.zoo.registry import NB201_REFERENCE

Cell = int | str


def is_cell(model: object) -> bool:
    """A NAS-Bench-201 architecture: an index, `nb201_<i>` or a cell string (|op~0|+|...|)."""
    text = str(model)
    return isinstance(model, int) or text.startswith("|") or (text.startswith(NB201_PREFIX) and
                                                                text.removeprefix(NB201_PREFIX).isdigit())


@lru_cache(maxsize=32)
def _cell_predictor(device: str, measured: tuple[tuple[int, float], ...]) -> CellPredictor:
    """Fitted once per device and measured cells: a search loop asks again and again."""
    return CellPredictor.fit(dict(measured), device=device)


@lru_cache(maxsize=32)
def reference_cells(device: str, catalog: Path) -> tuple[tuple[int, float], ...] | None:
    """HELP's budget on a shipped NAS-Bench-201 table named `device`: its latency of the ten reference
    architectures, as a user would measure them on the device; None when `device` names no such table. Read once
    per catalog: a search loop asks for every batch."""
    table = find_table(device, shipped_tables(catalog))
    if table is None or not table.column:
        return None
    values = table.values
    return tuple((index, float(values[f"{NB201_PREFIX}{index}"])) for index in NB201_REFERENCE)


def predict_cells(cells: Iterable[Cell], device: str, measured: Mapping[Cell, float] | None = None) -> Predictions:
    """Cells predicted from their closed-form MACs and the library's NAS-Bench-201 tables: `measured` (ms per
    cell) calibrates `device`; without it, `device` must be a library NAS-Bench-201 table, whose ten reference
    cells stand for the measurements (the table's own device is never learned from)."""
    pairs = reference_cells(device, catalog_path()) if measured is None else \
        tuple((cell_index(c), float(v)) for c, v in measured.items())
    if pairs is None:
        raise ConfigError(f"device={device!r}: cells need measured={{cell: ms}} of a few cells on it, or a "
                          "NAS-Bench-201 library table (harness devices) as the device")
    predictor = _cell_predictor(device, pairs)
    return Predictions(device, predictor.predict(cells), [f"calibrated on {len(pairs)} measured cells"])


def calibration_notes(cset: CalibrationSet) -> list[str]:
    """The library devices that carried each calibration, and how alike they are."""
    return [f"{c.metric} {group_label(c.group)}: {note}" for c in cset.calibrations if (note := c.library_note())]


def predict_profiled(models: list[str], device: str, *, session: str | None = None, metric: str | None = None,
                     fit: str = "auto", across_repeats: str | None = None, library: bool = True,
                     runtime: str | None = None, results_dir: str | Path | None = None) -> Predictions:
    """Profiled models (names as `harness rank` lists them) predicted on an imported device; with a shipped library
    table as the device, zero-shot (profiled first where they are not yet)."""
    if not models:
        raise ConfigError("predict: name the models to predict (make predict MODEL=\"a.onnx b.onnx\" DEVICE=...)")
    directory = resolve_results_dir(None if results_dir is None else str(results_dir))
    if device not in list_devices(directory):
        table = find_table(device, all_tables(directory))  # not imported: a shipped table, or none
        if table is not None:
            return zero_shot(models, directory, table, fit=fit, across_repeats=across_repeats, library=library,
                             runtime=runtime)
    data = load_device(directory, device)
    runs, name = select_runs(directory, session, runtime, data)
    profiled = {run.get("model_name") for run in runs}
    missing = [model for model in models if model not in profiled]
    if missing:
        raise DataError(f"no runs of {', '.join(missing)} in session {name}; profile them first "
                        "(make profile MODEL=...) or pass --session all")
    learned = device_library(directory, data.name) if library else None
    cset, measured = calibrate_runs(data, runs, metric, fit=fit, across=across_repeats, library=learned)
    refused = [learned.refused_note(data.name)] if learned is not None and learned.refused else []
    return _predictions(cset, measured, models, data.name, name, refused + calibration_notes(cset))


def zero_shot(models: list[str], results_dir: Path, table: LibraryTable, *, fit: str, across_repeats: str | None,
              library: bool, runtime: str | None) -> Predictions:
    """A library table as the device: its zoo models and the user's profiled by prepare() (once per set of
    conditions; later calls reuse those sessions, pooled), the table calibrated as imported data, the other tables
    its library."""
    data = device_data(table)
    prepared = prepare(table, models, results_dir=results_dir, runtime=runtime)
    runs, session, names = prepared.runs, prepared.session, prepared.names
    learned = Library.for_target(all_tables(results_dir), table.name) if library else None
    cset, measured = calibrate_runs(data, runs, METRIC, fit=fit, across=across_repeats, library=learned)
    notes = [f"held out on {table.name} (each of its {len(c.points)} models predicted from the others, the fit "
             f"chosen again each time): {c.stats['loo_within_10pct']:.0%} within ±10%, "
             f"{c.stats['loo_within_20pct']:.0%} within ±20%, MAPE {c.stats['loo_mape_pct']:.1f}%"
             for c in cset.calibrations]
    return _predictions(cset, measured, [names[m] for m in models], table.name, session,
                        prepared.notes + notes + calibration_notes(cset))


def _predictions(cset: CalibrationSet, measured: dict[str, pd.DataFrame], models: list[str], device: str, session: str,
                 notes: list[str]) -> Predictions:
    rows = predict_models(cset, measured, models)
    if not any(p.predicted is not None for p in rows):
        why = "; ".join(dict.fromkeys(p.note for p in rows if p.note)) or \
            "none has ok runs at a calibrated CPU count; see `harness regress`"
        raise DataError(f"{', '.join(models)} not predicted: {why}")
    return Predictions(device, rows, notes, session)


def predict(models: Iterable[Cell] | Cell, device: str | Sequence[str], *,
            measured: Mapping[Cell, float] | None = None,
            session: str | None = None, metric: str | None = None, fit: str = "auto",
            across_repeats: str | None = None, library: bool = True, runtime: str | None = None,
            results_dir: str | Path | None = None) -> Predictions:
    """`device`'s values for `models`: NAS-Bench-201 cells from static facts (none run; `measured` or a library
    table calibrates them), else profiled models or model files (zero-shot on a library table). Several devices give
    one Predictions, each row naming its device; its `by_device` is the table of models by devices."""
    wanted = [models] if isinstance(models, (int, str)) else list(models)
    if not isinstance(device, str):
        return Predictions.several([predict(wanted, one, measured=measured, session=session, metric=metric, fit=fit,
                                            across_repeats=across_repeats, library=library, runtime=runtime,
                                            results_dir=results_dir) for one in dict.fromkeys(device)])
    if wanted and all(is_cell(m) for m in wanted) and (measured is not None or
                                                       reference_cells(device, catalog_path()) is not None):
        return predict_cells(wanted, device, measured)
    return predict_profiled([str(m) for m in wanted], device, session=session, metric=metric, fit=fit,
                            across_repeats=across_repeats, library=library, runtime=runtime, results_dir=results_dir)
