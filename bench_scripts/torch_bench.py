"""Bench a PyTorch model on the CPU with torch.set_num_threads(ceil(CPUS)) and interop threads 1.

MODEL may be: a TorchScript file (.pt/.pth, torch.jit.save), an ExportedProgram (.pt2, torch.export.save), or
a Python file defining `build()` that returns (module, example_inputs_tuple) for a batch of one.
TorchScript carries no input signature: give it with --shape NAME=1x3x224x224 (the first dim is the batch).
With PER_OP=1 the runner names a profile directory: after the timed phase torch.profiler records the per-op phase.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import torch

from harness import (
    parse_args,
    parse_pairs,
    profile_dir,
    profiled_loop,
    report_metrics,
    timed_load,
    timed_loop,
    write_profile_meta,
)

# record_function label around each profiled call (harness.analysis.per_op reads it)
ITERATION_MARK = "harness_iteration"


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
    report_metrics(batch_size=batch, threads=args.threads)
    with torch.inference_mode():
        timed_loop(lambda: model(*inputs), args.warmup, args.iterations)
        directory = profile_dir()
        if directory is not None:
            profile_ops(lambda: model(*inputs), args, directory)


def profile_ops(infer: Any, args: Any, directory: Path) -> None:
    """torch.profiler around the per-op phase only, with shapes (for MACs); each call marked ITERATION_MARK."""
    from torch.profiler import ProfilerActivity, profile, record_function

    def marked() -> None:
        with record_function(ITERATION_MARK):
            infer()

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as profiler:
        meta = profiled_loop(marked, args.warmup, args.iterations)
    profiler.export_chrome_trace(str(directory / "torch_trace.json"))
    write_profile_meta(directory, framework="torch", trace="torch_trace.json", **meta)


if __name__ == "__main__":
    main()
