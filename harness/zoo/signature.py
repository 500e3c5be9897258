"""The inputs and outputs of a zoo model that is not one float `input` with a dynamic batch: several named inputs,
integer inputs, dynamic dimensions besides the batch (a BERT's seq, a detector's height and width). Torch-free data,
like the rest of the name grammar; the exporter turns it into torch.export's dynamic shapes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ZooInput:
    """One named input of a model with a signature: its dims (an int is fixed, a name is a dynamic dimension whose
    name the export keeps) and its element type."""

    name: str
    dims: tuple[int | str, ...]
    dtype: str = "float32"


@dataclass(frozen=True)
class DynamicDim:
    """A dynamic dimension besides the batch: the size an export's example, a TorchScript trace and `input_shape`
    use, and the range the export admits (None: the exporter's own bound)."""

    name: str
    default: int
    min: int | None = None
    max: int | None = None


@dataclass(frozen=True)
class Signature:
    """Named inputs and outputs of a model that is not one float `input` with a dynamic batch (several inputs,
    integer inputs, dynamic dimensions besides the batch). Every input's first dim is the dynamic `batch`."""

    inputs: tuple[ZooInput, ...]
    outputs: tuple[str, ...]
    dims: tuple[DynamicDim, ...] = ()

    def shape(self, item: ZooInput, batch: int) -> tuple[int, ...]:
        """The concrete shape of `item` at `batch` and every dynamic dim at its default."""
        sizes = {"batch": batch, **{dim.name: dim.default for dim in self.dims}}
        return tuple(sizes[dim] if isinstance(dim, str) else dim for dim in item.dims)

    def describe(self) -> str:
        """`input_ids[batch,seq] int64, ... (seq 128)`: what `harness zoo list` shows as the input."""
        inputs = ", ".join(f"{item.name}[{','.join(map(str, item.dims))}] {item.dtype}" for item in self.inputs)
        defaults = ", ".join(f"{dim.name} {dim.default}" for dim in self.dims)
        return f"{inputs} ({defaults})" if defaults else inputs

    def as_dict(self) -> dict[str, Any]:
        return {
            "inputs": [{"name": item.name, "dims": list(item.dims), "dtype": item.dtype} for item in self.inputs],
            "outputs": list(self.outputs),
            "dims": {dim.name: {"default": dim.default, "min": dim.min, "max": dim.max} for dim in self.dims},
        }
