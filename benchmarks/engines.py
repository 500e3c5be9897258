"""The harness's ncnn and LiteRT latency against each engine's own loop run bare, per model, and what a run costs
beyond the engine's work: how faithful and how cheap the harness is on each engine.

    .venv/bin/python benchmarks/engines.py [--models nb201_0 nb201_1 ...] [--engines ncnn litert] [--rounds 5]
                                           [--iterations 200]

Each model is converted once per engine (RUNTIME=ncnn|litert, the harness's cache). Harness = a one-run `harness
profile --runtime ENGINE --cpus 1` session (local backend: a cgroup pinned to one core, the runner sampling memory).
Bare = a fresh Python process running a plain loop of the engine on the same converted files, one thread, pinned to
the core the harness pins, no runner, no cgroup, no protocol: for ncnn one extractor per inference, every input fed,
every output extracted, as ncnn_bench.py does; for LiteRT one `invoke()` of an interpreter whose inputs were set
once, as tflite_bench.py does. The two alternate per round, which goes first swapping, so a change of the host's load
between rounds hits both; each run gives its median latency. Printed: both medians over the rounds and the median of
the paired ratios (harness / the bare run beside it). Per-run overhead, per engine: the run's wall time outside its
script (`overhead_s`: cgroup set-up and tear-down, the runner's hand-over), and the bench script's wall time (spawn to
exit: Python, the engine's import, loading, the loop) minus the bare process's for the same loop, both medians over
the rounds. Also printed: the same model's onnxruntime latency under the harness, for the ratio between engines this
host shows.

The engines' own benchmark binaries are not what "bare" runs: benchncnn is not in ncnn's wheel nor its sdist (only the
library's sources), LiteRT's benchmark_model is a Bazel build of TensorFlow, and neither installs from the package
registries this host reaches. The bare loops run the same Python bindings the harness's bench scripts run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, Goal, pct, print_table, profile_runs, write_report

DEFAULT_MODELS = ("nb201_0", "nb201_1", "nb201_2", "examples/models/mobilenet_v1_0.25_128.onnx",
                  "examples/models/squeezenet1_1.onnx")
ENGINES = ("ncnn", "litert")
LATENCY_GOAL = 0.03


def bare_ncnn(param: str, iterations: int, warmup: int, core: int) -> None:
    """ncnn's own loop (run with --bare in a fresh process): prints the per-inference latencies in ms as JSON."""
    import ncnn
    import numpy as np

    sys.path.insert(0, str(ROOT / "bench_scripts"))
    from ncnn_bench import input_shapes

    os.sched_setaffinity(0, {core})
    net = ncnn.Net()
    net.opt.num_threads = 1
    net.load_param(param)
    net.load_model(str(Path(param).with_suffix(".bin")))
    rng = np.random.default_rng(0)
    shapes = input_shapes(Path(param), {})
    arrays = {blob: rng.standard_normal(shape).astype(np.float32) for blob, shape in shapes.items()}
    mats = {blob: ncnn.Mat(array) for blob, array in arrays.items()}
    outputs = net.output_names()
    latencies = []
    for index in range(warmup + iterations):
        start = time.perf_counter_ns()
        with net.create_extractor() as extractor:
            for blob, mat in mats.items():
                extractor.input(blob, mat)
            for blob in outputs:
                extractor.extract(blob)
        if index >= warmup:
            latencies.append((time.perf_counter_ns() - start) / 1e6)
    print(json.dumps(latencies))


def bare_litert(tflite: str, iterations: int, warmup: int, core: int) -> None:
    """LiteRT's own loop (run with --bare in a fresh process): prints the per-inference latencies in ms as JSON."""
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter

    from harness.measure.bench_inputs import random_input

    os.sched_setaffinity(0, {core})
    interpreter = Interpreter(model_path=tflite, num_threads=1)
    interpreter.allocate_tensors()
    rng = np.random.default_rng(0)
    for detail in interpreter.get_input_details():
        interpreter.set_tensor(detail["index"], random_input(detail["dtype"], [int(d) for d in detail["shape"]], rng))
    latencies = []
    for index in range(warmup + iterations):
        start = time.perf_counter_ns()
        interpreter.invoke()
        if index >= warmup:
            latencies.append((time.perf_counter_ns() - start) / 1e6)
    print(json.dumps(latencies))


