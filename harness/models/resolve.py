"""Turn what the user typed (a file or a zoo name) into a checked model: path, kind, bench script, facts.

Everything here runs before the first measurement, so a missing, corrupt or unsupported model stops the
session at once with one line instead of failing run after run.
"""

from __future__ import annotations

import hashlib
import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.core.errors import ModelError
from harness.core.external_data import ExternalData, confine
from harness.models.facts_cache import model_facts

BENCH_SCRIPTS_DIR = Path(__file__).resolve().parents[2] / "bench_scripts"
EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples" / "models"
"""The built-in example set (small zoo exports checked in; examples/models/README.md says how they are made)."""
SCRIPT_KIND = "script"
"""A user script profiled as a whole, with no model: it is the thing measured, named after its file."""

_TORCH = ("torch", "torch_bench.py", "torch", "PyTorch (make setup-zoo installs it)")
# extension -> (kind, bench script, importable module it needs, what installs it)
KINDS: dict[str, tuple[str, str, str, str]] = {
    ".onnx": ("onnx", "onnx_bench.py", "onnxruntime", "the core install (make setup)"),
    ".pt": _TORCH,
    ".pth": _TORCH,
    ".pt2": _TORCH,
    ".py": _TORCH,
    ".tflite": ("tflite", "tflite_bench.py", "ai_edge_litert", "LiteRT: pip install -e '.[litert]'"),
}


@dataclass(frozen=True)
class ModelInfo:
    name: str
    path: Path
    kind: str
    script: Path
    sha256: str
    size_mib: float
    facts: dict[str, Any] | None = field(default=None, compare=False)
    external_data: ExternalData = ()  # (tensor, location) per file beside the model that holds tensors' data

    @property
    def run_model(self) -> str:
        """The model path handed to the script; empty for a script profiled as a whole."""
        return "" if self.kind == SCRIPT_KIND else str(self.path)

    def provenance(self) -> dict[str, Any]:
        return {"model_name": self.name, "model_path": str(self.path), "model_kind": self.kind,
                "model_sha256": self.sha256, "model_size_mib": self.size_mib, "model_facts": self.facts}


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _zoo_model(name: str) -> tuple[Path, str] | None:
    """(exported file, canonical name) of a zoo name: `mobilenet_v2_1_224` is `mobilenet_v2_1.0_224`."""
    from harness import zoo

    return (zoo.export(name), zoo.parse(name).name) if zoo.is_zoo_name(name) else None


def resolve_model(arg: str, script: Path | None = None, check_runtime: bool = True) -> ModelInfo:
    """A path or a zoo name -> ModelInfo. With a user SCRIPT, any existing file is accepted as its input."""
    path = Path(arg).expanduser()
    if not path.exists():
        zoo_model = _zoo_model(arg)
        if zoo_model is None:
            raise ModelError(f"model {arg!r} not found: give a path to a model file or a zoo name "
                             "(see `harness zoo list`)")
        path, name = zoo_model
    else:
        name = path.stem
    if not path.is_file():
        raise ModelError(f"model {path} is not a file")
    suffix = path.suffix.lower()
    if script is None and suffix not in KINDS:
        raise ModelError(f"model {path}: unknown extension {suffix or '(none)'!r}; supported: "
                         f"{', '.join(KINDS)} (or pass your own --script)")
    kind, default_script, module, extra = KINDS.get(suffix, ("custom", "", "", ""))
    if script is None and check_runtime and importlib.util.find_spec(module) is None:
        raise ModelError(f"model {path.name} needs {module}, which is not installed: install {extra}")
    path = path.resolve()  # the runs read it there, and its external data from beside it
    sha256 = sha256_of(path)
    facts = model_facts(path, sha256) if kind == "onnx" else None  # also rejects a corrupt file, now
    # Checked on every resolve, not only when the facts were read: the files beside a cached model may have changed.
    external = confine(str(path), (facts or {}).get("external_data", []))
    return ModelInfo(name=name, path=path, kind=kind, script=(script or BENCH_SCRIPTS_DIR / default_script),
                     sha256=sha256, size_mib=path.stat().st_size / 1024**2, facts=facts, external_data=external)



def resolve_script(path: Path, name: str | None = None) -> ModelInfo:
    """A user script profiled as a whole (no model): named after its file unless `name` is given."""
    path = path.expanduser()
    if not path.is_file():
        raise ModelError(f"script {path} not found: give the path of an existing file with --script (make: SCRIPT=...)")
    return ModelInfo(name=name or path.stem, path=path.resolve(), kind=SCRIPT_KIND, script=path.resolve(),
                     sha256=sha256_of(path), size_mib=path.stat().st_size / 1024**2)


def example_models() -> list[Path]:
    """The checked-in example models, smallest first in name order."""
    found = sorted(EXAMPLES_DIR.glob("*.onnx"))
    if not found:
        raise ModelError(f"no example models in {EXAMPLES_DIR}; restore them with `git checkout examples/models` "
                         "or give a model (MODEL=...)")
    return found
