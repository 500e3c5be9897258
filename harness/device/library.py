"""The device library: every device table the harness knows, each with its provenance, as evidence for a device it
has not seen.

Two kinds of table:
- shipped: the published tables listed in devices/library.csv (TFLite on Pixel phones, ncnn's six devices at 1 and
  4 threads, NAS-Bench-201 on ten devices), each row naming the file, the physical device, the engine, the thread
  count, the precision, the date and whether benchmarks score it (`score`) or only learn from it (`learn`);
- imported: every device under RESULTS_DIR/devices/ that has latency_ms and was asked to join
  (`harness import-device --library`, or `harness devices join NAME`; `harness devices leave NAME` takes it out).
  An import joins nothing by itself: a user's own tables must not become evidence, nor inflate the held-out figures
  the harness prints, unless the user says so.

A table's `device` names the physical device: a target never learns from a table of its own device, at any thread
count or batch size (harness.calibration.transfer.Library.for_target).
"""

from __future__ import annotations

import csv
import json
import math
import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pandas as pd

from harness.core import metric_registry
from harness.core.errors import DataError
from harness.core.shipped import SHIPPED_ROOT
from harness.device.data import IMPORT_FILE, list_devices, load_device
from harness.device.nb201_table import read_devices

ROOT = SHIPPED_ROOT
CATALOG = ROOT / "devices" / "library.csv"
METRIC = metric_registry.LATENCY
"""The metric every library table gives: the per-inference latency in milliseconds."""
NB201_PREFIX = "nb201_"
"""NAS-Bench-201 architecture i is the zoo's model `nb201_<i>`."""
CATALOG_COLUMNS = ("name", "device", "file", "column", "source", "engine", "threads", "precision", "date", "role")
ROLES = ("score", "learn")


@dataclass(frozen=True)
class LibraryTable:
    """One device table and where it came from. `values` is the latency per model name as the table writes it."""

    name: str
    device: str
    source: str
    engine: str
    threads: int | None
    precision: str
    date: str
    role: str
    origin: str
    path: Path
    column: str = ""
    stamp: int = 0
    """Its file's modification time (ns) when listed: a table imported again is read again, not from the cache."""

    @property
    def values(self) -> pd.Series:
        return _read(self.path, self.column, self.name, self.origin, self.stamp)[0]

    @property
    def harness_names(self) -> dict[str, str]:
        """Model → harness model, where the table says so in a harness_model column."""
        return _read(self.path, self.column, self.name, self.origin, self.stamp)[1]

    @property
    def scored(self) -> bool:
        return self.role == "score"

    def provenance(self) -> dict[str, object]:
        """What `harness devices show` prints and --json gives: everything but the values."""
        return {"name": self.name, "device": self.device, "source": self.source, "engine": self.engine,
                "threads": self.threads, "precision": self.precision, "date": self.date, "role": self.role,
                "origin": self.origin, "file": _shown(self.path), "column": self.column, "models": len(self.values)}


@cache
def _read(path: Path, column: str, name: str, origin: str, stamp: int) -> tuple[pd.Series, dict[str, str]]:
    """Latency by model (read once per file version, `stamp`), and the harness_model cells: a NAS-Bench-201 column
    by `nb201_<arch_idx>`, a device CSV's latency_ms by its model name (repeats combined as import-device combines
    them), an imported device's stored measurements."""
    if column:
        frame = read_devices(path)
        if column not in frame:
            raise DataError(f"{catalog_path()}: table {name}: {path} has no column {column!r}")
        series = frame[column].astype(float)
        series.index = [f"{NB201_PREFIX}{index}" for index in series.index]
        return series.rename(METRIC), {}
    if origin == "imported":
        device = load_device(path.parent.parent, path.name)
    else:
        from harness.device.importer import DeviceFile, read_device  # the importer's readers, only for CSV tables

        device = read_device([DeviceFile(path)], name)
    table = device.table.dropna(subset=[METRIC]) if METRIC in device.table else device.table.iloc[0:0]
    values = table.groupby("model")[METRIC].median().astype(float) if len(table) else pd.Series(dtype=float)
    explicit = {row.model: row.harness_model for row in table.itertuples()
                if isinstance(row.model, str) and isinstance(getattr(row, "harness_model", None), str)}
    return values, explicit


