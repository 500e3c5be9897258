"""How report tables read: 3 significant digits, units in the column names (ms, s, MiB), never bytes.

Only what people read is rounded; CSV and JSON keep full precision. Units come from the field-name suffixes
the whole harness uses (`_ms`, `_s`, `_mib`), so a column label says its unit once and cells stay bare.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import pandas as pd

DIGITS = 3
UNIT_LABELS = {"ms": "ms", "s": "s", "mib": "MiB"}
MISSING = "—"


def sig(value: Any, digits: int = DIGITS) -> str:
    """A number to `digits` significant figures without exponent clutter: 0.000123, 0.57, 56.3, 1,230."""
    if value is None or (isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isnan(value)):
        return MISSING
    if isinstance(value, (bool, str)) or not isinstance(value, numbers.Real):
        return str(value)
    if isinstance(value, numbers.Integral):
        return f"{int(value):,}"
    value = float(value)
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    magnitude = math.floor(math.log10(abs(value)))
    if magnitude < -4:
        return f"{value:.{digits - 1}e}"
    decimals = max(digits - 1 - magnitude, 0)
    return f"{round(value, digits - 1 - magnitude):,.{decimals}f}"


def column_label(name: str) -> str:
    """`latency_p50_ms_median` -> `latency p50 median (ms)`; names without a unit lose only their underscores."""
    tokens = str(name).split("_")
    units = [t for t in tokens if t in UNIT_LABELS]
    words = " ".join(t for t in tokens if t not in UNIT_LABELS)
    return f"{words} ({UNIT_LABELS[units[-1]]})" if units else words


def mib(size_bytes: int | float) -> str:
    """A byte count as people read memory limits: MiB, or GiB from 1 GiB up."""
    value = size_bytes / 1024**2
    value, unit = (value / 1024, "GiB") if value >= 1024 else (value, "MiB")
    return f"{value:g} {unit}" if float(value).is_integer() else f"{sig(value)} {unit}"


def with_interval(value: Any, low: Any, high: Any) -> str:
    """`0.570 [0.520, 0.610]`, or the bare value when the interval is unknown."""
    if low is None or high is None or any(isinstance(v, float) and math.isnan(v) for v in (low, high)):
        return sig(value)
    return f"{sig(value)} [{sig(low)}, {sig(high)}]"


def display_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Cells rounded for reading, columns labelled with their units."""
    shown = frame.map(sig)
    shown.columns = [column_label(c) for c in frame.columns]
    return shown
