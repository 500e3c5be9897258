"""Bench a PyTorch model on the CPU with torch.set_num_threads(ceil(CPUS)) and interop threads 1.

MODEL may be: a TorchScript file (.pt/.pth, torch.jit.save), an ExportedProgram (.pt2, torch.export.save), or
a Python file defining `build()` that returns (module, example_inputs_tuple) for a batch of one.
TorchScript carries no input signature: give it with --shape NAME=1x3x224x224 (the first dim is the batch).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import torch

from harness.benchloop import parse_args, parse_pairs, report, timed_load, timed_loop


def load(path: Path) -> tuple[Any, tuple[torch.Tensor, ...] | None]:
    """The callable model and, where the file carries them, example inputs (batch of one).

    An ExportedProgram is specialised to its example's shapes, so it keeps its own batch size."""
    if path.suffix == ".py":
        spec = importlib.util.spec_from_file_location("user_model", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        model, example = module.build()
        return model.eval(), tuple(example)
    if path.suffix == ".pt2":
        program = torch.export.load(str(path))
        return program.module(), tuple(program.example_inputs[0]) if program.example_inputs else None
    return torch.jit.load(str(path), map_location="cpu").eval(), None


def batched(example: tuple[torch.Tensor, ...], batch: int) -> tuple[torch.Tensor, ...]:
    """Random inputs shaped like the example with the first dim set to BATCH_SIZE."""
    return tuple(torch.randn((batch, *t.shape[1:]), dtype=t.dtype) if t.is_floating_point()
                 else torch.randint(0, 10, (batch, *t.shape[1:]), dtype=t.dtype) for t in example)


def main() -> None:
    args = parse_args(__doc__)
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    model, example = timed_load(lambda: load(Path(args.model)))
    shapes = parse_pairs(args.shape, "--shape")
    if shapes:
        example = tuple(torch.empty([int(d) for d in shape.split("x")]) for shape in shapes.values())
    if example is None:
        raise SystemExit(f"{args.model}: TorchScript files carry no input shape; pass --shape x=1x3x224x224 after --")
    batch = example[0].shape[0] if Path(args.model).suffix == ".pt2" else args.batch_size
    inputs = batched(example, batch)
    report(batch_size=batch, threads=args.threads)
    with torch.inference_mode():
        timed_loop(lambda: model(*inputs), args.warmup, args.iterations)


if __name__ == "__main__":
    main()
