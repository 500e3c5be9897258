"""The files the harness ships beside its code: bench scripts (bench_scripts/), device presets and library tables
(devices/), example models and published device tables (examples/).

In a checkout they are the checkout's own folders. An installed wheel carries the same tree as package data,
harness/data/<the same paths> (setup.py copies it there), found through importlib.resources: `pip install .` outside
the checkout profiles, ranks and predicts with nothing else to copy.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]
"""The folder that holds this harness package: the checkout, or site-packages where the wheel is installed."""


def shipped_root() -> Path:
    """The folder that holds bench_scripts/, devices/ and examples/: the package's data where it was installed from a
    wheel, else the checkout."""
    packaged = Path(str(resources.files("harness").joinpath("data")))
    return packaged if packaged.is_dir() else CHECKOUT


SHIPPED_ROOT = shipped_root()
BENCH_SCRIPTS_DIR = SHIPPED_ROOT / "bench_scripts"
PRESETS_DIR = SHIPPED_ROOT / "devices"
"""The device presets: `--device raspberry-pi-4` (and `device="raspberry-pi-4"`) is devices/raspberry-pi-4.env."""
EXAMPLES_DIR = SHIPPED_ROOT / "examples" / "models"
"""The built-in example set (small zoo exports checked in; examples/models/README.md says how they are made)."""
