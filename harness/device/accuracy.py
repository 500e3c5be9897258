"""Each model's accuracy, for the answer's "which should I pick": the harness measures speed and memory, never
accuracy, so it is read from what the user and the shipped tables say.

Three sources, first one wins per model:
- the user's file (`harness report --accuracy FILE`, make: ACCURACY=FILE): a CSV of `model` and `accuracy` (or
  `top1`), the model named as `harness rank` lists it, in percent;
- an imported device's CSV with an `accuracy` or `top1` column (kept as a tag at import);
- the published top-1 figures of the shipped library tables (TensorFlow Lite's hosted-model pages: ImageNet top-1
  of the published weights, so of a zoo model only as its name says; the zoo's own exports carry random weights).

Each value keeps its source, shown beside it. Device model names match harness models as calibration matches them
(harness.device.data.match_models).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

from harness.core.errors import DataError
from harness.device.data import list_devices, load_device, match_models
from harness.device.library import shipped_tables

COLUMNS = ("accuracy", "top1")
"""The column names an accuracy is read from, in this order."""


@dataclass(frozen=True)
class Accuracy:
    value: float  # percent
    source: str


def _rows(path: Path) -> list[dict[str, str]]:
    try:
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line and not line.startswith("#")]
    except OSError as err:
        raise DataError(f"accuracy file {path}: cannot be read ({err.strerror})") from err
    return list(csv.DictReader(lines))


def _number(text: str | None) -> float | None:
    try:
        value = float(text) if text not in (None, "") else math.nan
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _matched(rows: list[dict[str, str]], column: str, source: str, models: list[str]) -> dict[str, Accuracy]:
    """Harness model → its accuracy from `rows` (model, optional harness_model, `column`)."""
    values = {row["model"]: value for row in rows if (value := _number(row.get(column))) is not None}
    explicit = {row["model"]: row["harness_model"] for row in rows if row.get("harness_model")}
    mapping = match_models(sorted(values), explicit, models)
    return {harness: Accuracy(values[device], source) for device, harness in mapping.items() if harness in models}


def from_file(path: Path, models: list[str]) -> dict[str, Accuracy]:
    rows = _rows(path)
    header = list(rows[0]) if rows else []
    column = next((c for c in COLUMNS if c in header), None)
    if "model" not in header or column is None:
        raise DataError(f"accuracy file {path}: needs a `model` column and an `accuracy` (or `top1`) column, in "
                        f"percent; it has {', '.join(header) or 'none'}")
    return _matched(rows, column, path.name, models)


def from_devices(results_dir: Path, models: list[str]) -> dict[str, Accuracy]:
    found: dict[str, Accuracy] = {}
    for name in list_devices(results_dir):
        device = load_device(results_dir, name)
        column = next((c for c in COLUMNS if c in device.tags), None)
        if column is None:
            continue
        rows = [{str(key): "" if value is None else str(value) for key, value in row.items()}
                for row in device.table.to_dict("records")]
        found = _matched(rows, column, f"device {name}'s CSV ({column})", models) | found
    return found


def published(models: list[str]) -> dict[str, Accuracy]:
    found: dict[str, Accuracy] = {}
    for table in sorted(shipped_tables(), key=lambda t: t.precision != "fp32"):  # a float figure first, where both
        if table.column or table.path.suffix != ".csv":
            continue
        rows = _rows(table.path)
        if rows and "top1" in rows[0]:
            found = _matched(rows, "top1", f"published top-1: {table.source}", models) | found
    return found


def accuracies(models: list[str], results_dir: Path, accuracy_file: Path | None = None) -> dict[str, Accuracy]:
    """Each model's accuracy that any source gives: the user's file, else an imported device's CSV, else the
    published figures."""
    found = published(models) | from_devices(results_dir, models)
    return found | (from_file(accuracy_file, models) if accuracy_file else {})
