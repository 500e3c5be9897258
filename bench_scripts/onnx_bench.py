"""Bench an ONNX model with onnxruntime on the CPU: intra-op threads = ceil(CPUS), inter-op 1.

Under a CFS quota (HARNESS_CPU_MODE=quota) the intra-op threads do not spin while waiting for work: spinning would
burn the quota that the inferences need, and inflate cpu_s.

Inputs are built from the model's input signature outside the timed region: random data, with the dynamic dimensions
DIMS sizes (HARNESS_DIMS, or --dim) and the values the harness read from the graph for token ids and masks
(HARNESS_INPUT_VALUES), or the arrays of the INPUTS file (HARNESS_INPUTS). With PER_OP=1 the runner names a profile
directory: after the timed phase a fresh session with ORT's profiler runs the per-op phase.
Usage: python onnx_bench.py MODEL [--iterations N] [--warmup N] [--batch-size N] [--dim NAME=SIZE]
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np
import onnxruntime as ort

from harness import (
    given_inputs,
    input_values,
    parse_args,
    parse_pairs,
    profile_dir,
    profiled_loop,
    random_input,
    report_metrics,
    resolve_shape,
    timed_load,
    timed_loop,
    write_profile_meta,
)

# onnxruntime's type strings -> numpy dtypes for the random inputs
DTYPES = {
    "tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
    "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(int8)": np.int8, "tensor(uint8)": np.uint8,
    "tensor(bool)": np.bool_,
}


def spinning() -> bool:
    """Intra-op threads spin while waiting for work, except under a CFS quota."""
    return os.environ.get("HARNESS_CPU_MODE") != "quota"


def new_session(model: str, threads: int, profile_prefix: Path | None = None) -> ort.InferenceSession:
    """A CPU session; with profile_prefix, ORT's profiler records every node run to a Chrome-trace JSON there."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning() else "0")
    if profile_prefix is not None:
        options.enable_profiling = True
        options.profile_file_prefix = str(profile_prefix)
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def profile_ops(args: argparse.Namespace, feeds: dict[str, np.ndarray], directory: Path) -> None:
    """ORT profiles a session from its creation on, so the per-op phase gets a session of its own, created
    after the timed one was released (one model in memory at a time)."""
    session = new_session(args.model, args.threads, directory / "onnxruntime")
    meta = profiled_loop(lambda: session.run(None, feeds), args.warmup, args.iterations)
    trace = Path(session.end_profiling())
    write_profile_meta(directory, framework="onnxruntime", trace=trace.name, **meta)


def random_feeds(session: ort.InferenceSession, args: argparse.Namespace) -> dict[str, np.ndarray]:
    """Random data for every input, of the shape the sizes give it and the values the graph accepts."""
    sizes = parse_pairs(args.dim, "--dim")
    values = input_values()
    rng = np.random.default_rng(0)
    feeds = {}
    for item in session.get_inputs():
        if item.type not in DTYPES:
            raise SystemExit(f"input {item.name!r} has type {item.type}, which this script cannot generate")
        shape = resolve_shape(item.name, list(item.shape), args.batch_size, sizes)
        feeds[item.name] = random_input(DTYPES[item.type], shape, rng, values.get(item.name))
    return feeds


def main() -> None:
    args = parse_args(__doc__)
    session = timed_load(lambda: new_session(args.model, args.threads))
    feeds = given_inputs() or random_feeds(session, args)
    applied = session.get_session_options().get_session_config_entry("session.intra_op.allow_spinning")
    # intra_op_spinning as ORT holds it
    report_metrics(batch_size=args.batch_size, threads=args.threads, intra_op_spinning=applied != "0")
    timed_loop(lambda: session.run(None, feeds), args.warmup, args.iterations)
    directory = profile_dir()
    if directory is not None:
        del session
        profile_ops(args, feeds, directory)


if __name__ == "__main__":
    main()
