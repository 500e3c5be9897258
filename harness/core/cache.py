"""Small JSON values kept between sessions by what they are computed from, so a session starts without recomputing
them: an ONNX model's facts (by its content), what a Docker image holds (by its id).

A key names the content and whatever else shapes the value, so an entry is never stale. The cache is a shortcut
only: an entry that cannot be read or written is computed again, never an error, and an empty value (a probe that
failed) is not kept. Entries live under HARNESS_CACHE_DIR, else ~/.cache/harness (the zoo's exports have their own
directory there, HARNESS_ZOO_DIR).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.core.errors import StorageError
from harness.core.storage import write_atomically


def cache_dir(kind: str) -> Path:
    """Where entries of one kind (facts, images) live."""
    root = os.environ.get("HARNESS_CACHE_DIR") or Path.home() / ".cache" / "harness"
    return Path(root).expanduser() / kind


def cached(kind: str, key: str, compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The value stored under `key`, else compute() (and keep it, when it is not empty)."""
    entry = cache_dir(kind) / f"{key}.json"
    with contextlib.suppress(OSError, ValueError):
        return json.loads(entry.read_text())
    value = compute()
    if value:
        with contextlib.suppress(OSError, StorageError):  # whole or absent: parallel sessions may write the same entry
            write_atomically(entry, lambda tmp: tmp.write_text(json.dumps(value)))
    return value
