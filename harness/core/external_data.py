"""An ONNX model's external data comes from files in the model's own folder, and from nowhere else.

A model is a file users download. ONNX lets a tensor keep its bytes in another file (data_location EXTERNAL, an
external_data entry `location` relative to the model's folder); a location that is absolute, climbs out with `..`,
leads out through a symlink, or names no file would have a run read something that is not the model's. The facts
reader refuses such a model, the harness checks again wherever it resolves a model for a run, and the runner once
more before it starts the script (inside a container, against the files mounted there). Standard library only,
since the runner imports it: reading the locations out of a graph takes onnx (harness.models.facts)."""

from __future__ import annotations

import os

from harness.core.errors import ModelError

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (the runner's start pays for every import)
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

ExternalData = tuple[tuple[str, str], ...]
"""(tensor, location) per external-data file of a model, one tensor named per file."""


def _why_not(folder: str, location: str) -> str | None:
    """Why `location` is not a file in `folder` (a real path), or None when it is."""
    if os.path.isabs(location):
        return "an absolute path"
    if os.path.normpath(location).split(os.sep)[0] == os.pardir:
        return "a path that climbs out of the model's folder with '..'"
    real = os.path.realpath(os.path.join(folder, location))
    if os.path.commonpath([folder, real]) != folder:
        return f"a path that leads out of the model's folder through a symlink (to {real})"
    if not os.path.exists(real):
        return "a file that does not exist"
    return None if os.path.isfile(real) else "not a file"


def model_folder(model: str) -> str:
    """The real path of the folder the model file sits in: where its external data must be."""
    return os.path.realpath(os.path.dirname(os.path.abspath(model)))


def confine(model: str, external: Iterable[Sequence[str]]) -> ExternalData:
    """Each (tensor, location) of `model` checked (ModelError, one line naming the model, the tensor and the path, for
    the first that is not a file in the model's folder); one (tensor, location) per distinct location, in order."""
    folder, kept = model_folder(model), {}
    for tensor, location in external:
        if location in kept:
            continue
        why = _why_not(folder, location)
        if why is not None:
            raise ModelError(f"model {model}: tensor {tensor!r} keeps its data at {location!r}, {why}; an ONNX model "
                             f"reads external data only from files in its own folder ({folder}): put the file there "
                             "and give its location relative to the model")
        kept[location] = tensor
    return tuple((tensor, location) for location, tensor in kept.items())


def data_files(model: str, external: Iterable[Sequence[str]]) -> list[str]:
    """The paths of a model's external-data files as it names them (beside the model, not yet checked)."""
    folder = os.path.dirname(model)
    return [os.path.join(folder, location) for _, location in external]
