"""Model zoo: standard edge architectures with random weights, exported on first use and cached.

Nothing is downloaded. Torch is imported only when a model is built, so `is_zoo_name` and
`list_models` work on the torch-free core install; building needs the `zoo` extra (`make setup-zoo`).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.core.errors import ModelError
from harness.zoo.cache import cache_dir, cached_files, keyed_path
from harness.zoo.registry import FAMILIES, ZooSpec, family_key, get_family, is_zoo_name, listed_specs, parse

__all__ = ["FAMILIES", "ZOO_EXTRA_MODULES", "cache_dir", "export", "extra_missing", "is_zoo_name", "list_models",
           "needs_torch", "parse", "unbuildable"]

FORMATS = ("onnx", "torchscript")
ZOO_EXTRA_MODULES = ("torch", "torchvision", "onnxscript")
"""What the zoo extra installs (make setup-zoo); building any zoo model imports them."""


def list_models() -> list[dict[str, Any]]:
    """The published variants of every family, with their input, provenance and cached exports."""
    models = []
    for spec in listed_specs():
        family = get_family(spec.family)
        models.append({**spec.as_dict(), "input": spec.input_text(), "grammar": family.grammar, "source": family.source,
                       "description": family.description, "cached": [str(p) for p in cached_files(spec.name)]})
    return models


def _exporter() -> Any:
    try:
        return importlib.import_module("harness.zoo.exporter")
    except ModuleNotFoundError as err:
        if err.name in ZOO_EXTRA_MODULES:
            raise ModelError(f"zoo models need {err.name}: install the zoo extra: make setup-zoo") from err
        raise


def _export_float(spec: ZooSpec, fmt: str) -> Path:
    if get_family(spec.family).builder == "onnx":
        if fmt != "onnx":
            raise ModelError(f"{spec.name} is built as an ONNX graph and exists as onnx only; drop the format")
        from harness.zoo.nb201 import export_onnx  # numpy and onnx only: no zoo extra needed

        return export_onnx(spec)
    return _exporter().export_float(spec, fmt)


def _export_quantized(spec: ZooSpec, mode: str) -> Path:
    """The int8 variant of `spec` in quantization `mode` (its spec.quant), keyed by the float file's own cached name
    (which keys its recipe) and the quantization's."""
    import onnxruntime

    from harness.zoo.quantize import RECIPE, quantize

    base = _export_float(parse(spec.base_name), "onnx")
    path = keyed_path(spec.name, ".onnx", {"base": base.name, "onnxruntime": onnxruntime.__version__, **RECIPE})
    return path if path.exists() else quantize(base, mode, path)


def export(name: str, fmt: str = "onnx") -> Path:
    """The cached file of zoo model `name` in `fmt` (onnx | torchscript), built on first use."""
    if fmt not in FORMATS:
        raise ModelError(f"zoo export format {fmt!r} is not one of {', '.join(FORMATS)}; pick one of those")
    spec = parse(name)
    if spec.quant and fmt != "onnx":
        raise ModelError(f"{spec.name} is an onnxruntime int8 variant and exists as onnx only; drop the format")
    return _export_quantized(spec, spec.quant) if spec.quant else _export_float(spec, fmt)


def needs_torch(name: str) -> bool:
    """True when the zoo name `name` is built through torch (the zoo extra)."""
    family = family_key(name)
    return family is not None and get_family(family).builder == "torch"


def extra_missing() -> bool:
    """Whether a module of the zoo extra (torch, torchvision, onnxscript) is not installed."""
    return any(importlib.util.find_spec(module) is None for module in ZOO_EXTRA_MODULES)


def unbuildable(names: Sequence[str]) -> list[str]:
    """The zoo names among `names` (no file of that name exists) that are built through torch while the zoo extra is
    missing: a session of them would fail at its first export of one."""
    if not extra_missing():
        return []
    return [name for name in names if not Path(name).expanduser().exists() and needs_torch(name)]
