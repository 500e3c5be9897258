"""A kernel table: one device's kernels, measured by `harness probe` (or imported from an engine's own tool), for
one (device, engine, threads, precision).

Layout: RESULTS_DIR/kernels/<name>/
  kernel_table.json   provenance: name, device, engine, threads, cpus, precision, created, probing_s, sessions,
                      source, cpu (and schema_version)
  rows.csv            one row per engine per-op row of one probed model: harness.analysis.per_op.TABLE_COLUMNS plus
                      model, source (zoo | designed), family, model_latency_ms (the model's headline latency in the
                      same session, without the profiler), graph (the designed graph's path relative to the table,
                      or the zoo name)
  graphs/             the designed kernels' ONNX files, so a kernel's features can be recomputed from its graph

The folder is written whole or not at all (harness.core.storage.write_dir_atomically): a reader never meets rows
without their provenance. A table that cannot be read is one DataError naming its file and the fix.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from harness.analysis.per_op import TABLE_COLUMNS
from harness.core.errors import DataError
from harness.core.storage import write_dir_atomically

KERNELS_DIR = "kernels"
TABLE_FILE = "kernel_table.json"
ROWS_FILE = "rows.csv"
GRAPHS_DIR = "graphs"
SCHEMA_VERSION = 1
ENGINES = ("onnxruntime", "ncnn", "litert")
PRECISIONS = ("fp32", "int8")
SOURCES = ("zoo", "designed")
DESIGNED_FAMILY = "designed"
ROLE = "kernels"
"""What `harness devices` shows in a kernel table's role column, beside the device tables' score and learn."""
META_KEYS = ("name", "device", "engine", "threads", "cpus", "precision", "created", "probing_s", "sessions",
             "source", "cpu")
ROW_COLUMNS = (*TABLE_COLUMNS, "model", "source", "family", "model_latency_ms", "graph")
FIX = "probe the device again (harness probe) or remove the folder"


def table_name(device: str, engine: str, threads: int, precision: str) -> str:
    """The default name: `<device>-<engine>-<threads>t-<precision>`, e.g. host-onnxruntime-1t-fp32."""
    return f"{device}-{engine}-{threads}t-{precision}"


def kernels_root(results_dir: Path) -> Path:
    return Path(results_dir) / KERNELS_DIR


def now_utc() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass(frozen=True)
class KernelTable:
    """One stored kernel table: its name, its folder and its provenance (kernel_table.json)."""

    name: str
    path: Path
    meta: dict[str, Any] = field(hash=False, compare=False)

    @classmethod
    def load(cls, path: str | Path) -> KernelTable:
        """The table in folder `path` (its kernel_table.json checked now, its rows read when asked for)."""
        folder = Path(path)
        meta_path = folder / TABLE_FILE
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise DataError(f"{meta_path}: no kernel table here (kernel_table.json is missing); {FIX}") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise DataError(f"{meta_path}: not a readable kernel table ({err}); {FIX}") from None
        check_meta(meta, str(meta_path))
        return cls(str(meta["name"]), folder, meta)

    @property
    def rows_path(self) -> Path:
        return self.path / ROWS_FILE

    def rows(self) -> pd.DataFrame:
        """Every per-op row (ROW_COLUMNS), as written."""
        try:
            frame = pd.read_csv(self.rows_path, dtype={"model": str, "graph": str, "family": str, "source": str,
                                                       "node": str, "onnx_node": str, "op_type": str})
        except FileNotFoundError:
            raise DataError(f"{self.rows_path}: kernel table {self.name} has no rows.csv; {FIX}") from None
        except (OSError, UnicodeDecodeError, ValueError, pd.errors.ParserError) as err:
            raise DataError(f"{self.rows_path}: not a readable kernel table ({err}); {FIX}") from None
        missing = [column for column in ROW_COLUMNS if column not in frame.columns]
        if missing:
            raise DataError(f"{self.rows_path}: kernel table {self.name} lacks the columns {', '.join(missing)}; {FIX}")
        return frame

    def graph_path(self, graph: str) -> Path:
        """A designed row's `graph` cell as a file (relative to the table's folder)."""
        return self.path / graph

    def provenance(self) -> dict[str, Any]:
        """What `harness devices` lists and `devices show --json` gives: the stored provenance, its row and model
        counts, the role `kernels` and the folder; and the models `harness probe --for` probed kernels for."""
        rows = self.rows()
        meta = {key: self.meta.get(key) for key in META_KEYS}
        probed_for = sorted(self.meta.get("for") or {})
        return {**meta, **({"for": probed_for} if probed_for else {}), "date": str(self.meta.get("created", ""))[:10],
                "rows": len(rows),
                "models": int(rows["model"].nunique()), "role": ROLE, "file": str(self.path)}


def check_meta(meta: Any, where: str) -> None:
    """A kernel_table.json's keys and values, each refused in one line naming `where`."""
    if not isinstance(meta, dict):
        raise DataError(f"{where}: a kernel table's provenance must be a JSON object; {FIX}")
    version = meta.get("schema_version", SCHEMA_VERSION)
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise DataError(f"{where}: schema_version {version!r} is not one this harness reads (<= {SCHEMA_VERSION}); "
                        "upgrade the harness to read it")
    missing = [key for key in META_KEYS if key not in meta]
    if missing:
        raise DataError(f"{where}: the kernel table's provenance lacks {', '.join(missing)}; {FIX}")
    if not isinstance(meta["name"], str) or not meta["name"] or "/" in meta["name"]:
        raise DataError(f"{where}: name {meta['name']!r} is not a table name; {FIX}")
    if meta["engine"] not in ENGINES:
        raise DataError(f"{where}: engine {meta['engine']!r} is not one of {', '.join(ENGINES)}; {FIX}")
    if meta["precision"] not in PRECISIONS:
        raise DataError(f"{where}: precision {meta['precision']!r} is not one of {', '.join(PRECISIONS)}; {FIX}")
    if not isinstance(meta["threads"], int) or isinstance(meta["threads"], bool) or meta["threads"] < 1:
        raise DataError(f"{where}: threads {meta['threads']!r} is not a positive whole number; {FIX}")
    if not isinstance(meta["sessions"], list):
        raise DataError(f"{where}: sessions must be a list of session ids; {FIX}")