def bare_median(engine: str, converted: str, args: argparse.Namespace, core: int) -> tuple[float, float]:
    """(median latency in ms, the bare process's wall time spawn to exit in s)."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, __file__, "--bare", engine, converted, "--iterations", str(args.iterations),
                           "--warmup", str(args.warmup), "--core", str(core)],
                          capture_output=True, text=True, check=True)
    return statistics.median(json.loads(done.stdout)), time.monotonic() - started


def harness_run(directory: Path, model: str, runtime: str, args: argparse.Namespace) -> dict:
    flags = ["--runtime", runtime, "--cpus", "1", "--iterations", str(args.iterations), "--warmup", str(args.warmup)]
    (run,) = profile_runs(directory, None, [], backend="local", repeats=1, models=[model], extra_flags=flags).runs
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS))
    parser.add_argument("--engines", nargs="+", choices=ENGINES, default=list(ENGINES))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--bare", nargs=2, metavar=("ENGINE", "MODEL"), help=argparse.SUPPRESS)
    parser.add_argument("--core", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare:
        engine, converted = args.bare
        (bare_ncnn if engine == "ncnn" else bare_litert)(converted, args.iterations, args.warmup, args.core)
        return
    rows, raw = [], {}
    with tempfile.TemporaryDirectory(prefix="bench-engines-") as tmp:
        for model in args.models:
            name = Path(model).stem if model.endswith(".onnx") else model  # a zoo name keeps its dots
            directory = Path(tmp) / name
            onnxruntime = harness_run(directory, model, "onnxruntime", args)["latency_stats_ms"]["p50"]
            for engine in args.engines:
                harness, bare_p50, paired, outside, script_extra = [], [], [], [], []
                first = harness_run(directory, model, engine, args)  # converts (or finds) the model; not counted
                converted, core = first["model_converted"], int(first["limits_applied"]["cpuset"].split("-")[-1])
                for index in range(args.rounds):
                    for which in ("bare", "harness") if index % 2 == 0 else ("harness", "bare"):
                        if which == "bare":
                            latency, bare_wall = bare_median(engine, converted, args, core)
                            bare_p50.append(latency)
                        else:
                            run = harness_run(directory, model, engine, args)
                            harness.append(run["latency_stats_ms"]["p50"])
                            outside.append(run["overhead_s"])
                    paired.append(harness[-1] / bare_p50[-1])
                    script_extra.append(run["runtime_s"] - bare_wall)
                raw[f"{model} {engine}"] = {"harness_p50_ms": harness, "bare_p50_ms": bare_p50,
                                            "onnxruntime_p50_ms": onnxruntime, "overhead_s": outside,
                                            "script_minus_bare_s": script_extra}
                rows.append({
                    "model": name, "engine": engine, "bare ms": statistics.median(bare_p50),
                    "harness ms": statistics.median(harness),
                    "harness vs bare %": pct(statistics.median(paired), 1.0),
                    "run overhead s": statistics.median(outside),
                    "script - bare s": statistics.median(script_extra),
                    "onnxruntime harness ms": onnxruntime,
                    "engine / onnxruntime": statistics.median(harness) / onnxruntime,
                })
    print_table(f"latency per engine: harness (CPUS=1, cgroup) vs the engine's loop bare (1 thread, same core); median "
                f"of {args.rounds} rounds x {args.iterations} inferences", rows)
    goals = []
    for engine in args.engines:
        own = [row for row in rows if row["engine"] == engine]
        worst = max(abs(row["harness vs bare %"]) for row in own)
        goals.append(Goal(f"{engine} latency under the harness vs the engine's loop bare", f"within {LATENCY_GOAL:.0%}",
                          f"within {worst:.1f}% on every model", worst <= 100 * LATENCY_GOAL))
        goals.append(Goal(f"{engine} per-run overhead: outside the script; the script's wall time above the bare "
                          "loop's", "information",
                          f"{statistics.median(r['run overhead s'] for r in own):.3f} s; "
                          f"{statistics.median(r['script - bare s'] for r in own):+.3f} s (medians over the models)",
                          None))
    write_report("engines", rows, goals, raw=raw)


if __name__ == "__main__":
    main()
