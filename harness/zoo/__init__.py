"""Model zoo: standard edge architectures with random weights, exported on first use and cached.

Nothing is downloaded. Torch is imported only when a model is built, so `is_zoo_name` and
`list_models` work on the torch-free core install; building needs the `zoo` extra (`make setup-zoo`).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from harness.core.errors import ModelError
from harness.zoo.cache import cache_dir, cached_files
from harness.zoo.registry import FAMILIES, ZooSpec, get_family, is_zoo_name, listed_specs, parse

__all__ = ["FAMILIES", "ZOO_EXTRA_MODULES", "cache_dir", "export", "is_zoo_name", "list_models", "parse"]

FORMATS = ("onnx", "torchscript")
ZOO_EXTRA_MODULES = ("torch", "torchvision", "onnxscript")
"""What the zoo extra installs (make setup-zoo); building any zoo model imports them."""


def list_models() -> list[dict[str, Any]]:
    """The published variants of every family, with their input, provenance and cached exports."""
    models = []
    for spec in listed_specs():
        family = get_family(spec.family)
        models.append({**spec.as_dict(), "grammar": family.grammar, "source": family.source,
                       "description": family.description, "cached": [str(p) for p in cached_files(spec.name)]})
    return models


def _exporter() -> Any:
    try:
        return importlib.import_module("harness.zoo.exporter")
    except ModuleNotFoundError as err:
        if err.name in ZOO_EXTRA_MODULES:
            raise ModelError(f"zoo models need {err.name}: install the zoo extra: make setup-zoo") from err
        raise


def _export_quantized(spec: ZooSpec, exporter: Any) -> Path:
    import onnxruntime

    from harness.zoo.quantize import RECIPE, quantize

    base = exporter.export_float(parse(spec.base_name), "onnx")
    path = exporter.cached_path(spec, "onnx", {"onnxruntime": onnxruntime.__version__, **RECIPE})
    return path if path.exists() else quantize(base, spec.quant, path)


def export(name: str, fmt: str = "onnx") -> Path:
    """The cached file of zoo model `name` in `fmt` (onnx | torchscript), built on first use."""
    if fmt not in FORMATS:
        raise ModelError(f"zoo export format {fmt!r} is not one of {', '.join(FORMATS)}; pick one of those")
    spec = parse(name)
    if spec.quant and fmt != "onnx":
        raise ModelError(f"{spec.name} is an onnxruntime int8 variant and exists as onnx only; drop the format")
    exporter = _exporter()
    return _export_quantized(spec, exporter) if spec.quant else exporter.export_float(spec, fmt)
