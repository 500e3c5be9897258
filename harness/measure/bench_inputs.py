"""The inputs of bench scripts that feed numpy arrays (onnxruntime, LiteRT): random data of each input's shape, or
the values the graph says it accepts (token ids, masks), or the INPUTS file's arrays, as the runner names them."""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from harness.measure.report_protocol import INPUTS_ENV, VALUES_ENV


def random_input(dtype: type, shape: list[int], rng: np.random.Generator,
                 values: dict[str, int] | None = None) -> np.ndarray:
    """Data the input accepts. `values` is what its graph tells (harness.models.token_inputs): {"high": n}, ids in
    [0, n); {"fill": v}, every element v. Without it the full integer range would overflow id and index inputs, so
    ints stay small."""
    if values and "fill" in values:
        return np.full(shape, values["fill"], dtype=dtype)
    if values and "high" in values:
        return rng.integers(0, values["high"], shape).astype(dtype)
    if np.issubdtype(dtype, np.floating):
        return rng.standard_normal(shape).astype(dtype)
    if dtype is np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    return rng.integers(0, 10, shape).astype(dtype)


def input_values() -> dict[str, Any]:
    """The accepted values of the model's inputs by name, as the runner passes them (empty outside the harness)."""
    return json.loads(os.environ.get(VALUES_ENV) or "{}")


def given_inputs() -> dict[str, np.ndarray] | None:
    """The INPUTS file's arrays by input name, or None when the run is fed random inputs (the session checked the
    file against the model before its first run)."""
    path = os.environ.get(INPUTS_ENV)
    if not path:
        return None
    with np.load(path, allow_pickle=False) as archive:
        return {name: archive[name] for name in archive.files}
