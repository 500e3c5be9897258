"""What a model's runs are fed, settled before the first run: the sizes of its dynamic dimensions (DIMS) and the
real inputs of INPUTS, checked against the inputs its graph declares (its facts' `inputs`).

A dynamic dimension left without a size, or an inputs file that does not fit the model, would fail every run of the
session the same way; here it stops the session once, in one line naming the variable that fixes it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.core.errors import ConfigError, ModelError
from harness.measure.report_protocol import DIMS_ENV, VALUES_ENV


@dataclass(frozen=True)
class FeedRequest:
    """What the profile asks the models be fed: DIMS as {name: size}, the INPUTS file (empty: random inputs) and
    BATCH_SIZE, the size of a dynamic first dimension."""

    dims: Mapping[str, int] = field(default_factory=dict)
    inputs_file: str = ""
    batch_size: int = 1


def dims_text(sizes: Mapping[str, int]) -> str:
    """{seq: 128} -> 'seq=128', names in order: a run's `dims` condition and its script's HARNESS_DIMS."""
    return " ".join(f"{name}={size}" for name, size in sorted(sizes.items()))


def dynamic_sizes(model: str, inputs: list[dict[str, Any]], dims: Mapping[str, int],
                  strict: bool = True) -> dict[str, int]:
    """The sizes DIMS gives the model's dynamic dimensions after the first (the batch, which BATCH_SIZE sizes); a
    dimension DIMS leaves without a size is a ModelError naming it and the setting that fixes it, unless not
    `strict` (a user's bench script, which may size it from its own arguments)."""
    sizes: dict[str, int] = {}
    for item in inputs:
        for index, dim in enumerate(item["shape"][1:], start=1):
            if isinstance(dim, int) and dim > 0:
                continue
            if isinstance(dim, str) and dim in dims:
                sizes[dim] = dims[dim]
                continue
            if not strict:
                continue
            if not isinstance(dim, str):
                raise ModelError(f"{model}: input {item['name']!r} has an unnamed dynamic dimension (index {index}), "
                                 "which DIMS cannot size; re-export the model with a fixed or named dimension, or feed "
                                 "real inputs with INPUTS=file.npz")
            raise ModelError(f"{model}: input {item['name']!r} has dynamic dimension {dim!r} (index {index}); set "
                             f'DIMS="{dim}=N" (make profile ... DIMS="{dim}=128", or --dim {dim}=128)')
    return sizes


def unused_dims(dims: Mapping[str, int], used: list[Mapping[str, int]]) -> list[str]:
    """The DIMS names no model of the session has: one profile may serve many models, so they are a note, not an
    error, but a misspelt name must not pass in silence."""
    return sorted(set(dims) - {name for sizes in used for name in sizes})


def load_inputs(path: str) -> tuple[dict[str, Any], str]:
    """The arrays of an INPUTS file by name, and the file's sha256; ConfigError naming INPUTS for a file that is
    missing or not an .npz of plain arrays."""
    import numpy as np

    file = Path(path).expanduser()
    if not file.is_file():
        raise ConfigError(f"INPUTS={path}: no such file; give an .npz written by numpy.savez with one array per "
                          "model input, named after it")
    try:
        with np.load(file, allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
    except Exception as err:  # numpy raises ValueError, OSError, BadZipFile, ... for what is not a plain .npz
        raise ConfigError(f"INPUTS={path} is not a readable .npz of plain arrays ({type(err).__name__}); write it "
                          "with numpy.savez(path, input_name=array, ...)") from None
    if not arrays:
        raise ConfigError(f"INPUTS={path} holds no arrays; write one per model input with numpy.savez")
    return arrays, hashlib.sha256(file.read_bytes()).hexdigest()


def fed_sizes(model: str, inputs: list[dict[str, Any]], arrays: Mapping[str, Any], request: FeedRequest
              ) -> dict[str, int]:
    """Checks the INPUTS arrays against the model's inputs (each present, of its dtype and rank, its fixed
    dimensions as the model has them, a dynamic first one BATCH_SIZE) and returns the sizes they give the named
    dynamic dimensions after the first; ConfigError naming INPUTS, the file, the input and the fix otherwise."""
    where = f"INPUTS={request.inputs_file}"
    sizes: dict[str, int] = {}
    for item in inputs:
        name, shape = item["name"], item["shape"]
        if name not in arrays:
            raise ConfigError(f"{where} has no array {name!r}, an input of {model}; add it (numpy.savez(path, "
                              f"{name}=array, ...)) or drop INPUTS for random inputs")
        array = arrays[name]
        if item["dtype"] and array.dtype.name != item["dtype"]:
            raise ConfigError(f"{where}: array {name!r} is {array.dtype.name}, but {model} takes {item['dtype']}; "
                              f"save it as {item['dtype']} (array.astype('{item['dtype']}'))")
        if array.ndim != len(shape):
            raise ConfigError(f"{where}: array {name!r} has shape {list(array.shape)}, but {model} takes rank "
                              f"{len(shape)} {shape}; save it with that rank")
        for index, (dim, size) in enumerate(zip(shape, array.shape, strict=True)):
            wanted = dim if isinstance(dim, int) and dim > 0 else request.batch_size if index == 0 else None
            if wanted is not None and size != wanted:
                fix = f"set BATCH_SIZE={size} or save {wanted} rows" if index == 0 and wanted != dim else \
                    f"save it with size {wanted} there"
                raise ConfigError(f"{where}: array {name!r} has size {size} at index {index}, but {model} takes "
                                  f"{wanted}; {fix}")
            if index and isinstance(dim, str) and sizes.setdefault(dim, size) != size:
                raise ConfigError(f"{where}: array {name!r} gives dimension {dim!r} size {size}, another "
                                  f"input {sizes[dim]}; save the arrays with one size for {dim!r}")
    return sizes


def script_env(sizes: Mapping[str, int], inputs: list[dict[str, Any]]) -> tuple[tuple[str, str], ...]:
    """The variables a bench script reads to build its inputs: the dimension sizes and the values the graph tells
    its integer inputs accept (harness.models.token_inputs)."""
    values = {item["name"]: item["values"] for item in inputs if item.get("values")}
    env = []
    if sizes:
        env.append((DIMS_ENV, dims_text(sizes)))
    if values:
        env.append((VALUES_ENV, json.dumps(values)))
    return tuple(env)
