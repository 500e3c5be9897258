"""Export zoo networks to ONNX or TorchScript into a cache keyed by everything that changes the bytes.

ONNX goes through torch's dynamo exporter (`torch.onnx.export(..., dynamo=True)`): it is the default and
maintained path since torch 2.9 (the TorchScript-based one is deprecated), its `onnxscript` dependency
installs from the package index with the zoo extra, and it folds BatchNorm into the convolutions, which is
the graph a deployed model has. The batch dimension is left dynamic so BATCH_SIZE works with any export. A model
with a signature (registry.Signature: BERT's input_ids and attention_mask, a detector's images) keeps its named
inputs and outputs and its other dynamic dimensions (seq, height, width) under their own names.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

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


def example_inputs(spec: ZooSpec, batch: int) -> tuple[torch.Tensor, ...]:
    """One example per input at `batch` (dynamic dims at their defaults): random normal floats; integer inputs all
    ones (a valid token id and an unmasked position, the only values a BERT's inputs need to trace)."""
    if spec.signature is None:
        return (torch.randn(batch, *spec.input_shape[1:]),)
    return tuple(
        torch.ones(spec.signature.shape(item, batch), dtype=torch.int64) if item.dtype == "int64"
        else torch.randn(spec.signature.shape(item, batch))
        for item in spec.signature.inputs
    )


def _signature_io(spec: ZooSpec) -> tuple[list[str], list[str], Any]:
    """Input names, output names and torch.export's dynamic shapes: the batch, plus a signature's named dims (one
    Dim object per name, so inputs sharing `seq` share it)."""
    if spec.signature is None:
        return ["input"], ["output"], ({0: torch.export.Dim("batch")},)
    dims = {"batch": torch.export.Dim("batch")}
    for dim in spec.signature.dims:
        bounds = {key: value for key, value in (("min", dim.min), ("max", dim.max)) if value is not None}
        dims[dim.name] = torch.export.Dim(dim.name, **bounds)
    shapes = {item.name: {axis: dims[name] for axis, name in enumerate(item.dims) if isinstance(name, str)}
              for item in spec.signature.inputs}
    return [item.name for item in spec.signature.inputs], list(spec.signature.outputs), shapes


def _export_onnx(spec: ZooSpec, target: Path) -> None:
    net = build(spec)
    # Batch 2 in the example: torch.export specialises a dimension whose example size is 1.
    example = example_inputs(spec, 2)
    input_names, output_names, dynamic_shapes = _signature_io(spec)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporter's notes about its own internals; nothing a user can act on
        torch.onnx.export(
            net,
            example,
            str(target),
            dynamo=True,
            opset_version=OPSET,
            external_data=False,
            input_names=input_names,
            output_names=output_names,
            dynamic_shapes=dynamic_shapes,
            verbose=False,
        )


def _export_torchscript(spec: ZooSpec, target: Path) -> None:
    net = build(spec)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # torch.jit is deprecated upstream but still what TorchScript users load
        traced = torch.jit.trace(net, example_inputs(spec, 1))
    traced.save(str(target))


def export_float(spec: ZooSpec, fmt: str) -> Path:
    """The cached export of a float zoo model, built on first use."""
    path = cached_path(spec, fmt)
    if not path.exists():
        export = _export_onnx if fmt == "onnx" else _export_torchscript
        write_model_atomically(path, lambda tmp: export(spec, tmp))
    return path
