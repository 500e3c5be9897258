"""Zero-shot prediction for a library device: a user with no device of their own names one of the library's tables
(`harness predict mine.onnx --device ncnn-rpi4b-4t`). The table's models are profiled on this host (or found in a
session that holds them), the table calibrates as imported device data would, every other device's table is the
library, and the user's models are predicted with intervals beside the table's own held-out error.
"""

from __future__ import annotations

from harness.core.errors import ConfigError, ModelError
from harness.device.data import DeviceData, normalise_model_name
from harness.device.library import LibraryTable
from harness.zoo import registry as zoo_registry

ZERO_SHOT_DIR = "zero-shot"
"""Under RESULTS_DIR: the sessions zero-shot predictions profile, kept apart from the user's own sessions."""


def zoo_models(table: LibraryTable) -> list[str]:
    """The zoo's names of the table's models: its harness_model cells, its names where the zoo builds them, and a
    quantized name's static int8 variant (TFLite's `_quant` models); models the zoo does not build are left out."""
    names = []
    for model in table.values.index:
        base, quant = normalise_model_name(str(model))
        for candidate in (table.harness_names.get(str(model)), str(model),
                          f"{base}_int8_static" if quant is not None else base):
            if candidate and _builds(candidate):
                names.append(candidate)
                break
    return list(dict.fromkeys(names))


def _builds(name: str) -> bool:
    try:
        zoo_registry.parse(name)
    except ModelError:
        return False
    return True


def device_data(table: LibraryTable) -> DeviceData:
    """The table as imported device data (what `regress` would read after import-device)."""
    if table.column:
        raise ConfigError(f"--device {table.name}: a NAS-Bench-201 table; its cells are predicted from Python "
                          "(harness.calibration.nas) or scored with make bench-nb201, not profiled one by one")
    from harness.device.importer import DeviceFile, read_device

    return read_device([DeviceFile(table.path)], table.name)
