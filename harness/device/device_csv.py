"""The device CSV: one row per model (or per model and repeat), read and validated into rows in harness units.

Columns: `model` (required); metric columns named with their unit (`latency_ms`, `runtime_s`, `peak_memory_mib`,
`energy_mj`, `avg_power_w`, ...; `_kb` is KiB as /proc and dumpsys mean it, `_mb`/`_gb` are decimal, all converted
to `_mib`; `_us` to `_ms`, `_mw` to `_w`, see harness.core.metric_registry for the metrics); `threads` or `cpus`
(optional); `repeat` (optional, one row per repeat); `harness_model` (optional, the harness model name a row stands
for); `runtime` (optional: the engine the device ran, onnxruntime, ncnn or litert, `tflite` read as litert, so that
`regress`, `predict` and `suggest` pair the rows with the harness runs of that engine); anything else is a free-form
tag such as `family`. Every bad cell is one error naming the file and line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from harness.core import metric_registry
from harness.core.conditions import RUNTIME_ENGINES
from harness.core.errors import DataError
from harness.device.readings import MIB_PER_GB, MIB_PER_KIB, MIB_PER_MB, MS_PER_US, csv_cells

METRIC_SUFFIXES = ("_ms", "_s", "_mib", "_w", "_mj")
"""A column whose name ends with a unit is a measurement and must hold numbers."""
UNIT_CONVERSIONS: dict[str, tuple[str, float, str]] = {
    "_kb": ("_mib", MIB_PER_KIB, "1 kB = 1 KiB = 2¹⁰ bytes, as /proc and dumpsys count"),
    "_mb": ("_mib", MIB_PER_MB, "1 MB = 10⁶ bytes"),
    "_gb": ("_mib", MIB_PER_GB, "1 GB = 10⁹ bytes"),
    "_us": ("_ms", MS_PER_US, "1 µs = 10⁻³ ms"),
    "_mw": ("_w", 1e-3, "1 mW = 10⁻³ W"),
}
"""Suffix → (harness suffix, factor, what the factor assumes). kB is binary: the tools that write `_kb` figures
(/proc's VmHWM "kB", Android dumpsys "KB") count KiB. MB/GB are decimal; name a column `_mib` if your tool
already reports binary mebibytes."""
THREAD_COLUMNS = ("threads", "cpus")
RESERVED = ("model", "harness_model", "repeat", *THREAD_COLUMNS)
RUNTIME_COLUMN = "runtime"
RUNTIME_ALIASES = {"tflite": "litert", "tensorflow lite": "litert", "ort": "onnxruntime"}
"""How published tables name the engines RUNTIME runs (the RUNTIME value itself is always accepted)."""
MAX_DEVICE_CSV_COLUMNS = 1000
"""The most columns a device CSV may have: a model, its tags and a few dozen metrics with their units are far fewer. A
tool that writes one column per sample (hundreds of thousands of them) is refused in one line once its header is
read: give one row per repeat (with a `repeat` column) instead."""
FILE, LINE = "_file", "_line"
"""Where each row came from, carried through the import for its error lines."""


@dataclass
class CsvRows:
    """A device CSV's rows (model, cpus, metrics in harness units, tags as text, FILE and LINE) and what was done."""

    frame: pd.DataFrame
    metrics: list[str]
    tags: list[str]
    conversions: list[dict[str, Any]]
    comments: list[str]


def _numbered_rows(text: str, name: str) -> tuple[tuple[int, list[str]], list[tuple[int, list[str]]], list[str]]:
    """(line number, cells) of the header and of each data row, and the leading `#` lines (the data's source)."""
    comments: list[str] = []
    numbered: list[tuple[int, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith("#"):
            if not numbered:
                comments.append(line.lstrip()[1:].strip())
        elif line.strip():
            numbered.append((number, line))
    if not numbered:
        raise DataError(f"{name}: no header line; the first non-comment line must name the columns (model, ...)")
    header_number, header_line = numbered[0]
    header = [cell.strip() for cell in csv_cells(header_line, f"{name}:{header_number}")]
    if len(header) > MAX_DEVICE_CSV_COLUMNS:
        raise DataError(f"{name}:{header_number}: {len(header)} columns, more than {MAX_DEVICE_CSV_COLUMNS}, the bound "
                        "on a device CSV's columns (MAX_DEVICE_CSV_COLUMNS); give one row per repeat with a `repeat` "
                        "column instead of one column per sample")
    rows = [(number, csv_cells(line, f"{name}:{number}")) for number, line in numbered[1:]]
    for number, cells in rows:
        if len(cells) != len(header):
            raise DataError(f"{name}:{number}: {len(cells)} cells but the header has {len(header)}; fix that line")
    return (header_number, header), rows, comments


def _canonical_columns(name: str, header_line: int, header: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    """Lower-cased column names with units converted to the harness's, and the conversions made."""
    names: dict[str, None] = {}  # an ordered set
    conversions = []
    for column in header:
        column_name = column.lower()
        for suffix, (target, factor, note) in UNIT_CONVERSIONS.items():
            if column_name.endswith(suffix):
                converted = column_name.removesuffix(suffix) + target
                conversions.append({"from": column_name, "to": converted, "factor": factor, "note": note})
                column_name = converted
        if column_name in THREAD_COLUMNS:
            if "cpus" in names:
                raise DataError(f"{name}:{header_line}: both `threads` and `cpus` columns; keep one")
            column_name = "cpus"
        if not column_name or column_name in names:
            raise DataError(f"{name}:{header_line}: column {column!r} is empty or repeats another; name each once")
        names[column_name] = None
    if "model" not in names:
        hint = "; the file seems to use ';' or tabs: save it with commas" if any(
            ";" in column or "\t" in column for column in header) else ""
        raise DataError(f"{name}:{header_line}: no `model` column; name the column of model names `model`{hint}")
    return list(names), conversions


def _to_number(name: str, frame: pd.DataFrame, column: str, positive: bool = False, factor: float = 1.0
               ) -> pd.Series:
    """Numbers of one column times `factor` (its unit's). An empty metric cell means "not measured"; an empty
    thread count is an error, as is anything else that is not a finite number (`nan`, `inf`, or a figure that
    overflows in harness units)."""
    text = frame[column].str.strip()
    values = pd.to_numeric(text.where(text != ""), errors="coerce") * factor
    bad = values.isna() & ((text != "") | positive)
    bad |= np.isinf(values) | (values <= 0 if positive else values < 0)
    if bad.any():
        first = bad.idxmax()
        kind = "positive finite number; fill that cell" if positive else (
            "non-negative finite number; fix that cell (leave it empty if not measured)")
        raise DataError(f"{name}:{frame[LINE][first]}: column {column} holds {frame[column][first]!r}, not a {kind}")
    return values


def _engines(name: str, frame: pd.DataFrame) -> pd.Series:
    """The `runtime` column as RUNTIME values (an alias such as `tflite` read as its engine, empty where unsaid)."""
    said = frame[RUNTIME_COLUMN].str.strip().str.lower()
    engines = said.map(lambda value: RUNTIME_ALIASES.get(value, value))
    bad = (engines != "") & ~engines.isin(list(RUNTIME_ENGINES))
    if bad.any():
        first = int(bad.to_numpy().argmax())
        line, value = frame[LINE].iloc[first], frame[RUNTIME_COLUMN].iloc[first]
        raise DataError(f"{name}:{line}: column runtime holds {value!r}, not an engine the harness runs; write one "
                        f"of {', '.join(RUNTIME_ENGINES)} (or tflite), or leave it empty")
    return engines


def read_device_csv(text: str, name: str) -> CsvRows:
    """Validated rows of a device CSV whose text is `text` (`name` labels its errors), units converted."""
    (header_line, header), rows, comments = _numbered_rows(text, name)
    names, conversions = _canonical_columns(name, header_line, header)
    if not rows:
        raise DataError(f"{name}: a header but no data rows; add one line per measured model")
    frame = pd.DataFrame([cells for _, cells in rows], columns=names, dtype=str)
    frame[FILE], frame[LINE] = name, [number for number, _ in rows]
    metrics = [column for column in names if column.endswith(METRIC_SUFFIXES) and column not in RESERVED]
    if not metrics:
        raise DataError(
            f"{name}: no metric column; name at least one with its unit, e.g. "
            + ", ".join(m.name for m in metric_registry.calibrated()[:3])
        )
    empty_model = frame["model"].str.strip() == ""
    if empty_model.any():
        raise DataError(f"{name}:{frame[LINE][empty_model.idxmax()]}: empty `model` cell; every row needs a model name")
    frame["model"] = frame["model"].str.strip()
    for column in metrics:
        factor = next((c["factor"] for c in conversions if c["to"] == column), 1.0)
        frame[column] = _to_number(name, frame, column, factor=factor)
    for column in ("cpus", "repeat"):
        if column in frame:
            frame[column] = _to_number(name, frame, column, positive=column == "cpus")
    if RUNTIME_COLUMN in frame:
        frame[RUNTIME_COLUMN] = _engines(name, frame)
    tags = [column for column in names if column not in RESERVED and column not in metrics]
    return CsvRows(frame, metrics, tags, conversions, comments)