def _shown(path: Path) -> str:
    """A shipped file relative to the checkout, as devices/library.csv names it."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _stamp(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:  # a missing file is refused where it is read, naming it
        return 0


def _threads(text: str) -> int | None:
    return int(text) if text.strip() else None


def catalog_path() -> Path:
    """devices/library.csv, or the catalog HARNESS_LIBRARY_CATALOG names (a team's own library of tables)."""
    return Path(os.environ.get("HARNESS_LIBRARY_CATALOG") or CATALOG)


def shipped_tables(catalog: Path | None = None) -> list[LibraryTable]:
    """The catalog's tables (its files relative to the checkout, or absolute); a malformed row is one line naming the
    catalog's line."""
    catalog = catalog or catalog_path()
    try:
        lines = [(number, line) for number, line in enumerate(catalog.read_text(encoding="utf-8").splitlines(), 1)
                 if line.strip() and not line.startswith("#")]
    except OSError as err:
        raise DataError(f"{catalog}: cannot be read ({err.strerror})") from err
    header = next(csv.reader([lines[0][1]])) if lines else []
    if tuple(header) != CATALOG_COLUMNS:
        raise DataError(f"{catalog}: the header must be {','.join(CATALOG_COLUMNS)}")
    tables = []
    for number, line in lines[1:]:
        cells = next(csv.reader([line]))
        if len(cells) != len(header):
            raise DataError(f"{catalog}:{number}: {len(cells)} cells where the header has {len(header)}")
        row = dict(zip(header, cells, strict=True))
        if row["role"] not in ROLES:
            raise DataError(f"{catalog}:{number}: role {row['role']!r}; use one of {', '.join(ROLES)}")
        try:
            threads = _threads(row["threads"])
        except ValueError:
            raise DataError(f"{catalog}:{number}: threads {row['threads']!r} is not a whole number") from None
        path = ROOT / row["file"]
        tables.append(LibraryTable(row["name"], row["device"], row["source"], row["engine"], threads,
                                   row["precision"], row["date"], row["role"], "shipped", path, row["column"],
                                   _stamp(path)))
    return tables


MEMBER_FILE = "library-member"
"""In an imported device's folder: the device joined the library (its content says when and how)."""


def is_member(results_dir: Path, name: str) -> bool:
    return (Path(results_dir) / "devices" / name / MEMBER_FILE).is_file()


def set_member(results_dir: Path, name: str, member: bool, how: str) -> None:
    """`name` (an imported device) joins the library or leaves it."""
    folder = Path(results_dir) / "devices" / name
    if name not in list_devices(results_dir):
        raise DataError(f"no imported device {name!r} under {results_dir}; import it with `harness import-device`")
    if member:
        (folder / MEMBER_FILE).write_text(f"{how}\n", encoding="utf-8")
    else:
        (folder / MEMBER_FILE).unlink(missing_ok=True)


def imported_tables(results_dir: Path, members_only: bool = True) -> list[LibraryTable]:
    """Every imported device with latency_ms that joined the library (all of them, without `members_only`), as a
    table of its own device (its name), role `score`."""
    tables = []
    for name in list_devices(results_dir):
        folder = Path(results_dir) / "devices" / name
        if members_only and not is_member(results_dir, name):
            continue
        info = json.loads((folder / IMPORT_FILE).read_text(encoding="utf-8"))
        if METRIC not in info.get("metrics", []):
            continue
        files = ", ".join(Path(str(source["name"])).name for source in info.get("sources", [])) or "imported data"
        data = load_device(Path(results_dir), name)
        cpus = sorted({float(c) for c in data.table["cpus"].dropna()}) if "cpus" in data.table else []
        threads = int(cpus[0]) if len(cpus) == 1 and math.isfinite(cpus[0]) else None
        tables.append(LibraryTable(name, name, f"imported from {files}", data.runtime or "", threads, "", "",
                                   "score", "imported", folder, stamp=_stamp(folder / IMPORT_FILE)))
    return tables


def same_data(a: LibraryTable, b: LibraryTable, at_least: int = 3) -> bool:
    """Whether two tables hold the same measurements: every latency equal on the models both have (at least
    `at_least` of them). One device's data imported twice under two names is no evidence for itself."""
    left, right = a.values, b.values
    shared = left.index.intersection(right.index)
    if len(shared) < at_least:
        return False
    x, y = left[shared].to_numpy(float), right[shared].to_numpy(float)
    return bool(((x == y) | (abs(x - y) <= 1e-9 * abs(x))).all())


def all_tables(results_dir: Path | None = None) -> list[LibraryTable]:
    """The shipped tables, then the imported ones that joined (an imported device named like a shipped table is
    refused)."""
    shipped = shipped_tables()
    imported = imported_tables(results_dir) if results_dir is not None else []
    clash = {t.name for t in shipped} & set(list_devices(results_dir) if results_dir is not None else [])
    if clash:
        raise DataError(f"imported device {sorted(clash)[0]!r} has the name of a shipped library table; import it "
                        "again under another --device name")
    return [*shipped, *imported]


def find_table(name: str, tables: list[LibraryTable]) -> LibraryTable | None:
    """The table called `name` among `tables`, or None: the one lookup of a table by name (names are unique: an
    imported device named like a shipped table is refused), each caller saying what none means to it."""
    return next((table for table in tables if table.name == name), None)
