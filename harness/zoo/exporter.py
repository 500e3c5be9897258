"""Export zoo networks to ONNX or TorchScript into a cache keyed by everything that changes the bytes.

ONNX goes through torch's dynamo exporter (`torch.onnx.export(..., dynamo=True)`): it is the default and
maintained path since torch 2.9 (the TorchScript-based one is deprecated), its `onnxscript` dependency
installs from the package index with the zoo extra, and it folds BatchNorm into the convolutions, which is
the graph a deployed model has. The batch dimension is left dynamic so BATCH_SIZE works with any export.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import onnxscript  # noqa: F401  (used by torch's dynamo exporter; imported here so its absence names the extra)
import torch
import torchvision

from harness.zoo.build import SEED, build
from harness.zoo.cache import keyed_path, write_model_atomically
from harness.zoo.registry import ZooSpec

OPSET = 18
CACHE_FORMAT = 1  # bump when the export recipe changes, so stale cache entries are never reused
SUFFIXES = {"onnx": ".onnx", "torchscript": ".pt"}


def cached_path(spec: ZooSpec, fmt: str) -> Path:
    """Keyed by the name, parameters, input, format, exporter settings and library versions."""
    recipe = {
        "cache_format": CACHE_FORMAT,
        "spec": spec.as_dict(),
        "fmt": fmt,
        "opset": OPSET,
        "seed": SEED,
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
    }
    return keyed_path(spec.name, SUFFIXES[fmt], recipe)


def _export_onnx(spec: ZooSpec, target: Path) -> None:
    net = build(spec)
    # Batch 2 in the example: torch.export specialises a dimension whose example size is 1.
    example = torch.randn(2, *spec.input_shape[1:])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporter's notes about its own internals; nothing a user can act on
        torch.onnx.export(
            net,
            (example,),
            str(target),
            dynamo=True,
            opset_version=OPSET,
            external_data=False,
            input_names=["input"],
            output_names=["output"],
            dynamic_shapes=({0: torch.export.Dim("batch")},),
            verbose=False,
        )


def _export_torchscript(spec: ZooSpec, target: Path) -> None:
    net = build(spec)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # torch.jit is deprecated upstream but still what TorchScript users load
        traced = torch.jit.trace(net, torch.randn(*spec.input_shape))
    traced.save(str(target))


def export_float(spec: ZooSpec, fmt: str) -> Path:
    """The cached export of a float zoo model, built on first use."""
    path = cached_path(spec, fmt)
    if not path.exists():
        export = _export_onnx if fmt == "onnx" else _export_torchscript
        write_model_atomically(path, lambda tmp: export(spec, tmp))
    return path
