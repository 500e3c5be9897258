"""A board's runs as device measurements, with no import step: after a TARGET session, every target run of the same
board, engine and thread count under RESULTS_DIR becomes that device's table (RESULTS_DIR/devices/<name>/), the same
table `harness import-device` writes, so regress, predict, suggest, rank and the report use it at once.

The device's name is DEVICE_NAME where the profile sets one, else `<board's host name>-<engine>-<threads>t`; a
session of several engines or thread counts adds `-<engine>-<threads>t` to a DEVICE_NAME too.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from harness.analysis.run_values import run_value
from harness.core import conditions, metric_registry
from harness.core.records import RunRecord
from harness.core.storage import write_bytes_atomically
from harness.core.targets import is_target_run
from harness.store.results import iter_all_runs

TARGET_FILE = "target.json"
"""Beside a board device's measurements: the TARGET, engine and threads that measure it (`suggest --measure`)."""
METRICS = (metric_registry.LATENCY, metric_registry.PEAK_MEMORY, metric_registry.PEAK_RSS, metric_registry.LOAD,
           metric_registry.RUNTIME, metric_registry.ENERGY)
"""What a board's table gives, where its runs measured it."""
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def board_key(run: RunRecord) -> tuple[str, str, int]:
    """(board, engine, threads): the runs one device table pools. A farm's boards are one device, named after its
    first board and its size."""
    board = run.line.get("board") or {}
    target = str((run.line.get("provenance") or {}).get("target") or "")
    farm = (run.line.get("provenance") or {}).get("farm") or []
    name = f"{farm[0].get('hostname')}-farm{len(farm)}" if " " in target and farm else board.get("hostname")
    return str(name or "board"), conditions.runtime_name(run) or "script", int(run.threads)


def device_name(key: tuple[str, str, int], chosen: str | None, several: bool) -> str:
    host, engine, threads = key
    suffix = f"{engine}-{threads}t"
    name = f"{chosen}-{suffix}" if chosen and several else chosen or f"{host}-{suffix}"
    return _SAFE.sub("-", name).strip("-.") or "board"


def board_rows(runs: Iterable[RunRecord]) -> pd.DataFrame:
    """A device CSV's rows: one per ok run (its repeat), each metric the run has."""
    rows: list[dict[str, object]] = []
    for run in runs:
        if not run.ok:
            continue
        values = {metric: run_value(run, metric) for metric in METRICS}
        rows.append({"model": run.model_name, "repeat": len(rows) + 1, "threads": run.threads,
                     "runtime": conditions.runtime_name(run) or "",
                     **{metric: value for metric, value in values.items() if value is not None}})
    return pd.DataFrame(rows)


def register_boards(session_runs: list[RunRecord], results_dir: Path, chosen: str | None) -> list[str]:
    """Store the boards of `session_runs` as devices (each pooling every target run of its board, engine and threads
    under results_dir); returns one line per device stored."""
    from harness.device.data import device_dir, list_devices
    from harness.device.importer import DeviceFile, import_device
    from harness.device.library import is_member, set_member

    keys = sorted({board_key(run) for run in session_runs if is_target_run(run)})
    if not keys:
        return []
    every = [run for run in iter_all_runs(results_dir) if is_target_run(run)]
    lines = []
    for key in keys:
        runs = [run for run in every if board_key(run) == key]
        rows = board_rows(runs)
        if rows.empty:
            continue
        name = device_name(key, chosen, len(keys) > 1)
        member = name not in list_devices(results_dir) or is_member(results_dir, name)  # a device left stays out
        with tempfile.TemporaryDirectory(prefix="harness-board-") as folder:
            path = Path(folder) / f"{name}.csv"
            rows.to_csv(path, index=False)
            result = import_device([DeviceFile(path)], name, results_dir, sorted(set(rows["model"])))
        where = {"target": (runs[-1].line.get("provenance") or {}).get("target"), "runtime": key[1], "threads": key[2]}
        write_bytes_atomically(device_dir(results_dir, name) / TARGET_FILE, json.dumps(where, indent=2).encode())
        if member:
            set_member(results_dir, name, True, "a TARGET session")
        library = (f"in the device library (`harness devices leave {name}` takes it out)" if member else
                   f"not in the device library (`harness devices join {name}` puts it in)")
        lines.append(f"board {key[0]} ({key[1]}, {key[2]} thread{'s' if key[2] > 1 else ''}) is device {name}, "
                     f"{library}: {result.models} models from {len(runs)} runs; `harness predict MODEL --device "
                     f"{name}`")
    return lines


def board_target(results_dir: Path, device: str) -> dict[str, Any] | None:
    """How `device` is measured when it is a board (its target.json), else None."""
    from harness.device.data import device_dir

    path = device_dir(results_dir, device) / TARGET_FILE
    return dict(json.loads(path.read_text())) if path.is_file() else None
