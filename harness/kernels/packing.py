"""Designed kernels into probe graphs (harness.kernels.designed): which kernels share a pack, and the shapes that
map an engine's unnamed rows back to their kernel."""

from __future__ import annotations

from collections.abc import Sequence

import onnx

from harness.kernels.designed import Kernel, macs
from harness.kernels.designed_graphs import kernel_model

PACK_MACS = 400_000_000
PACK_KERNELS = 24


def tensor_shapes(model: onnx.ModelProto) -> dict[str, set[tuple[int, ...]]]:
    """Each designed kernel of a graph (its name before the `/` of its tensors') -> the shapes of its tensors: graph
    inputs, outputs and, inferred, those between its nodes."""
    inferred = onnx.shape_inference.infer_shapes(model).graph
    found: dict[str, set[tuple[int, ...]]] = {}
    for value in [*inferred.input, *inferred.output, *inferred.value_info]:
        if "/" in value.name and value.type.tensor_type.HasField("shape"):
            shape = tuple(d.dim_value for d in value.type.tensor_type.shape.dim)
            found.setdefault(value.name.split("/")[0], set()).add(shape)
    return found


def boundary_shapes(kernel: Kernel) -> set[tuple[int, ...]]:
    """The shapes of a kernel's tensors (tensor_shapes)."""
    return tensor_shapes(kernel_model(kernel)).get(kernel.name, set())


def pack(kernels: Sequence[Kernel], max_macs: int = PACK_MACS, max_kernels: int = PACK_KERNELS) -> list[list[Kernel]]:
    """Kernels into packs, in order: a pack takes a kernel while it stays under `max_macs` and `max_kernels` and no
    kernel of it has a tensor of a shape the newcomer has (so an engine's unnamed rows map back by shape); a kernel
    that fits no open pack opens the next one."""
    packs: list[list[Kernel]] = []
    seen: list[set[tuple[int, ...]]] = []
    totals: list[int] = []
    for kernel in kernels:
        shapes, cost = boundary_shapes(kernel), macs(kernel)
        index = next((i for i, members in enumerate(packs) if len(members) < max_kernels
                      and totals[i] + cost <= max_macs and not shapes & seen[i]), None)
        if index is None:
            packs.append([])
            seen.append(set())
            totals.append(0)
            index = len(packs) - 1
        packs[index].append(kernel)
        seen[index] |= shapes
        totals[index] += cost
    return packs
