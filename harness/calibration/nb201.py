"""NAS-Bench-201 device latencies and HELP's few-shot protocol: which architectures calibrate, which are scored, and
how a predictor is scored on them.

Protocol (Lee et al., "HELP: Hardware-Adaptive Efficient Latency Prediction for NAS via Meta-Learning", NeurIPS
2021, and its code): calibration samples are drawn from architectures 0-899 and the test architectures are 900-1899;
in both pools the fastest 10% and the slowest 10% on the target device are dropped. The published score is
Spearman's rank correlation between predicted and measured latency on the test architectures.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from harness.calibration.choice import error_stats
from harness.device.nb201_table import read_devices as read_devices  # what benchmarks and tests read
from harness.zoo.nb201_cells import OPS, parse_cell

CALIBRATION_POOL = range(0, 900)
TEST_POOL = range(900, 1900)
TRIM = 0.10
"""The share of each pool dropped at either end, by the target device's latency."""


@dataclass(frozen=True)
class Split:
    """One device's protocol: the architectures calibration samples are drawn from, and those scored."""

    pool: np.ndarray
    test: np.ndarray


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
