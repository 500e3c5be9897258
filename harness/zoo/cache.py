"""Where zoo exports live and how they get there (torch-free, so listing the cache needs no torch)."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


def cache_dir() -> Path:
    """HARNESS_ZOO_DIR, else ~/.cache/harness/zoo."""
    return Path(os.environ.get("HARNESS_ZOO_DIR") or Path.home() / ".cache" / "harness" / "zoo").expanduser()


def cached_files(name: str) -> list[Path]:
    """Every cached export of the canonical zoo name `name` (any format, any library version)."""
    root = cache_dir()
    return sorted(p for p in root.glob(f"{name}-*") if p.suffix in (".onnx", ".pt")) if root.is_dir() else []


def keyed_path(name: str, suffix: str, recipe: dict[str, Any]) -> Path:
    """`<name>-<key><suffix>` in the cache, the key 12 hex digits over everything in `recipe` that changes the
    bytes (spec, format, builder settings, library versions): a changed recipe never reuses a stale file."""
    key = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:12]
    return cache_dir() / f"{name}-{key}{suffix}"


def write_atomically(path: Path, writer: Callable[[Path], None]) -> Path:
    """`writer` fills a temp file beside `path`, which then replaces it: a reader never sees half a model,
    and two processes building the same model at once both end with a whole file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=path.suffix)
    os.close(fd)
    try:
        writer(Path(tmp))
        os.chmod(tmp, 0o644)  # mkstemp makes it owner-only; a container's user must read the model too
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return path
