"""Bench a .tflite model with the LiteRT interpreter (ai-edge-litert), num_threads = ceil(CPUS).

Every input's first dim is resized to BATCH_SIZE before the one allocation (part of load_s, as a session's
creation is for ORT). Inputs are random, built from the interpreter's input details outside the timed region (token
ids and masks with the values the harness read from the ONNX graph, HARNESS_INPUT_VALUES; DIMS is in the shapes the
conversion fixed).
PER_OP=1: ai_edge_litert's Python Interpreter offers no op profiler (TFLite's op profiling lives in the
benchmark_model binary), so this script runs no per-op phase and says so in the profile directory.
Usage: python tflite_bench.py MODEL [--iterations N] [--warmup N] [--batch-size N] [--threads N]
"""

from __future__ import annotations

from importlib.metadata import version

import numpy as np
from ai_edge_litert.interpreter import Interpreter

from harness import (
    input_values,
    parse_args,
    profile_dir,
    random_input,
    report_metrics,
    timed_load,
    timed_loop,
    write_profile_meta,
)

NO_OP_PROFILER = ("ai_edge_litert's Python Interpreter has no op profiler (TFLite's benchmark_model binary has "
                  "--enable_op_profiling); no per-op table for .tflite models")


def onnx_name(detail: dict) -> str:
    """The ONNX input a converted model's input was: onnx2tf names it `serving_default_<name>:0`."""
    name = str(detail["name"]).removeprefix("serving_default_")
    return name.rsplit(":", 1)[0] if name.rsplit(":", 1)[-1].isdigit() else name


def main() -> None:
    args = parse_args(__doc__)

    def load() -> Interpreter:
        interpreter = Interpreter(model_path=args.model, num_threads=args.threads)
        for detail in interpreter.get_input_details():
            if len(detail["shape"]) and detail["shape"][0] != args.batch_size:
                interpreter.resize_tensor_input(detail["index"], [args.batch_size, *detail["shape"][1:]])
        try:
            interpreter.allocate_tensors()
        except RuntimeError as exc:  # e.g. a graph whose reshapes fix the batch
            raise SystemExit(f"model cannot run with batch size {args.batch_size}: {exc}") from exc
        return interpreter

    interpreter = timed_load(load)
    rng = np.random.default_rng(0)
    values = input_values()  # token ids' range, masks' fill, read from the ONNX graph it was converted from
    shapes = []
    for detail in interpreter.get_input_details():
        shape = [int(dim) for dim in detail["shape"]]
        data = random_input(detail["dtype"], shape, rng, values.get(onnx_name(detail)))
        interpreter.set_tensor(detail["index"], data)
        shapes.append(f"{detail['name']}={'x'.join(map(str, shape))}")
    # the shapes the interpreter really runs, in --shape's form, so a result shows the batch took effect
    report_metrics(batch_size=args.batch_size, threads=args.threads, input_shapes=",".join(shapes), engine="litert",
                   engine_version=version("ai-edge-litert"))
    timed_loop(interpreter.invoke, args.warmup, args.iterations)
    directory = profile_dir()
    if directory is not None:
        write_profile_meta(directory, framework="litert", unsupported=NO_OP_PROFILER)


if __name__ == "__main__":
    main()
