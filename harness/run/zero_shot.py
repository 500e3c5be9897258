"""Zero-shot prediction for a library device: a user with no device of their own names one of the library's tables
(`harness predict mine.onnx --device ncnn-rpi4b-4t`). The table's models are profiled on this host (or found in a
session that holds them), the table calibrates as imported device data would, every other device's table is the
library, and the user's models are predicted with intervals beside the table's own held-out error.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

from harness.core import progress
from harness.core.errors import ConfigError, DataError, ModelError
from harness.device.data import DeviceData, normalise_model_name
from harness.device.library import LibraryTable
from harness.zoo import registry as zoo_registry

ZERO_SHOT_DIR = "zero-shot"
"""Under RESULTS_DIR: the sessions zero-shot predictions profile, kept apart from the user's own sessions."""
PROFILE_FLAGS = ("--cpus", "1", "--repeats", "3", "--iterations", "30", "--warmup", "5")
"""How the table's models are profiled when no session holds them: one host core (the calibration maps it to the
device's threads, as the library's benchmarks do), few short repeats, the profile's engine, memory and backend."""


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


def profile_missing(models: list[str], results_dir: Path) -> None:
    """One `harness profile` session of `models` in `results_dir`, through the real CLI: its progress on stderr where
    progress is shown (the CLI), nothing printed from a library call unless harness.core.progress.show() asked."""
    if importlib.util.find_spec("torch") is None and any(_builds(model) for model in models):
        raise ConfigError("zero-shot: the library table's models are built by the zoo, whose extra is missing; run "
                          "`make setup-zoo` (torch, about 5.5 GB) and predict again")
    argv = [sys.executable, "-m", "harness.cli", "profile", *models, *PROFILE_FLAGS, "--results-dir", str(results_dir)]
    progress.LOGGER.info(f"zero-shot: profiling the library table's {len(models)} models on this host "
                         f"({' '.join(PROFILE_FLAGS)}); a later predict reuses the session")
    shown = progress.shown()
    done = subprocess.run(argv, stdout=sys.stderr if shown else subprocess.PIPE, stderr=None if shown else
                          subprocess.STDOUT, text=True, errors="replace", check=False)
    if done.returncode != 0:
        said = [line for line in (done.stdout or "").splitlines() if line.strip()]
        raise DataError(f"zero-shot: profiling {', '.join(models)} failed ({said[-1] if said else 'see above'}); "
                        f"profile them with `make profile MODEL=\"{' '.join(models)}\"` and predict again")


def shipped_table(name: str, tables: list[LibraryTable]) -> LibraryTable | None:
    """The shipped library table `name`, or None (an imported device calibrates as imported data does)."""
    return next((table for table in tables if table.name == name and table.origin == "shipped"), None)

