"""Probing a device the harness cannot reach (an Android phone, a board without SSH): `harness probe export` writes
designed kernels in the engine's own format with a script that times them with the engine's own tool, and
`harness probe import` reads that tool's output back into a kernel table.

One kernel per model file: the engines' tools time a whole model, so a kernel's own file is how its time maps back
to it. The export folder holds:
  kernels.json        the kernels (name, kind, configuration, MACs, files), the engine and the seed
  graphs/<k>.onnx     each kernel's ONNX graph (the import copies them into the table, for its features)
  <k>.tflite          LiteRT (converted with harness.models.litert_convert), or <k>.param + <k>.bin for ncnn
                      (harness.models.ncnn_convert)
  run_probe.sh        LiteRT: pushes each .tflite to a phone with adb and runs benchmark_model with
                      --enable_op_profiling=true, one log per kernel in logs/; ncnn: runs benchncnn over each .param
                      (its `param=` and `shape=[w,h,c]` arguments), its lines in benchncnn.txt

The tools' outputs as they document them: benchmark_model's log (harness.device.tflite_benchmark reads it: the
latency and the op profiler's `Summary by node type`), and benchncnn's `<name>  min = 1.23  max = 1.45  avg = 1.30`
lines (milliseconds; benchmark/benchncnn.cpp), after its `loop_count = N` and `num_threads = N`.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx
import pandas as pd

from harness.core import metric_registry
from harness.core.errors import DataError
from harness.device import tflite_benchmark
from harness.device.readings import OpTime, tool_lines
from harness.kernels.designed import engine_kinds, macs, sample
from harness.kernels.designed_graphs import kernel_model
from harness.kernels.probed import kernel_kind
from harness.kernels.table import (
    DESIGNED_FAMILY,
    GRAPHS_DIR,
    ROW_COLUMNS,
    KernelTable,
    kernels_root,
    now_utc,
    write_table,
)
from harness.models.facts import onnx_facts
from harness.models.ncnn_convert import ConversionError, input_shapes

ENGINES = ("litert", "ncnn")
MANIFEST = "kernels.json"
SCRIPT = "run_probe.sh"
BENCHNCNN_LINE = re.compile(r"^\s*(?P<name>\S+)\s+min\s*=\s*(?P<min>\S+)\s+max\s*=\s*(?P<max>\S+)\s+"
                            r"avg\s*=\s*(?P<avg>\S+)\s*$")
BENCHNCNN_THREADS = re.compile(r"^\s*num_threads\s*=\s*(?P<n>\d{1,6})\s*$")
MAX_THREADS = 4096
RUN_START = "STARTING!"
"""benchmark_model's first line of each run: where a log of several runs is cut into runs."""

LITERT_SCRIPT = """#!/bin/sh
# Time every designed kernel with LiteRT's benchmark_model on an Android phone over adb, with its op profiler.
# Usage: sh run_probe.sh [THREADS]   (BENCHMARK_MODEL: the tool's path on the phone)
# Then: harness probe import logs --engine litert --name NAME
set -eu
cd "$(dirname "$0")"
THREADS="${1:-1}"
BENCH="${BENCHMARK_MODEL:-/data/local/tmp/benchmark_model}"
ON_PHONE=/data/local/tmp/harness-probe
adb shell mkdir -p "$ON_PHONE"
mkdir -p logs
for model in *.tflite; do
  adb push "$model" "$ON_PHONE/$model" >/dev/null
  adb shell "$BENCH" --graph="$ON_PHONE/$model" --num_threads="$THREADS" --enable_op_profiling=true \\
    --warmup_runs=5 --num_runs=50 > "logs/${model%.tflite}.log" 2>&1
  adb shell rm "$ON_PHONE/$model"
done
"""
NCNN_SCRIPT = """#!/bin/sh
# Time every designed kernel with ncnn's benchncnn (param= and shape= arguments) on this board.
# Usage: sh run_probe.sh [THREADS] [LOOPS]   (BENCHNCNN: the tool's path)
# Then: harness probe import benchncnn.txt --engine ncnn --name NAME
set -eu
cd "$(dirname "$0")"
THREADS="${1:-1}"
LOOPS="${2:-50}"
BENCH="${BENCHNCNN:-benchncnn}"
: > benchncnn.txt
while read -r param shape; do
  "$BENCH" "$LOOPS" "$THREADS" 0 -1 0 "param=$param" "shape=$shape" >> benchncnn.txt 2>&1
done < shapes.txt
"""


@dataclass(frozen=True)
class Export:
    folder: Path
    kernels: tuple[str, ...]
    refused: dict[str, str]
    """kernel -> why the engine's converter refused it"""


