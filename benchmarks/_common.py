"""Shared by the benchmark scripts: run the real CLI, read the stored runs, print a table, write JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from harness.store import list_sessions, load_runs

ROOT = Path(__file__).resolve().parent.parent
TINY_MODEL_NAME = "bench_input.onnx"


def placeholder_model(directory: Path) -> Path:
    """Workload scripts ignore their model argument, but the harness checks it exists and parses."""
    sys.path.insert(0, str(ROOT))
    from tests.conftest import make_matmul_model

    path = directory / TINY_MODEL_NAME
    return path if path.exists() else make_matmul_model(path, size=64, layers=1)


def profile_runs(directory: Path, script: Path | None, script_args: list[str], *, backend: str, repeats: int,
                 extra_flags: list[str] | None = None, model: Path | None = None) -> list[dict[str, Any]]:
    """One `harness profile` session through the real CLI; returns its stored runs."""
    results = directory / "results"
    before = set(list_sessions(results))
    command = [sys.executable, "-m", "harness.cli", "profile", str(model or placeholder_model(directory)),
               "--backend", backend, "--repeats", str(repeats), "--results-dir", str(results), "--json",
               *(extra_flags or [])]
    if script is not None:
        command += ["--script", str(script), "--", *script_args]
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"harness profile failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    (session,) = set(list_sessions(results)) - before
    return load_runs(session)


def print_table(title: str, rows: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for column in rows[0] if rows else []:
        table.add_column(str(column), justify="right")
    for row in rows:
        table.add_row(*(str(value) for value in row.values()))
    Console(width=200).print(table)


def write_json(path: Path, rows: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows, indent=2) + "\n")
