"""Bench an ncnn model (MODEL.param, its weights in MODEL.bin beside it) with ncnn's Python API: threads = ceil(CPUS).

ncnn runs one input at a time (its Mat has no batch dim): BATCH_SIZE must be 1. Each input's shape comes from its
Input layer in the .param (0=w 1=h 11=d 2=c; the harness's conversion from ONNX writes them), or from
--shape NAME=CxHxW (ncnn's dims, no batch), which wins. Inputs are random float32, built outside the timed region; an
inference is a fresh extractor fed every input and asked for every output, as an ncnn program runs one.
Under a CFS quota (HARNESS_CPU_MODE=quota) ncnn's OpenMP threads do not spin after their work (openmp_blocktime 0):
spinning would burn the quota that the inferences need. PER_OP=1: ncnn's Python API has no op profiler, so the
per-op phase times each layer in its own call: an extractor computes a blob only when asked for it, from the blobs it
holds, so asking for every layer's first output in the .param's order (ncnn's topological order) runs one layer per
call, and that call's time is the layer's (plus a Python call of a few microseconds, which the table's coverage
shows). extract() also hands the blob over (unpacked, as float32), which costs as much as a small layer: each blob is
asked for twice, and the second call, the hand-over alone, is taken from the layer's time and from the inference's.
Light mode is off in that phase, so no blob a later layer needs is released and computed twice.
Usage: python ncnn_bench.py MODEL.param [--iterations N] [--warmup N] [--threads N] [--shape NAME=CxHxW]
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import ncnn
import numpy as np

from harness import (
    param_layers,
    parse_args,
    parse_pairs,
    profile_dir,
    profiled_loop,
    random_input,
    report_metrics,
    timed_load,
    timed_loop,
    write_profile_meta,
)

SHAPE_KEYS = ("2", "11", "1", "0")  # an Input layer's c, d, h, w parameter ids, outermost first
TRACE = "ncnn_layers.json"


def input_shapes(param: Path, given: dict[str, str]) -> dict[str, list[int]]:
    """Each Input layer's blob -> its dims (outermost first), from --shape or from the layer's parameters."""
    shapes: dict[str, list[int]] = {}
    for fields in param_layers(param):
        if len(fields) < 5 or fields[0] != "Input":
            continue
        blob = fields[4]
        values = dict(field.split("=", 1) for field in fields[5:] if "=" in field)
        if blob in given:
            shapes[blob] = [int(dim) for dim in given[blob].split("x")]
        elif any(int(values.get(key, 0)) > 0 for key in SHAPE_KEYS):
            shapes[blob] = [int(values[key]) for key in SHAPE_KEYS if int(values.get(key, 0)) > 0]
        else:
            raise SystemExit(f"input {blob!r} of {param.name} has no shape in its Input layer; give it with "
                             f"--shape {blob}=CxHxW (ncnn's dims, no batch; pass script arguments after --)")
    return shapes


def depthwise_layers(param: Path) -> dict[str, bool]:
    """Each convolution layer's name -> whether it is depthwise: ncnn runs every grouped convolution as
    ConvolutionDepthWise, depthwise when its groups (7=) equal its output channels (0=)."""
    found = {}
    for fields in param_layers(param):
        if len(fields) > 1 and fields[0].startswith("Convolution"):
            values = dict(field.split("=", 1) for field in fields[4:] if "=" in field)
            found[fields[1]] = fields[0] == "ConvolutionDepthWise" and values.get("7") == values.get("0")
    return found


def profile_layers(net: Any, param: Path, feeds: dict[str, Any], warmup: int, iterations: int,
                   directory: Path) -> None:
    """The per-op phase: every inference with each layer timed in its own extract() call (see above), written as
    ncnn_layers.json: each inference's span (start, duration, the hand-overs' time within it) and each layer's, in
    microseconds on perf_counter's clock."""
    blobs = net.blobs()
    layers = [(layer.name, layer.type, blobs[layer.tops[0]].name) for layer in net.layers()
              if layer.type != "Input" and len(layer.tops)]
    depthwise = depthwise_layers(param)
    runs: list[list[float]] = []
    spans: list[dict[str, Any]] = []
    clock = time.perf_counter_ns

    def infer_by_layer() -> None:
        begun, copies = clock(), 0
        with net.create_extractor() as extractor:
            extractor.set_light_mode(False)
            for blob, mat in feeds.items():
                extractor.input(blob, mat)
            for name, kind, top in layers:
                start = clock()
                extractor.extract(top)  # runs the layer, then hands its output over (unpacked, as float32)
                ran = clock()
                extractor.extract(top)  # the hand-over alone: the blob is computed
                copy = clock() - ran
                copies += copy
                spans.append({"name": name, "type": kind, "ts_us": start / 1e3,
                              "dur_us": max(ran - start - copy, 0) / 1e3, "depthwise": depthwise.get(name)})
        runs.append([begun / 1e3, (clock() - begun) / 1e3, 2 * copies / 1e3])

    meta = profiled_loop(infer_by_layer, warmup, iterations)
    (directory / TRACE).write_text(json.dumps({"runs": runs, "layers": spans}), encoding="utf-8")
    write_profile_meta(directory, framework="ncnn", trace=TRACE, **meta)


def main() -> None:
    args = parse_args(__doc__)
    if args.batch_size != 1:
        raise SystemExit(f"ncnn runs one input at a time: BATCH_SIZE must be 1, not {args.batch_size}")
    param = Path(args.model)
    blocktime = 0 if os.environ.get("HARNESS_CPU_MODE") == "quota" else None

    def load() -> ncnn.Net:
        net = ncnn.Net()
        net.opt.num_threads = args.threads
        if blocktime is not None:
            net.opt.openmp_blocktime = blocktime
        if net.load_param(str(param)) != 0 or net.load_model(str(param.with_suffix(".bin"))) != 0:
            raise SystemExit(f"ncnn could not load {param.name} with {param.with_suffix('.bin').name}")
        return net

    net = timed_load(load)
    rng = np.random.default_rng(0)
    arrays = {blob: random_input(np.float32, shape, rng)
              for blob, shape in input_shapes(param, parse_pairs(args.shape, "--shape")).items()}
    # A Mat made on an array's memory has no reference count, and ncnn dereferences it where an in-place layer (ReLU,
    # Sigmoid, ...) takes an input blob: a graph whose input feeds one crashed (SIGSEGV). A clone owns its memory.
    feeds = {blob: ncnn.Mat(array).clone() for blob, array in arrays.items()}
    outputs = net.output_names()

    def infer() -> None:
        with net.create_extractor() as extractor:
            for blob, mat in feeds.items():
                extractor.input(blob, mat)
            for blob in outputs:
                if extractor.extract(blob)[0] != 0:
                    raise SystemExit(f"ncnn could not compute output {blob!r} of {param.name}")

    report_metrics(batch_size=1, threads=net.opt.num_threads, engine="ncnn", engine_version=ncnn.__version__,
           openmp_blocktime_ms=net.opt.openmp_blocktime,
           input_shapes=",".join(f"{blob}={'x'.join(map(str, array.shape))}" for blob, array in arrays.items()))
    timed_loop(infer, args.warmup, args.iterations)
    directory = profile_dir()
    if directory is not None:
        profile_layers(net, param, feeds, args.warmup, args.iterations, directory)


if __name__ == "__main__":
    main()
