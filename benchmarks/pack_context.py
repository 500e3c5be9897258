"""How a designed kernel's time in a probe graph depends on what surrounds it: read from a cold graph input and
written to a graph output of its own, or run as in a model (its inputs written just before it by the pack's warm
nodes, its outputs read by a sink and their buffers reused: harness.kernels.designed_graphs._Builder).

    .venv/bin/python benchmarks/pack_context.py [--kernels 120] [--seed 7] [--inferences 40]

The same packs of the same designed kernels, built both ways, each run in a fresh onnxruntime session (one thread,
the profiler on, its trace read by harness.analysis.per_op.parse_onnxruntime), the two builds of a pack one after
the other. A kernel's time is the sum of its named rows' median over the profiled inferences after the first ten
(the rows onnxruntime adds unnamed, reorders around an NCHWc convolution, are left out of both). Printed per kind:
the median over its kernels of in-context time / cold time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from collections import defaultdict
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from _common import print_table, write_report

from harness.analysis.per_op import parse_onnxruntime
from harness.kernels.designed import OVERHEAD, sample
from harness.kernels.designed_graphs import probe_model
from harness.kernels.packing import pack

SETTLE = 10
"""Profiled inferences left out at the start of each session."""


def kernel_times(model: onnx.ModelProto, folder: Path, inferences: int) -> dict[str, float]:
    """Each designed kernel's ms per inference in one profiled session of `model`."""
    path = folder / f"{model.graph.name}.onnx"
    onnx.save(model, path)
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.enable_profiling, options.profile_file_prefix = True, str(folder / "trace")
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {i.name: rng.standard_normal(i.shape).astype(np.float32) for i in session.get_inputs()}
    for _ in range(inferences):
        session.run(None, feeds)
    events, _ = parse_onnxruntime(json.loads(Path(session.end_profiling()).read_text()), SETTLE)
    per_node: dict[str, list[float]] = defaultdict(list)
    for event in events:
        if event.name.startswith("k"):  # a designed kernel's node, not the pack's own
            per_node[event.name].append(event.dur_us / 1000.0)
    times: dict[str, float] = defaultdict(float)
    for node, durations in per_node.items():
        times[node.split("/")[0]] += statistics.median(durations)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernels", type=int, default=120)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--inferences", type=int, default=40)
    args = parser.parse_args()
    kernels = sample(args.kernels, args.seed)
    kinds = {k.name: k.kind for k in kernels}
    ratios: dict[str, list[float]] = defaultdict(list)
    with tempfile.TemporaryDirectory(prefix="bench-pack-context-") as tmp:
        for index, members in enumerate(pack(kernels)):
            cold = kernel_times(probe_model(members, index, in_context=False), Path(tmp), args.inferences)
            warm = kernel_times(probe_model(members, index), Path(tmp), args.inferences)
            for name in cold.keys() & warm.keys():
                if kinds.get(name, OVERHEAD) != OVERHEAD and cold[name] > 0 and warm[name] > 0:
                    ratios[kinds[name]].append(warm[name] / cold[name])
    rows = [{"kind": kind, "kernels": len(values), "in context / cold (median)": statistics.median(values),
             "least": min(values), "most": max(values)} for kind, values in sorted(ratios.items())]
    print_table(f"{args.kernels} designed kernels (seed {args.seed}), onnxruntime {ort.__version__}, one thread", rows)
    write_report("pack_context", rows, [])


if __name__ == "__main__":
    main()