def _ncnn_shape(shape: list[int]) -> str:
    """benchncnn's `[w,h,c]`: an input's dims after the batch, innermost first."""
    return "[" + ",".join(str(d) for d in reversed(shape[1:])) + "]"


def export(folder: Path, engine: str, count: int, seed: int,
           convert: Callable[[Path, str], list[Path]] | None = None) -> Export:
    """`count` designed kernels of the kinds the engine runs (designed.sample(count, seed, engine_kinds(engine))) in
    `engine`'s format under `folder`, with the script and the manifest. A kernel the engine's converter refuses is
    left out and named in the manifest."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / GRAPHS_DIR).mkdir(exist_ok=True)
    convert = convert or (_to_litert if engine == "litert" else _to_ncnn)
    kept: list[dict[str, Any]] = []
    refused: dict[str, str] = {}
    shapes: list[str] = []
    for kernel in sample(count, seed, engine_kinds(engine)):
        graph = folder / GRAPHS_DIR / f"{kernel.name}.onnx"
        onnx.save(kernel_model(kernel), graph)
        try:
            files = convert(graph, kernel.name)
        except ConversionError as err:
            refused[kernel.name] = str(err)
            continue
        for file in files:
            shutil.copyfile(file, folder / f"{kernel.name}{file.suffix}")
        inputs = onnx_facts(graph)["inputs"]
        if engine == "ncnn":
            shapes.append(f"{kernel.name}.param " + ",".join(_ncnn_shape(s) for s in input_shapes(inputs, kernel.name)))
        kept.append({"name": kernel.name, "kind": kernel.kind, "config": kernel.settings, "macs": macs(kernel),
                     "graph": f"{GRAPHS_DIR}/{graph.name}", "files": [f"{kernel.name}{f.suffix}" for f in files]})
    if engine == "ncnn":
        (folder / "shapes.txt").write_text("\n".join(shapes) + "\n", encoding="utf-8")
    (folder / SCRIPT).write_text(LITERT_SCRIPT if engine == "litert" else NCNN_SCRIPT, encoding="utf-8")
    (folder / SCRIPT).chmod(0o755)
    manifest = {"schema_version": 1, "engine": engine, "seed": seed, "created": now_utc(), "kernels": kept,
                "refused": refused}
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return Export(folder, tuple(k["name"] for k in kept), refused)


def _to_litert(graph: Path, name: str) -> list[Path]:
    from harness.models.litert_convert import convert
    from harness.models.resolve import content_sha256

    return [convert(graph, content_sha256(graph), name, onnx_facts(graph)["inputs"])]


def _to_ncnn(graph: Path, name: str) -> list[Path]:
    from harness.models.ncnn_convert import convert
    from harness.models.resolve import content_sha256

    converted = convert(graph, content_sha256(graph), name, onnx_facts(graph)["inputs"])
    return [converted.param, converted.weights]


def read_manifest(folder: Path) -> dict[str, Any]:
    path = folder / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        kernels = {str(k["name"]): k for k in manifest["kernels"]}
    except FileNotFoundError:
        raise DataError(f"{path}: no export here; give --export-dir, the folder `harness probe export` wrote") from None
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as err:
        raise DataError(f"{path}: not an export's manifest ({err}); export again with harness probe export") from None
    return {**manifest, "by_name": kernels}


def _number(text: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise DataError(f"{where}: {text!r} is not a number of milliseconds") from None
    if not math.isfinite(value) or value < 0:
        raise DataError(f"{where}: {text!r} is not a time in milliseconds (finite, >= 0)")
    return value


def _kernel(name: str, kernels: dict[str, Any], where: str) -> str:
    stem = Path(name.replace("\\", "/")).name
    for suffix in (".param", ".tflite"):
        stem = stem[: -len(suffix)] if stem.endswith(suffix) else stem
    if stem not in kernels:
        raise DataError(f"{where}: {name!r} is no kernel of this export; import the output of its own run_probe.sh")
    return stem


def benchncnn_rows(text: str, source: str, kernels: dict[str, Any]) -> tuple[list[dict[str, Any]], int | None]:
    """A benchncnn output's rows (one per kernel: its whole time, avg ms; min in min_ms) and its thread count."""
    rows: dict[str, dict[str, Any]] = {}
    threads = None
    for number, line in enumerate(tool_lines(text), start=1):
        where = f"{source}:{number}"
        if found := BENCHNCNN_THREADS.match(line):
            threads = int(found["n"]) if 1 <= int(found["n"]) <= MAX_THREADS else None
            continue
        found = BENCHNCNN_LINE.match(line)
        if not found:
            continue
        low, high, avg = (_number(found[key], where) for key in ("min", "max", "avg"))
        if not low <= avg <= high:
            raise DataError(f"{where}: min {low:g}, max {high:g} and avg {avg:g} are not in order")
        kernel = _kernel(found["name"], kernels, where)
        rows[kernel] = {"kernel": kernel, "node": kernel, "op_type": kernels[kernel]["kind"], "calls": 1.0,
                        "mean_ms": avg, "median_ms": math.nan, "min_ms": low, "model_latency_ms": avg}
    if not rows:
        raise DataError(f"{source}: no benchncnn result line (`<name>  min = ...  max = ...  avg = ...`); is it "
                        "the output of the export's run_probe.sh?")
    return list(rows.values()), threads


