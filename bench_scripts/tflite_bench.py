"""Bench a .tflite model with the LiteRT interpreter (ai-edge-litert), num_threads = ceil(CPUS).

Inputs are random, built from the interpreter's input details outside the timed region.
"""

from __future__ import annotations

import numpy as np
from ai_edge_litert.interpreter import Interpreter

from harness.benchloop import parse_args, report, timed_load, timed_loop


def main() -> None:
    args = parse_args(__doc__)

    def load() -> Interpreter:
        interpreter = Interpreter(model_path=args.model, num_threads=args.threads)
        interpreter.allocate_tensors()
        return interpreter

    interpreter = timed_load(load)
    rng = np.random.default_rng(0)
    for detail in interpreter.get_input_details():
        shape = [args.batch_size, *detail["shape"][1:]] if len(detail["shape"]) else []
        if list(detail["shape"]) != shape:
            interpreter.resize_tensor_input(detail["index"], shape)
    interpreter.allocate_tensors()
    for detail in interpreter.get_input_details():
        dtype = detail["dtype"]
        if np.issubdtype(dtype, np.floating):
            data = rng.standard_normal(detail["shape"]).astype(dtype)
        else:
            info = np.iinfo(dtype)
            data = rng.integers(info.min, info.max, detail["shape"], endpoint=True).astype(dtype)
        interpreter.set_tensor(detail["index"], data)
    report(batch_size=args.batch_size, threads=args.threads)
    timed_loop(interpreter.invoke, args.warmup, args.iterations)


if __name__ == "__main__":
    main()
