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
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


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
        with contextlib.suppress(OSError):
            entry.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=entry.parent, prefix=f".{entry.stem}.", suffix=".tmp")
            try:
                with os.fdopen(fd, "w") as handle:
                    json.dump(value, handle)
                os.replace(tmp, entry)  # whole or absent: parallel sessions may write the same entry
            finally:
                Path(tmp).unlink(missing_ok=True)
    return value
