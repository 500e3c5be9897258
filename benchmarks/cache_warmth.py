"""How much of a model's speed is the cache it keeps between inferences: each zoo model timed as it runs back to back,
and with a buffer of 4, 16 and 64 MB written between inferences (past this host's 1 MB of L2 a core, then its 32 MB
of shared L3), which leaves its weights to come from memory again.

    .venv/bin/python benchmarks/cache_warmth.py [--models NAME ...] [--inferences 300]

A small model's weights and maps stay in the last-level cache from one inference to the next, a large one's do not:
the same kernel runs faster in the small model, which kernel regressors trained on other families' rows do not see
(docs/kernels.md: the small models they put 10–30% high). On a shared host the cache is also shared with other
tenants, so a small model's latency moves with their load between sessions. One onnxruntime session a model (one
thread), each setting the median of `--inferences` timed runs after 50 untimed; the settings in turn, one model at a
time.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
from _common import print_table, write_report

from harness import zoo

MODELS = ("kws_dscnn", "resnet8_cifar10", "mobilenet_v1_0.25_128", "shufflenet_v2_x0_5", "mobilenet_v3_small_0.75_224",
          "mobilenet_v1_0.5_160", "mobilenet_v2_0.5_160", "ghostnet_0.5_224", "mnasnet_0.5_224",
          "mobilenet_v2_1.0_224", "regnet_y_400mf", "resnet18")
"""Zoo models from 0.1 to 45 MB of weights, the smallest of their families first."""
EVICTING_MB = (0, 4, 16, 64)


def latencies(model: Path, inferences: int) -> dict[int, float]:
    """The model's median ms with each EVICTING_MB buffer written between inferences (0: none)."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    [given] = session.get_inputs()
    shape = [dim if isinstance(dim, int) else 1 for dim in given.shape]
    feeds = {given.name: np.random.default_rng(0).standard_normal(shape).astype(np.float32)}
    for _ in range(50):
        session.run(None, feeds)
    out = {}
    for megabytes in EVICTING_MB:
        buffer = np.ones(megabytes * 2**20 // 8)
        times = []
        for _ in range(inferences):
            buffer += 1.0  # every cache line of it written: what the model held there is evicted
            start = time.perf_counter()
            session.run(None, feeds)
            times.append(time.perf_counter() - start)
        out[megabytes] = statistics.median(times) * 1000.0
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--inferences", type=int, default=300)
    args = parser.parse_args()
    rows = []
    for name in args.models:
        model = zoo.export(name)
        ms = latencies(model, args.inferences)
        rows.append({"model": name, "file MB": model.stat().st_size / 2**20, "ms": ms[0],
                     **{f"× with {mb} MB between": ms[mb] / ms[0] for mb in EVICTING_MB[1:]}})
    print_table(f"latency with the cache evicted between inferences, onnxruntime {ort.__version__}, one thread", rows)
    write_report("cache_warmth", rows, [])


if __name__ == "__main__":
    main()
