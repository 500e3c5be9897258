"""Bench an ONNX model with onnxruntime on the CPU: intra-op threads = ceil(CPUS), inter-op 1.

Under a CFS quota (HARNESS_CPU_MODE=quota) the intra-op threads do not spin while waiting for work: spinning would
burn the quota that the inferences need, and inflate cpu_s.

Inputs are random, built from the model's input signature outside the timed region.
Usage: python onnx_bench.py MODEL [--iterations N] [--warmup N] [--batch-size N] [--dim NAME=SIZE]
"""

from __future__ import annotations

import os

import numpy as np
import onnxruntime as ort

from harness.bench_inputs import random_input
from harness.benchloop import parse_args, parse_pairs, report, resolve_shape, timed_load, timed_loop

# onnxruntime's type strings -> numpy dtypes for the random inputs
DTYPES = {
    "tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
    "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(int8)": np.int8, "tensor(uint8)": np.uint8,
    "tensor(bool)": np.bool_,
}


def main() -> None:
    args = parse_args(__doc__)
    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    spinning = os.environ.get("HARNESS_CPU_MODE") != "quota"
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
    session = timed_load(lambda: ort.InferenceSession(args.model, options, providers=["CPUExecutionProvider"]))
    sizes = parse_pairs(args.dim, "--dim")
    rng = np.random.default_rng(0)
    feeds = {}
    for item in session.get_inputs():
        if item.type not in DTYPES:
            raise SystemExit(f"input {item.name!r} has type {item.type}, which this script cannot generate")
        shape = resolve_shape(item.name, list(item.shape), args.batch_size, sizes)
        feeds[item.name] = random_input(DTYPES[item.type], shape, rng)
    report(batch_size=args.batch_size, threads=args.threads, intra_op_spinning=spinning)
    timed_loop(lambda: session.run(None, feeds), args.warmup, args.iterations)


if __name__ == "__main__":
    main()
