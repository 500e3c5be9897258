"""On-device measurements: import a user's CSV, validate it, store it beside the harness results.

Layout: RESULTS_DIR/devices/<device>/measurements.csv (canonical: converted units, duplicates averaged,
sorted) and import.json (what the import did). Writing happens only when the content changes, so
re-importing the same file is a no-op.

Columns: `model` (required); metric columns named with their unit (`latency_ms`, `runtime_s`,
`peak_memory_mib`, ...; `_kb` is KiB as /proc and dumpsys mean it, `_mb`/`_gb` are decimal, all converted to
`_mib`; `_us` to `_ms`, see harness.core.metric_registry for the metrics);
`threads` or `cpus` (optional); `repeat` (optional, one row per repeat); `harness_model` (optional,
the harness model name a row stands for); anything else is a free-form tag such as `family`.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from harness.core import metric_registry
from harness.core.errors import ConfigError, DataError, ModelError
from harness.store.results import SCHEMA_VERSION, atomic_write_text, check_schema
from harness.zoo import registry as zoo_registry

DEVICES_DIR = "devices"
MEASUREMENTS_FILE = "measurements.csv"
IMPORT_FILE = "import.json"
DEVICE_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")

METRIC_SUFFIXES = ("_ms", "_s", "_mib")
"""A column whose name ends with a unit is a measurement and must hold numbers."""
UNIT_CONVERSIONS: dict[str, tuple[str, float, str]] = {
    "_kb": ("_mib", 2**10 / 2**20, "1 kB = 1 KiB = 2¹⁰ bytes, as /proc and dumpsys count"),
    "_mb": ("_mib", 1e6 / 2**20, "1 MB = 10⁶ bytes"),
    "_gb": ("_mib", 1e9 / 2**20, "1 GB = 10⁹ bytes"),
    "_us": ("_ms", 1e-3, "1 µs = 10⁻³ ms"),
}
"""Suffix → (harness suffix, factor, what the factor assumes). kB is binary: the tools that write `_kb` figures
(/proc's VmHWM "kB", Android dumpsys "KB") count KiB. MB/GB are decimal; name a column `_mib` if your tool
already reports binary mebibytes."""
THREAD_COLUMNS = ("threads", "cpus")
RESERVED = ("model", "harness_model", "repeat", *THREAD_COLUMNS)

QUANT_SUFFIXES = ("_int8_static", "_quantized", "_quant", "_int8", "_uint8", "_qdq", "_int8_dynamic")
"""Precision suffixes marking a quantized model, in order of preference when several harness variants of one
model exist: static (full-integer) quantization first, as in TFLite's `_quant` models; dynamic last."""
FLOAT_SUFFIXES = ("_float32", "_float", "_fp32")
MODEL_EXTENSIONS = (".onnx", ".tflite", ".pt", ".pth")


def _canonical_token(token: str) -> str:
    """`0.50` and `0.5` name the same width multiplier."""
    if "." not in token:
        return token
    try:
        return repr(float(token))
    except ValueError:
        return token


def normalise_model_name(name: str) -> tuple[str, int | None]:
    """(base name, quantization rank or None for float) for matching: lower case, `-` as `_`, no file
    extension, numbers canonical, no precision suffix. `mobilenet_v1_0.50_128_quant` → (`mobilenet_v1_0.5_128`,
    rank of `_quant` in QUANT_SUFFIXES)."""
    base = name.strip().lower().replace("-", "_")
    for extension in MODEL_EXTENSIONS:
        base = base.removesuffix(extension)
    quant = None
    for rank, suffix in sorted(enumerate(QUANT_SUFFIXES), key=lambda item: -len(item[1])):
        if base.endswith(suffix):
            base, quant = base.removesuffix(suffix), rank
            break
    else:
        for suffix in FLOAT_SUFFIXES:
            base = base.removesuffix(suffix)
    return "_".join(_canonical_token(token) for token in base.split("_")), quant


def _with_input_size(harness_model: str, base: str) -> list[str]:
    """The normalised names a harness model answers to: its own `base` and, for a zoo model whose name leaves its
    square input size implicit (`inception_v3` takes 299 × 299), that name with the size, as published tables
    write it (`inception_v3_299_quant`)."""
    try:
        shape = zoo_registry.parse(harness_model).input_shape
    except ModelError:  # not a zoo name, or values the zoo does not build (a user's own file)
        return [base]
    if len(shape) == 4 and shape[2] == shape[3] and not base.endswith(f"_{shape[3]}"):
        return [base, f"{base}_{shape[3]}"]
    return [base]


def match_models(device_models: list[str], explicit: dict[str, str], harness_models: list[str]) -> dict[str, str]:
    """Device model → harness model: an explicit harness_model cell, else the same name, else the same
    normalised name (with a zoo model's input size, see _with_input_size) and kind of precision (the preferred
    quantization when there are several), else the same normalised name when exactly one harness model has it."""
    by_base: dict[str, list[tuple[int | None, str]]] = {}
    for name in harness_models:
        base, quant = normalise_model_name(name)
        for alias in _with_input_size(name, base):
            by_base.setdefault(alias, []).append((quant, name))
    mapping: dict[str, str] = {}
    for model in device_models:
        base, quant = normalise_model_name(model)
        candidates = by_base.get(base, [])
        same_kind = sorted((q, n) for q, n in candidates if (q is None) == (quant is None))
        if model in explicit:
            if explicit[model] in harness_models:
                mapping[model] = explicit[model]
        elif model in harness_models:
            mapping[model] = model
        elif same_kind and (len(same_kind) == 1 or same_kind[0][0] != same_kind[1][0]):
            mapping[model] = same_kind[0][1]
        elif len(candidates) == 1:
            mapping[model] = candidates[0][1]
    return mapping


@dataclass
class DeviceData:
    """One device's stored measurements: one row per (model, cpus), metrics averaged, `n` rows behind each."""

    name: str
    table: pd.DataFrame
    info: dict[str, Any]

    @property
    def metrics(self) -> list[str]:
        return list(self.info["metrics"])

    @property
    def tags(self) -> list[str]:
        return list(self.info["tags"])

    def match(self, harness_models: list[str]) -> dict[str, str]:
        explicit = {}
        if "harness_model" in self.table:
            explicit = {
                row.model: row.harness_model for row in self.table.itertuples() if isinstance(row.harness_model, str)
            }
        return match_models(sorted(set(self.table["model"])), explicit, harness_models)


@dataclass
class ImportResult:
    device: str
    path: Path
    status: str  # created | updated | unchanged
    rows: int
    models: int
    conversions: list[dict[str, Any]]
    duplicates: list[dict[str, Any]]
    unknown_models: list[str] = field(default_factory=list)


def check_device_name(name: str) -> str:
    if not DEVICE_NAME_PATTERN.match(name or ""):
        raise ConfigError(f"--device {name!r}: use letters, digits, '.', '_' or '-' (it names a directory)")
    return name


def _read_rows(path: Path) -> tuple[tuple[int, list[str]], list[tuple[int, list[str]]], list[str]]:
    """(line number, cells) of the header and of each data row, and the leading `#` lines (the data's source)."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError as err:
        raise DataError(f"device CSV {path} not found; check the path") from err
    except (UnicodeDecodeError, IsADirectoryError) as err:
        raise DataError(f"device CSV {path} is not a UTF-8 text file; export it as CSV") from err
    comments, numbered = [], []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith("#"):
            if not numbered:
                comments.append(line.lstrip()[1:].strip())
        elif line.strip():
            numbered.append((number, line))
    if not numbered:
        raise DataError(f"{path}: no header line; the first non-comment line must name the columns (model, ...)")
    parsed = [(number, next(csv.reader([line]))) for number, line in numbered]
    header = [cell.strip() for cell in parsed[0][1]]
    for number, cells in parsed[1:]:
        if len(cells) != len(header):
            raise DataError(f"{path}:{number}: {len(cells)} cells but the header has {len(header)}; fix that line")
    return (parsed[0][0], header), parsed[1:], comments


def _canonical_columns(path: Path, header_line: int, header: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    """Lower-cased column names with units converted to the harness's, and the conversions made."""
    names, conversions = [], []
    for column in header:
        name = column.lower()
        for suffix, (target, factor, note) in UNIT_CONVERSIONS.items():
            if name.endswith(suffix):
                converted = name.removesuffix(suffix) + target
                conversions.append({"from": name, "to": converted, "factor": factor, "note": note})
                name = converted
        if name in THREAD_COLUMNS:
            if "cpus" in names:
                raise DataError(f"{path}:{header_line}: both `threads` and `cpus` columns; keep one")
            name = "cpus"
        if not name or name in names:
            raise DataError(f"{path}:{header_line}: column {column!r} is empty or repeats another; name each once")
        names.append(name)
    if "model" not in names:
        hint = "; the file seems to use ';' or tabs: save it with commas" if any(
            ";" in column or "\t" in column for column in header) else ""
        raise DataError(f"{path}:{header_line}: no `model` column; name the column of model names `model`{hint}")
    return names, conversions


def _to_number(path: Path, frame: pd.DataFrame, column: str, lines: pd.Series, positive: bool = False) -> pd.Series:
    """Numbers of one column. An empty metric cell means "not measured"; an empty thread count is an error,
    as is anything else that is not a number."""
    text = frame[column].str.strip()
    values = pd.to_numeric(text.where(text != ""), errors="coerce")
    bad = values.isna() & ((text != "") | positive)
    bad |= values <= 0 if positive else values < 0
    if bad.any():
        first = bad.idxmax()
        kind = "positive number; fill that cell" if positive else (
            "non-negative number; fix that cell (leave it empty if not measured)")
        raise DataError(f"{path}:{lines[first]}: column {column} holds {frame[column][first]!r}, not a {kind}")
    return values


def parse_device_csv(path: Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Validated, canonical table (one row per model and cpus) plus what was done to get it."""
    (header_line, header), rows, comments = _read_rows(path)
    names, conversions = _canonical_columns(path, header_line, header)
    if not rows:
        raise DataError(f"{path}: a header but no data rows; add one line per measured model")
    frame = pd.DataFrame([cells for _, cells in rows], columns=names, dtype=str)
    lines = pd.Series([number for number, _ in rows])
    metrics = [name for name in names if name.endswith(METRIC_SUFFIXES) and name not in RESERVED]
    if not metrics:
        raise DataError(
            f"{path}: no metric column; name at least one with its unit, e.g. "
            + ", ".join(m.name for m in metric_registry.calibrated()[:3])
        )
    empty_model = frame["model"].str.strip() == ""
    if empty_model.any():
        raise DataError(f"{path}:{lines[empty_model.idxmax()]}: empty `model` cell; every row needs a model name")
    frame["model"] = frame["model"].str.strip()
    for column in metrics:
        factor = next((c["factor"] for c in conversions if c["to"] == column), 1.0)
        frame[column] = _to_number(path, frame, column, lines) * factor
    for column in ("cpus", "repeat"):
        if column in frame:
            frame[column] = _to_number(path, frame, column, lines, positive=column == "cpus")
    tags = [name for name in names if name not in RESERVED and name not in metrics]
    table, duplicates = _average_duplicates(path, frame, lines, metrics, tags)
    info = {"metrics": metrics, "tags": tags, "conversions": conversions, "duplicates": duplicates,
            "comments": comments}
    return table, info


def _average_duplicates(
    path: Path, frame: pd.DataFrame, lines: pd.Series, metrics: list[str], tags: list[str]
) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """Rows of the same model (and cpus) become their mean, `n` keeps how many; their tags must agree."""
    keys = ["model", "cpus"] if "cpus" in frame else ["model"]
    carried = tags + (["harness_model"] if "harness_model" in frame else [])
    frame = frame.assign(_line=lines)
    out, duplicates = [], []
    for key, group in frame.groupby(keys, sort=True, dropna=False):
        row = dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True))
        for column in carried:
            values = group[column].str.strip()
            distinct = values[values != ""].unique()
            if len(distinct) > 1:
                first, other = (group["_line"][values == value].iloc[0] for value in distinct[:2])
                raise DataError(
                    f"{path}:{other}: {column} {distinct[1]!r} contradicts {distinct[0]!r} on line {first} for the "
                    f"same model {row['model']}; make them agree"
                )
            row[column] = distinct[0] if len(distinct) else None
        for metric in metrics:
            row[metric] = group[metric].mean()
        row["n"] = len(group)
        if len(group) > 1:
            duplicates.append({**row, "lines": group["_line"].tolist()})
        out.append(row)
    columns = keys + [c for c in carried if c not in keys] + metrics + ["n"]
    return pd.DataFrame(out, columns=columns), [
        {"model": d["model"], "cpus": float(d["cpus"]) if "cpus" in d else None, "n": d["n"],
         "lines": [int(line) for line in d["lines"]]}
        for d in duplicates
    ]


def device_dir(results_dir: Path, device: str) -> Path:
    return Path(results_dir) / DEVICES_DIR / check_device_name(device)


def import_device_csv(csv_path: Path, device: str, results_dir: Path, harness_models: list[str]) -> ImportResult:
    """Validate `csv_path` and store it as `device`'s data; only a change in content rewrites the files."""
    csv_path = Path(csv_path)
    target = device_dir(results_dir, device)
    table, info = parse_device_csv(csv_path)
    measurements = table.to_csv(index=False, lineterminator="\n")
    record = {
        "schema_version": SCHEMA_VERSION,
        "device": device,
        "source_name": csv_path.name,
        "source_sha256": hashlib.sha256(csv_path.read_bytes()).hexdigest(),
        **info,
    }
    record_text = json.dumps(record, indent=2) + "\n"
    csv_file, json_file = target / MEASUREMENTS_FILE, target / IMPORT_FILE
    existed = csv_file.exists() and json_file.exists()
    unchanged = existed and csv_file.read_text(encoding="utf-8") == measurements and (
        json_file.read_text(encoding="utf-8") == record_text
    )
    if not unchanged:
        atomic_write_text(csv_file, measurements)
        atomic_write_text(json_file, record_text)
    data = DeviceData(device, table, record)
    matched = data.match(harness_models)
    return ImportResult(
        device=device,
        path=target,
        status="unchanged" if unchanged else ("updated" if existed else "created"),
        rows=len(table),
        models=table["model"].nunique(),
        conversions=info["conversions"],
        duplicates=info["duplicates"],
        unknown_models=sorted(set(table["model"]) - set(matched)),
    )


def list_devices(results_dir: Path) -> list[str]:
    root = Path(results_dir) / DEVICES_DIR
    return sorted(p.name for p in root.iterdir() if (p / IMPORT_FILE).exists()) if root.is_dir() else []


def load_device(results_dir: Path, device: str) -> DeviceData:
    """A device imported before; the error names the devices there are."""
    target = device_dir(results_dir, device)
    try:
        info = json.loads((target / IMPORT_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError as err:
        known = ", ".join(list_devices(results_dir)) or "none yet"
        raise DataError(
            f"device {device!r} has no imported data under {Path(results_dir) / DEVICES_DIR} (known: {known}); "
            f"run `harness import-device CSV --device {device}`"
        ) from err
    check_schema(info, str(target / IMPORT_FILE))
    text = (target / MEASUREMENTS_FILE).read_text(encoding="utf-8")
    dtypes = {"model": str, **{tag: str for tag in info["tags"]}, "harness_model": str}
    table = pd.read_csv(io.StringIO(text), dtype=dtypes, keep_default_na=False, na_values=[""])
    return DeviceData(device, table, info)
