"""A NAS-Bench-201 latency table (devices/library/nb201_latency_ms.csv, or a user's of that shape): one column of
milliseconds per device. Read once per file version, whole and checked, for every one of its device columns: the
library's NAS-Bench-201 tables (harness.device.library) and HELP's protocol (harness.calibration.nb201) share it."""

from __future__ import annotations

import csv
import math
from functools import cache
from pathlib import Path

import pandas as pd

from harness.core.errors import DataError, ModelError
from harness.zoo.nb201_cells import parse_cell

KEY_COLUMNS = ("arch_idx", "arch_str")


def read_devices(path: Path) -> pd.DataFrame:
    """A latency table shaped like NAS-Bench-201's (`#` comment lines, `arch_idx`, `arch_str`, one column of
    milliseconds per device), indexed by arch_idx. Every problem is one line naming the file, and the line. Read once
    per file version (ten library tables are one file's columns); each caller gets its own copy."""
    try:
        stamp = path.stat().st_mtime_ns
    except OSError as err:
        raise DataError(f"{path}: cannot be read ({err}); give a CSV of NAS-Bench-201 latencies") from err
    return _read(path.resolve(), stamp).copy()


@cache
def _read(path: Path, stamp: int) -> pd.DataFrame:
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
