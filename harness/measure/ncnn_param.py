"""Reading an ncnn .param (a model given as MODEL, or one pnnx wrote): its text, bounded, and its layer lines.

Standard library only: bench_scripts/ncnn_bench.py reads the .param with it inside the run's limits (param_layers,
through the package's face).
"""

from __future__ import annotations

from pathlib import Path

from harness.core.bounds import read_bounded, too_large
from harness.core.errors import ModelError

MAX_PARAM_BYTES = 16 * 1024 * 1024
"""The most bytes of a .param read: it is ncnn's text list of layers (the weights are in the .bin), about 100 bytes a
layer, so even a model of tens of thousands of layers takes a few MiB; a larger one is refused in one line."""


def param_text(path: Path) -> str:
    """The .param's text; a ModelError line past MAX_PARAM_BYTES."""
    data = read_bounded(path, MAX_PARAM_BYTES)
    if data is None:
        raise ModelError(too_large(path, MAX_PARAM_BYTES, "an ncnn .param", "MAX_PARAM_BYTES"))
    return data.decode("utf-8", errors="replace")


def layers(text: str) -> list[list[str]]:
    """The layer lines of an ncnn .param, split on whitespace (after the magic number and the counts line)."""
    return [line.split() for line in text.splitlines()[2:] if line.strip()]


def param_layers(path: Path) -> list[list[str]]:
    """A bench script's read of its .param's layer lines: past MAX_PARAM_BYTES the run ends with that one line."""
    try:
        return layers(param_text(path))
    except ModelError as err:
        raise SystemExit(str(err)) from None