def benchmark_model_rows(text: str, source: str, kernels: dict[str, Any]) -> tuple[list[dict[str, Any]], int | None]:
    """benchmark_model logs' rows: per kernel (the run's graph), one per node type of its op profile, or one row
    of its whole latency where it was run without --enable_op_profiling."""
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if RUN_START in line] or [0]
    rows: list[dict[str, Any]] = []
    threads: set[int] = set()
    for begin, end in zip(starts, [*starts[1:], len(lines)], strict=True):
        where = f"{source} (the run from line {begin + 1})"
        reading = tflite_benchmark.parse("".join(lines[begin:end]), where)
        if reading.model is None:
            raise DataError(f"{where}: no `Graph: [...]` line names the kernel the run timed")
        kernel = _kernel(reading.model, kernels, where)
        latency = reading.metrics[metric_registry.LATENCY]
        if reading.cpus:
            threads.add(int(reading.cpus))
        ops = reading.ops or (OpTime(kernels[kernel]["kind"], 1, latency),)
        rows += [{"kernel": kernel, "node": op.node_type, "op_type": op.node_type, "calls": float(op.nodes),
                  "mean_ms": op.mean_ms, "median_ms": math.nan, "model_latency_ms": latency} for op in ops]
    return rows, (threads.pop() if len(threads) == 1 else None)


def import_table(source: Path, engine: str, name: str, export_dir: Path, results_dir: Path, device: str | None,
                 threads: int | None) -> KernelTable:
    """The kernel table `name` from a tool's output (`source`: a file, or a folder of logs) of an export's kernels."""
    manifest = read_manifest(export_dir)
    kernels = manifest["by_name"]
    files = sorted(p for p in source.iterdir() if p.is_file()) if source.is_dir() else [source]
    if not files:
        raise DataError(f"{source}: an empty folder; give the tool's output (benchncnn.txt, or the logs folder)")
    rows: list[dict[str, Any]] = []
    said: set[int] = set()
    for file in files:
        try:
            text = file.read_bytes().decode("utf-8", errors="replace")
        except OSError as err:
            raise DataError(f"{file}: cannot be read ({err.strerror})") from None
        read = benchncnn_rows if engine == "ncnn" else benchmark_model_rows
        found, file_threads = read(text, str(file), kernels)
        rows += found
        said |= {file_threads} if file_threads else set()
    if threads is None and len(said) > 1:
        raise DataError(f"{source}: runs at {sorted(said)} threads; import each thread count on its own with "
                        "--threads")
    threads = threads or (said.pop() if said else None)
    if threads is None:
        raise DataError(f"{source}: the output does not say its thread count; give --threads")
    frame = pd.DataFrame(rows)
    frame = frame.assign(node_index=frame.groupby("kernel").cumcount(), onnx_node=None, input_shapes="",
                         output_shapes="", macs=frame["kernel"].map(lambda k: kernels[k].get("macs")),
                         param_bytes=None, depthwise=None, share=math.nan, model=frame["kernel"] + ".onnx",
                         source="designed", family=DESIGNED_FAMILY, graph=GRAPHS_DIR + "/" + frame["kernel"] + ".onnx",
                         kernel_kind=frame["kernel"].map(kernel_kind))
    frame["share"] = frame["mean_ms"] / frame["model_latency_ms"].where(frame["model_latency_ms"] > 0)
    meta = {"name": name, "device": device or name, "engine": engine, "threads": threads, "cpus": float(threads),
            "precision": "fp32", "created": now_utc(), "probing_s": None, "sessions": [],
            "source": f"probe import {source}", "cpu": ""}
    graphs = {f"{k}.onnx": export_dir / kernels[k]["graph"] for k in sorted(set(frame["kernel"]))}
    missing = [str(path) for path in graphs.values() if not path.is_file()]
    if missing:
        raise DataError(f"{missing[0]}: a kernel's graph is missing from the export; export again")
    ordered = [*ROW_COLUMNS, *(c for c in frame.columns if c not in ROW_COLUMNS)]
    return write_table(kernels_root(results_dir) / name, meta, frame[ordered], graphs)
