"""An ONNX model's static facts by content: read from its graph once, then from a small JSON file per content.

Reading the facts loads onnx and runs shape inference (a third of a second and more for a large graph), which
would otherwise start every session. The cache key is the file's sha256 and the recipe (this package's facts code
and the onnx version), so a changed model, a changed count or another onnx never reuses an entry. A file that
parsed once is whole, so a cache hit also stands for the check that the model is not corrupt. The cache is only a
shortcut: an entry that cannot be read or written is computed again, never an error.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import os
import tempfile
from pathlib import Path
from typing import Any

FACTS_CODE = Path(__file__).with_name("facts.py")


def cache_dir() -> Path:
    """HARNESS_FACTS_DIR, else ~/.cache/harness/facts (beside the zoo's exports)."""
    return Path(os.environ.get("HARNESS_FACTS_DIR") or Path.home() / ".cache" / "harness" / "facts").expanduser()


def recipe() -> str:
    """12 hex digits over what shapes the facts besides the model: the facts code and the onnx version."""
    try:
        onnx_version = importlib.metadata.version("onnx")
    except importlib.metadata.PackageNotFoundError:
        onnx_version = ""
    return hashlib.sha256(FACTS_CODE.read_bytes() + onnx_version.encode()).hexdigest()[:12]


def model_facts(path: Path, sha256: str) -> dict[str, Any]:
    """harness.models.facts.onnx_facts of the file whose content hashes to `sha256`, from the cache when it holds
    them; a model that is not readable ONNX raises ModelError, as onnx_facts does."""
    entry = cache_dir() / f"{sha256}-{recipe()}.json"
    with contextlib.suppress(OSError, ValueError):
        return json.loads(entry.read_text())
    from harness.models.facts import onnx_facts  # onnx: only for a model (or recipe) not seen before

    facts = onnx_facts(path)
    with contextlib.suppress(OSError):
        entry.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=entry.parent, prefix=f".{entry.stem}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as handle:
                json.dump(facts, handle)
            os.replace(tmp, entry)  # whole or absent: parallel sessions may write the same entry
        finally:
            Path(tmp).unlink(missing_ok=True)
    return facts
