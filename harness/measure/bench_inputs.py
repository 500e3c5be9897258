"""Random inputs for bench scripts that feed numpy arrays (onnxruntime, LiteRT)."""

from __future__ import annotations

import numpy as np


def random_input(dtype: type, shape: list[int], rng: np.random.Generator) -> np.ndarray:
    """Data any input accepts: the full integer range would overflow id and index inputs, so ints stay small."""
    if np.issubdtype(dtype, np.floating):
        return rng.standard_normal(shape).astype(dtype)
    if dtype is np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    return rng.integers(0, 10, shape).astype(dtype)
