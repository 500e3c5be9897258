"""An ONNX model's static facts by content: read from its graph once, then from harness.core.cache.

Reading the facts loads onnx and runs shape inference (a third of a second and more for a large graph), which
would otherwise start every session. The key is the file's sha256 and the recipe (this package's facts code, its
shape inference's, and the onnx and onnxruntime versions: onnxruntime infers the shapes onnx cannot), so a changed
model, a changed count or another onnx never reuses an entry. A file that parsed
once is whole, so a cache hit also stands for the check that the model is not corrupt.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.core.cache import cached
from harness.measure.provenance import installed_versions

FACTS_CODE = (Path(__file__).with_name("facts.py"), Path(__file__).with_name("shapes.py"))


def recipe() -> str:
    """12 hex digits over what shapes the facts besides the model: the facts code and the onnx and onnxruntime
    versions."""
    versions = installed_versions(["onnx", "onnxruntime"])
    code = b"".join(path.read_bytes() for path in FACTS_CODE)
    return hashlib.sha256(code + "".join(versions.get(name, "") for name in ("onnx", "onnxruntime")).encode()
                          ).hexdigest()[:12]


def model_facts(path: Path, sha256: str, dims: Mapping[str, int] | None = None) -> dict[str, Any]:
    """harness.models.facts.onnx_facts of the file whose content hashes to `sha256`, from the cache when it holds
    them; a model that is not readable ONNX raises ModelError, as onnx_facts does. `dims`: the sizes of the model's
    named dynamic dimensions (those it has of DIMS), which join the key; without them the key is the model's alone."""

    def read_graph() -> dict[str, Any]:
        from harness.models.facts import onnx_facts  # onnx: only for a model (or recipe) not seen before

        return onnx_facts(path, dims)

    sized = " ".join(f"{name}={size}" for name, size in sorted((dims or {}).items()))
    sized = sized and "-" + hashlib.sha256(sized.encode()).hexdigest()[:12]
    return cached("facts", f"{sha256}-{recipe()}{sized}", read_graph)
