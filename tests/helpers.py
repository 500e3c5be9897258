"""Helpers for driving the real CLI in-process and reading what it stored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main
from harness.store import list_sessions, load_runs


def profile_json(capsys: pytest.CaptureFixture[str], results: Path, *args: str) -> dict[str, Any]:
    """Run `harness profile ... --json` and return the parsed stdout (which must be JSON and nothing else)."""
    capsys.readouterr()
    code = main(["profile", "--json", "--results-dir", str(results), *args])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


def session_runs(results: Path) -> list[dict[str, Any]]:
    sessions = list_sessions(results)
    assert sessions, f"no session written under {results}"
    return load_runs(sessions[-1])


def entry(summary: dict[str, Any], model: str, cpus: float | None = None) -> dict[str, Any]:
    matches = [e for e in summary["models"] if e["model_name"] == model and (cpus is None or e["cpus"] == cpus)]
    assert len(matches) == 1, summary["models"]
    return matches[0]