def write_table(directory: str | Path, meta: dict[str, Any], rows: pd.DataFrame,
                graphs: dict[str, Path]) -> KernelTable:
    """Write the table to `directory` whole (replacing one there): `meta` as kernel_table.json (META_KEYS, checked
    first), `rows` (ROW_COLUMNS, in that order, others after) as rows.csv, and `graphs` (a designed graph's file name
    -> its file) copied into graphs/. Returns the table as read back."""
    folder = Path(directory)
    meta = {"schema_version": SCHEMA_VERSION, **meta}
    check_meta(meta, f"kernel table {folder}")
    missing = [column for column in ROW_COLUMNS if column not in rows.columns]
    if missing:
        raise DataError(f"kernel table {folder}: the rows lack the columns {', '.join(missing)}")
    bad_sources = sorted(set(rows["source"].dropna()) - set(SOURCES))
    if bad_sources:
        raise DataError(f"kernel table {folder}: row source {bad_sources[0]!r} is not one of {', '.join(SOURCES)}")
    ordered = rows[[*ROW_COLUMNS, *(c for c in rows.columns if c not in ROW_COLUMNS)]]
    files = {TABLE_FILE: (json.dumps(_plain(meta), indent=2) + "\n").encode("utf-8"),
             ROWS_FILE: ordered.to_csv(index=False, lineterminator="\n").encode("utf-8")}
    for name, source in graphs.items():
        if Path(name).name != name:
            raise DataError(f"kernel table {folder}: graph name {name!r} must be a plain file name")
        files[f"{GRAPHS_DIR}/{name}"] = Path(source).read_bytes()
    write_dir_atomically(folder, files)
    return KernelTable.load(folder)


def _plain(value: Any) -> Any:
    """JSON without NaN (written as null) and without numpy scalars."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def kernel_tables(results_dir: str | Path) -> list[KernelTable]:
    """Every kernel table under RESULTS_DIR/kernels/, by name; a broken one is a DataError naming its file."""
    root = kernels_root(Path(results_dir))
    if not root.is_dir():
        return []
    return [KernelTable.load(folder) for folder in sorted(root.iterdir())
            if folder.is_dir() and not folder.name.startswith(".")]


def find_kernel_table(name: str, results_dir: str | Path) -> KernelTable | None:
    """The kernel table called `name`, or None."""
    return next((table for table in kernel_tables(results_dir) if table.name == name), None)
