"""Where zoo exports live and how they get there (torch-free, so listing the cache needs no torch)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.core.storage import write_atomically


def cache_dir() -> Path:
    """HARNESS_ZOO_DIR, else ~/.cache/harness/zoo."""
    return Path(os.environ.get("HARNESS_ZOO_DIR") or Path.home() / ".cache" / "harness" / "zoo").expanduser()


def cached_files(name: str) -> list[Path]:
    """Every cached export of the canonical zoo name `name` (any format, any library version)."""
    root = cache_dir()
    return sorted(p for p in root.glob(f"{name}-*") if p.suffix in (".onnx", ".pt")) if root.is_dir() else []


def keyed_path(name: str, suffix: str, recipe: dict[str, Any], root: Path | None = None) -> Path:
    """`<name>-<key><suffix>` in the cache (the zoo's, or `root`), the key 12 hex digits over everything in `recipe`
    that changes the bytes (spec, format, builder settings, library versions): a changed recipe never reuses a stale
    file."""
    key = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:12]
    return (root or cache_dir()) / f"{name}-{key}{suffix}"


def write_model_atomically(path: Path, writer: Callable[[Path], object]) -> Path:
    """`writer` fills a temp file beside `path` (same suffix), which then replaces it: a reader never sees half a
    model, two processes building the same model at once both end with a whole file, and a full disk is one
    StorageError with no temp file left. Readable by all: a container's user must read the model too."""
    return write_atomically(path, writer, mode=0o644)
