"""NAS-Bench-201 cells predicted for a device from static facts and the device library, fast enough for a search loop.

A search loop asks for thousands of cells a second and runs none of them. Every cell's latency on the library's
NAS-Bench-201 devices is a table lookup, and its MACs a closed form of its edges, so a calibration on a few measured
cells, with the MACs standing where a profile's harness value stands, predicts any cell from arrays:

    predictor = CellPredictor.fit({"|nor_conv_3x3~0|+|...": 8.0, 431: 11.0, ...}, device="my-phone")
    found = predictor.intervals(cells)   # found.predicted, found.low, found.high: arrays
    predictor.predict(cells)             # a Prediction per cell

It is the calibration `harness predict` makes (calibrate_device, then CalibrationSet.predict), on the same inputs:
`predict` gives the same numbers, one model at a time (tests/test_library.py checks it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache

import numpy as np
import pandas as pd

from harness.calibration.calibrate import Calibration, CalibrationSet, Intervals, calibrate_device
from harness.calibration.choice import AUTO
from harness.calibration.fits import Design
from harness.calibration.prediction import Prediction
from harness.calibration.transfer import Library
from harness.core.errors import ConfigError
from harness.device.data import DeviceData
from harness.device.library import METRIC, NB201_PREFIX, LibraryTable, shipped_tables
from harness.zoo.nb201_cells import ARCHITECTURES, OPS, cell_ops, index_of, parse_cell

STAGES = ((32, 16), (16, 32), (8, 64))
"""NAS-Bench-201's CIFAR-10 network: (feature map side, channels) of its three stages, five cells each."""
CELLS_PER_STAGE = 5
BASE_MACS = 7_783_040
"""MACs outside the cells' convolutions: the stem, the two reduction blocks and the classifier (every edge `none`:
the published 7.78 M)."""
EDGE_MACS = {"nor_conv_1x1": CELLS_PER_STAGE * sum(side * side * channels * channels for side, channels in STAGES),
             "nor_conv_3x3": 9 * CELLS_PER_STAGE * sum(side * side * channels * channels for side, channels in STAGES)}
"""One edge's convolution over the fifteen cells; `none`, `skip_connect` and `avg_pool_3x3` multiply nothing."""
FAMILY = "nb201"
STATIC_MACS = "static MACs"
"""What a cell's harness value is: it is never run."""


def cell_macs(ops: Sequence[str]) -> int:
    """A cell's network's multiply-accumulates, from its six edges (what harness.models.facts counts on its graph)."""
    return BASE_MACS + sum(EDGE_MACS.get(op, 0) for op in ops)


@cache
def _all_macs() -> np.ndarray:
    counts = np.array([[cell_ops(i).count(op) for op in OPS] for i in range(ARCHITECTURES)])
    return BASE_MACS + counts @ np.array([EDGE_MACS.get(op, 0) for op in OPS], dtype=float)


def cell_index(cell: int | str) -> int:
    """An architecture index, `nb201_<index>` or a cell string → its index; one line for anything else."""
    if isinstance(cell, (int, np.integer)) and 0 <= int(cell) < ARCHITECTURES:
        return int(cell)
    text = str(cell).removeprefix(NB201_PREFIX)
    if text.isdigit() and int(text) < ARCHITECTURES:
        return int(text)
    ops = parse_cell(text)
    if ops is None:
        raise ConfigError(f"cell {cell!r}: not a NAS-Bench-201 index (0..{ARCHITECTURES - 1}) nor a cell string "
                          "such as |nor_conv_3x3~0|+|none~0|skip_connect~1|+|...|")
    return index_of(ops)


def indices(cells: Iterable[int | str]) -> np.ndarray:
    return np.fromiter((cell_index(cell) for cell in cells), dtype=int)


def static_values() -> pd.DataFrame:
    """The `harness values` of every cell as `regress` reads them, with the MACs in the place of a profile's value."""
    names = [f"{NB201_PREFIX}{i}" for i in range(ARCHITECTURES)]
    return pd.DataFrame({"model_name": names, "cpus": 1.0, "value": _all_macs(), "n": 1, "over": np.nan,
                         "across": STATIC_MACS})


@dataclass(frozen=True)
class CellPredictor:
    """A device's calibration on a few measured cells, with every cell's design as arrays."""

    calibration: Calibration
    cset: CalibrationSet
    values: pd.DataFrame
    library: np.ndarray
    """(cells, library devices the fit reads): their latency of every cell."""

    @classmethod
    def fit(cls, measured: Mapping[int | str, float], device: str = "nas-target", fit: str = AUTO,
            library: bool = True, tables: Sequence[LibraryTable] | None = None) -> CellPredictor:
        """Calibrate `device` on its measured cells (ms) with `fit`, learning (unless `library` is False) from every
        NAS-Bench-201 table of the library (`tables`, default the shipped ones) but its own device's (`device` named
        like a table, e.g. nb201-raspi4, leaves that device out)."""
        index = [cell_index(cell) for cell in measured]
        table = pd.DataFrame({"model": [f"{NB201_PREFIX}{i}" for i in index],
                              METRIC: [float(v) for v in measured.values()], "n": 1, "family": FAMILY})
        data = DeviceData(device, table, {"metrics": [METRIC], "tags": []})
        learned = Library.for_target([t for t in (shipped_tables() if tables is None else tables) if t.column], device)
        values = static_values()
        # Calibrated on the measured cells' values alone (pairing 15,625 rows would take seconds); every cell's
        # evidence is each table's own latency of it, so the calibration points' evidence is the same either way.
        cset = calibrate_device(data, {METRIC: values.iloc[index]}, fit=fit, library=learned if library else None)
        (calibration,) = cset.calibrations
        calibration.harness_value = STATIC_MACS
        if calibration.evidence is not None:
            calibration.evidence = learned.evidence(values.set_index("model_name")["value"])
        evidence = calibration.facts_for(pd.DataFrame(index=pd.Index(values["model_name"], name="harness_model")))
        library_values = evidence.reindex(values["model_name"])[list(calibration.model.fact_names)].to_numpy(float)
        return cls(calibration, cset, values, library_values)

    def design(self, cells: Iterable[int | str]) -> Design:
        at = indices(cells)
        names = self.calibration.model.fact_names
        return Design(self.values["value"].to_numpy(float)[at], self.library[at], names, (FAMILY,) * len(at))

    def intervals(self, cells: Iterable[int | str]) -> Intervals:
        """Per cell, as arrays (a search loop's path): the prediction in ms and its 95% prediction interval, widened
        beyond the calibration cells' reach, exactly as `predict` gives them."""
        return self.calibration.intervals(self.design(cells))

    def predict(self, cells: Iterable[int | str]) -> list[Prediction]:
        """One Prediction per cell, named `nb201_<index>`, its harness value the cell's MACs."""
        at = indices(cells)
        predictions = self.calibration.predict(self.design(at), [f"{NB201_PREFIX}{i}" for i in at])
        return [replace(p, device=self.cset.device) for p in predictions]
