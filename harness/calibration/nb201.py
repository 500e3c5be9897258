"""NAS-Bench-201 device latencies and HELP's few-shot protocol: which architectures calibrate, which are scored, and
how a predictor is scored on them.

Protocol (Lee et al., "HELP: Hardware-Adaptive Efficient Latency Prediction for NAS via Meta-Learning", NeurIPS
2021, and its code): calibration samples are drawn from architectures 0-899 and the test architectures are 900-1899;
in both pools the fastest 10% and the slowest 10% on the target device are dropped. The published score is
Spearman's rank correlation between predicted and measured latency on the test architectures.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from harness.calibration.choice import error_stats
from harness.core.errors import DataError, ModelError
from harness.zoo.nb201_cells import OPS, parse_cell

CALIBRATION_POOL = range(0, 900)
TEST_POOL = range(900, 1900)
TRIM = 0.10
"""The share of each pool dropped at either end, by the target device's latency."""
KEY_COLUMNS = ("arch_idx", "arch_str")


@dataclass(frozen=True)
class Split:
    """One device's protocol: the architectures calibration samples are drawn from, and those scored."""

    pool: np.ndarray
    test: np.ndarray


def read_devices(path: Path) -> pd.DataFrame:
    """A latency table shaped like NAS-Bench-201's (`#` comment lines, `arch_idx`, `arch_str`, one column of
    milliseconds per device), indexed by arch_idx. Every problem is one line naming the file, and the line."""
    try:
        lines = [(number, line) for number, line in enumerate(path.read_text().splitlines(), 1)
                 if line.strip() and not line.lstrip().startswith("#")]
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(f"{path}: cannot be read ({err}); give a CSV of NAS-Bench-201 latencies") from err
    if not lines:
        raise DataError(f"{path}: no header; the first line must be arch_idx,arch_str,<device>,...")
    header_number, header = lines[0]
    columns = next(csv.reader([header]))
    if tuple(columns[:2]) != KEY_COLUMNS or len(columns) < 3:
        raise DataError(f"{path}:{header_number}: the header must be arch_idx,arch_str and one column per device "
                        f"(got {','.join(columns)})")
    rows = {}
    for number, line in lines[1:]:
        cells = next(csv.reader([line]))
        if len(cells) != len(columns):
            raise DataError(f"{path}:{number}: {len(cells)} cells where the header has {len(columns)}")
        rows[_index(path, number, cells[0])] = [_cell_string(path, number, cells[1])] + [
            _latency(path, number, device, value) for device, value in zip(columns[2:], cells[2:], strict=True)]
    return pd.DataFrame.from_dict(rows, orient="index", columns=columns[1:]).rename_axis("arch_idx").sort_index()


def _index(path: Path, number: int, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise DataError(f"{path}:{number}: arch_idx {text!r} is not a whole number") from None


def _cell_string(path: Path, number: int, text: str) -> str:
    try:
        ops = parse_cell(text)
    except ModelError as err:
        raise DataError(f"{path}:{number}: {err}") from None
    if ops is None:
        raise DataError(f"{path}:{number}: arch_str {text!r} is not a cell string such as "
                        "|nor_conv_3x3~0|+|none~0|skip_connect~1|+|...|")
    return text


def _latency(path: Path, number: int, device: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise DataError(f"{path}:{number}: {device} latency {text!r} is not a positive number of milliseconds")
    return value


def split(latency: pd.Series) -> Split:
    """The device's calibration pool and test architectures, each without the latencies below its TRIM quantile or
    above its 1 - TRIM quantile. A latency equal to a quantile stays: on a device of whole milliseconds many tie
    there, and keeping them is what reproduces the published FLOPs row (within 0.02 on every device; dropping ties
    or trimming by count is 0.05 off on Eyeriss)."""
    return Split(_trimmed(latency, CALIBRATION_POOL), _trimmed(latency, TEST_POOL))


def _trimmed(latency: pd.Series, pool: range) -> np.ndarray:
    values = latency[latency.index.isin(pool)].sort_index()
    low, high = values.quantile([TRIM, 1 - TRIM])
    return values.index[(values >= low) & (values <= high)].to_numpy()


def op_counts(arch_strs: pd.Series) -> pd.DataFrame:
    """How many of a cell's six edges are each op, per architecture: the op-count baseline's features."""
    cells = [parse_cell(text) or () for text in arch_strs]
    return pd.DataFrame([[cell.count(op) for op in OPS] for cell in cells], index=arch_strs.index, columns=list(OPS))


def score(actual: np.ndarray, predicted: np.ndarray, low: np.ndarray | None = None,
          high: np.ndarray | None = None) -> dict[str, float | None]:
    """Spearman's ρ and Kendall's τ between prediction and device, the share within ±10%, and the share inside the
    95% interval (None without intervals)."""
    actual, predicted = np.asarray(actual, float), np.asarray(predicted, float)
    coverage = None if low is None or high is None else float(np.mean((low <= actual) & (actual <= high)))
    return {"spearman": float(stats.spearmanr(predicted, actual).statistic),
            "kendall": float(stats.kendalltau(predicted, actual).statistic),
            "within_10pct": error_stats(actual, predicted)["within_10pct"], "coverage": coverage}
