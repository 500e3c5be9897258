"""A device's kernel table as evidence for its model-level calibration: each model's latency as the table predicts it
from the model's graph, for the `kernels` fit (harness.calibration.fits) to weigh against the other fits by held-out
error.

A model whose family the table holds (a zoo model probed there) is predicted by the table fitted without that family:
the calibration scores the fit by leaving each model out, and a table that had learned the model's own kernels would
score itself on what it was trained on. The fits without a family are made once per table version
(harness.kernels.predictor.fitted_model).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from harness.core.errors import HarnessError
from harness.kernels.predictor import fitted_model
from harness.kernels.table import KernelTable, kernel_tables

PRECISION_SUFFIX = "-fp32"
"""What `harness probe` adds to a device's name: a board device is `<host>-<engine>-<threads>t`, its probe's table
`<host>-<engine>-<threads>t-fp32`."""


def device_kernel_table(device: str, results_dir: str | Path) -> KernelTable | None:
    """The kernel table of a device with model-level data: the one named `<device>-fp32` (what `harness probe` on the
    device's board names it), else the one named `device`."""
    tables = {table.name: table for table in kernel_tables(results_dir)}
    return tables.get(f"{device}{PRECISION_SUFFIX}") or tables.get(device)


def kernel_evidence(table: KernelTable, paths: Mapping[str, str | None], families: Mapping[str, str]) -> pd.Series:
    """Each model's predicted ms by `table`, by name, from its ONNX file in `paths` (NaN for a model without one, or
    one whose graph the table cannot split), its family (`families`) left out of the table's fit where the table holds
    it."""
    out = {}
    for name, path in paths.items():
        out[name] = math.nan
        if not path or Path(path).suffix != ".onnx" or not Path(path).is_file():
            continue
        try:
            out[name] = fitted_model(table, families.get(name, "")).predict(path)[0]
        except HarnessError:
            continue  # no rows left without the family, or a graph the kernel detection refuses
    return pd.Series(out, dtype=float)
