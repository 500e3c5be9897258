"""A device's stored measurements and how its model names meet the harness's.

RESULTS_DIR/devices/<device>/ holds measurements.csv (one row per model and thread count, units the harness's,
repeats combined into their median with their count `n`), import.json (what the import read and did) and, when a
log brought one, per_op.json (harness.device.op_profiles); harness.device.importer writes them.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from harness.core.errors import ConfigError, DataError, ModelError
from harness.device.device_csv import RUNTIME_COLUMN
from harness.device.op_profiles import DeviceOpProfile, load_op_profiles
from harness.store.results import check_schema
from harness.zoo import registry as zoo_registry

DEVICES_DIR = "devices"
MEASUREMENTS_FILE = "measurements.csv"
IMPORT_FILE = "import.json"
DEVICE_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")

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


def match_models(device_models: list[str], explicit: dict[str, str], harness_models: list[str],
                 twins: Mapping[str, str] | None = None) -> dict[str, str]:
    """Device model → harness model: an explicit harness_model cell, else the same name, else the same
    normalised name (with a zoo model's input size, see _with_input_size) and kind of precision (the preferred
    quantization when there are several), else the same normalised name when exactly one harness model has it.
    `twins` (harness model → the zoo model whose graph it is: harness.models.identity.graph_twins) lets a renamed
    copy answer to its twin's names as to its own."""
    twins = twins or {}
    copy_of: dict[str, str] = {}  # a zoo model's name -> the first harness model whose graph it is
    for name in harness_models:
        if name in twins:
            copy_of.setdefault(twins[name], name)
    by_base: dict[str, list[tuple[int | None, str]]] = {}
    for name in harness_models:
        for known_as in dict.fromkeys([name, twins.get(name, name)]):
            base, quant = normalise_model_name(known_as)
            for alias in _with_input_size(known_as, base):
                if (quant, name) not in (entries := by_base.setdefault(alias, [])):
                    entries.append((quant, name))
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
        elif model in copy_of:
            mapping[model] = copy_of[model]
        elif same_kind and (len(same_kind) == 1 or same_kind[0][0] != same_kind[1][0]):
            mapping[model] = same_kind[0][1]
        elif len(candidates) == 1:
            mapping[model] = candidates[0][1]
    return mapping


@dataclass
class DeviceData:
    """One device's stored measurements: one row per (model, cpus), each metric the median of the `n` repeats
    behind it, and its per-operator profiles."""

    name: str
    table: pd.DataFrame
    info: dict[str, Any]
    op_profiles: list[DeviceOpProfile] = field(default_factory=list)

    @property
    def metrics(self) -> list[str]:
        return list(self.info["metrics"])

    @property
    def tags(self) -> list[str]:
        return list(self.info["tags"])

    @property
    def runtime(self) -> str | None:
        """The engine the device ran (its rows' `runtime` column), None when they do not say; one line when they
        name two, since one calibration pairs with one engine's runs."""
        if RUNTIME_COLUMN not in self.table:
            return None
        named = sorted({str(value) for value in self.table[RUNTIME_COLUMN].dropna()} - {""})
        if len(named) > 1:
            raise DataError(f"device {self.name}: its rows name {len(named)} engines ({', '.join(named)}) in column "
                            "runtime; import each engine's rows as a device of its own (--device NAME-ENGINE)")
        return named[0] if named else None

    def match(self, harness_models: list[str], twins: Mapping[str, str] | None = None) -> dict[str, str]:
        explicit: dict[str, str] = {}
        if "harness_model" in self.table:  # both columns read as text; an empty harness_model cell is NaN
            explicit = {row.model: row.harness_model for row in self.table.itertuples()
                        if isinstance(row.model, str) and isinstance(row.harness_model, str)}
        return match_models(sorted(set(self.table["model"])), explicit, harness_models, twins)


def check_device_name(name: str) -> str:
    if not DEVICE_NAME_PATTERN.match(name or ""):
        raise ConfigError(f"--device {name!r}: use letters, digits, '.', '_' or '-' (it names a directory)")
    return name


def device_dir(results_dir: Path, device: str) -> Path:
    return Path(results_dir) / DEVICES_DIR / check_device_name(device)


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
            f"run `harness import-device FILE... --device {device}`"
        ) from err
    check_schema(info, str(target / IMPORT_FILE))
    text = (target / MEASUREMENTS_FILE).read_text(encoding="utf-8")
    dtypes = {"model": str, **{tag: str for tag in info["tags"]}, "harness_model": str}
    table = pd.read_csv(io.StringIO(text), dtype=dtypes, keep_default_na=False, na_values=[""])
    return DeviceData(device, table, info, load_op_profiles(target))
