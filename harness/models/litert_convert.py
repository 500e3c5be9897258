"""RUNTIME=litert: an ONNX model converted once to a .tflite with onnx2tf, and kept by what it was made from.

onnx2tf needs TensorFlow, which pins numpy, onnx and onnxruntime older than the harness's own: it lives in a venv of
its own (LITERT_VENV, made by `make setup-litert` from requirements-litert.txt) and runs as a subprocess, as pnnx
does for ncnn. The cache key is the ONNX file's sha256, onnx2tf's and TensorFlow's versions and the input shapes, so
a converted model is never stale and a second session converts nothing. onnx2tf writes a SavedModel, a float16 and a
float32 .tflite in a temporary folder; only the float32 one reaches the cache, whole. It converts to NHWC, the layout
LiteRT runs on a device; tflite_bench.py reads the input shapes from the .tflite. A dynamic batch stays dynamic, so
BATCH_SIZE resizes it as for any .tflite.

An int8 zoo variant (`<model>_int8_static`, `_int8_dynamic`) is quantized by LiteRT's own converter, as a phone's
int8 model is: onnx2tf converts its float model with `-oiqt` (full-integer post-training quantization, calibrated on
the random sample images below) and the `integer_quant` (static: int8 kernels, float input and output, as the QDQ
ONNX takes) or `dynamic_range_quant` .tflite is kept. onnx2tf turns a quantized ONNX graph (QuantizeLinear nodes)
back into float, so such a graph given as a file is refused rather than timed as a float model.

A graph onnx2tf cannot convert, or converts into an operator this LiteRT cannot run, is one ConversionError naming
the op and the engine: that model's runs are recorded as errors and the session goes on.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from harness.core import progress
from harness.core.cache import cache_dir
from harness.core.errors import ModelError
from harness.measure.provenance import installed_versions
from harness.models.facts import QUANTIZED_OPS, fix_dims
from harness.models.ncnn_convert import ConversionError
from harness.zoo.cache import keyed_path, write_model_atomically

CONVERTER = "onnx2tf"
VENV_VARIABLE = "HARNESS_LITERT_VENV"
DEFAULT_VENV = Path(__file__).resolve().parents[2] / ".venv-litert"
CONVERT_TIMEOUT_S = 600.0
SAMPLE_IMAGES = "calibration_image_sample_data_20x128x128x3_float32.npy"
"""onnx2tf checks a model whose inputs are all images of a fixed batch on sample images it reads from its working
folder, else downloads from GitHub: the conversion writes random ones there, so it never needs the network."""
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_PREPARE = ("import sys\nfrom ai_edge_litert.interpreter import Interpreter\n"
            "Interpreter(model_path=sys.argv[1], num_threads=1).allocate_tensors()\n")
"""What tflite_bench.py does before its first inference: prepares every op of the model."""


def tool_venv() -> Path:
    """Where onnx2tf's venv is: HARNESS_LITERT_VENV, else .venv-litert in the project."""
    return Path(os.environ.get(VENV_VARIABLE) or DEFAULT_VENV).expanduser()


def missing_extra() -> str:
    """The one line a session on LiteRT stops with when it cannot convert or run: what is missing and how to get it."""
    return (f"RUNTIME=litert needs the litert extra (ai-edge-litert) and its converter (onnx2tf with TensorFlow, in "
            f"the venv {tool_venv()}), and one of them is not installed: `make setup-litert` installs both (`make "
            "profile RUNTIME=litert` does so itself)")


def converter_versions() -> dict[str, str]:
    """onnx2tf's and TensorFlow's versions in the tool venv; ModelError (missing_extra) when it or LiteRT is missing."""
    venv = tool_venv()
    versions = installed_versions([CONVERTER, "tensorflow"], [str(p) for p in venv.glob("lib/python*/site-packages")])
    if (len(versions) < 2 or not (venv / "bin" / CONVERTER).is_file()
            or importlib.util.find_spec("ai_edge_litert") is None):
        raise ModelError(missing_extra())
    return versions


def input_shapes(inputs: list[dict[str, Any]], name: str) -> list[list[int | str]]:
    """Each graph input's shape from the model's facts: the first dim (the batch) may be dynamic, kept so for
    BATCH_SIZE; any other must be fixed, since tflite_bench.py feeds the shape the .tflite holds."""
    for item in inputs:
        if any(not isinstance(dim, int) or dim <= 0 for dim in item["shape"][1:]):
            raise ConversionError(f"model {name}: input {item['name']!r} has shape {item['shape']}; LiteRT runs it "
                                  "here with every dim but the first (the batch) fixed (use RUNTIME=onnxruntime)")
    return [list(item["shape"]) for item in inputs]


QUANTIZED_OUTPUTS = {"static": "model_integer_quant.tflite", "dynamic": "model_dynamic_range_quant.tflite"}
"""The .tflite onnx2tf -oiqt writes for each zoo quantization mode (harness.zoo.registry.QUANT_SUFFIXES)."""


def conversion_tool(quant: str | None = None) -> str:
    """`onnx2tf 1.29.24`, with the quantization when there is one: what a run's conversion condition names."""
    tool = f"{CONVERTER} {converter_versions()[CONVERTER]}"
    return f"{tool} (int8 {quant} quantization)" if quant else tool


def convert(onnx_path: Path, sha256: str, name: str, inputs: list[dict[str, Any]], quant: str | None = None,
            dims: Mapping[str, int] | None = None) -> Path:
    """The .tflite of `onnx_path` (its content `sha256`, its facts' `inputs`), converted now or found in the cache:
    the graph is read only to convert it. With `quant` (static or dynamic) `onnx_path` is the float model and LiteRT's
    converter quantizes it. `dims` sizes its named dynamic dimensions (DIMS) in the graph onnx2tf converts."""
    versions = converter_versions()
    shapes = input_shapes(inputs, name)
    key = {"onnx_sha256": sha256, **versions, "shapes": shapes, **({"quant": quant} if quant else {})}
    tflite = keyed_path(name, ".tflite", key, cache_dir("litert"))
    if not tflite.is_file():
        with progress.step(f"converting {name} for LiteRT with {CONVERTER} {versions[CONVERTER]}"
                           f"{f' ({quant} int8)' if quant else ''}"), \
                tempfile.TemporaryDirectory(prefix="harness-onnx2tf-") as tmp:
            graph = onnx.load(str(onnx_path))
            fix_dims(graph.graph, dims or {})  # the sizes DIMS gave: the .tflite holds them, as tflite_bench feeds
            if quant is None:
                _refuse_quantized(graph, name)
            made = _run_onnx2tf(graph, Path(tmp), name, versions[CONVERTER], quant)
            check_runs(made, name, versions[CONVERTER])
            write_model_atomically(tflite, partial(_copy, made))
    return tflite


def _refuse_quantized(graph: onnx.ModelProto, name: str) -> None:
    """ConversionError for a quantized ONNX graph: onnx2tf would turn it back into float, timed as the wrong model."""
    found = sorted({node.op_type for node in graph.graph.node if node.op_type in QUANTIZED_OPS})
    if found:
        raise ConversionError(f"model {name}: a quantized ONNX graph ({', '.join(found)}) becomes a float model "
                              "through onnx2tf; give its float model and let LiteRT quantize it (a zoo model: "
                              "<name>_int8_static), or run it with RUNTIME=onnxruntime")


def _run_onnx2tf(model: onnx.ModelProto, folder: Path, name: str, version: str, quant: str | None) -> Path:
    """onnx2tf on a copy of the model in `folder` (it rewrites its input in place), its external data embedded: the
    float32 .tflite it wrote, or the quantized one of `quant`; ConversionError otherwise."""
    onnx.save(model, str(folder / "model.onnx"))
    np.save(folder / SAMPLE_IMAGES, np.random.default_rng(0).random((20, 128, 128, 3), dtype=np.float32))
    command = [str(tool_venv() / "bin" / CONVERTER), "-i", "model.onnx", "-o", "out", "-n",
               *(["-oiqt"] if quant else [])]
    try:
        done = subprocess.run(command, cwd=folder, capture_output=True, text=True, errors="replace",
                              timeout=CONVERT_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise ConversionError(f"model {name}: onnx2tf {version} did not convert it for LiteRT within "
                              f"{CONVERT_TIMEOUT_S:.0f} s") from None
    made = folder / "out" / (QUANTIZED_OUTPUTS[quant] if quant else "model_float32.tflite")
    if done.returncode == 0 and made.is_file():
        return made
    said = _ANSI.sub("", done.stdout + done.stderr)
    missing = sorted(set(re.findall(r"^ERROR: (\S+) OP is not yet implemented", said, re.MULTILINE)))
    if missing:
        raise ConversionError(f"model {name}: LiteRT has no operator {', '.join(missing)} (onnx2tf {version} could "
                              "not convert it); run this model with RUNTIME=onnxruntime")
    node = re.search(r"^ERROR: onnx_op_name: (\S+)", said, re.MULTILINE)
    where = f" at its {_op_type(model, node.group(1))} node {node.group(1)}" if node else ""
    raise ConversionError(f"model {name}: onnx2tf {version} could not convert it for LiteRT{where} "
                          f"({_last_error(said, done.returncode)}); run this model with RUNTIME=onnxruntime")


def _copy(source: Path, out: Path) -> None:
    shutil.copyfile(source, out)


def _op_type(model: onnx.ModelProto, node_name: str) -> str:
    """The op of the graph's node `node_name`; onnx2tf names an unnamed node `sng_<op>_<n>` itself."""
    found = next((node.op_type for node in model.graph.node if node.name == node_name), None)
    return found or re.sub(r"^sng_(.+)_\d+$", r"\1", node_name)


def _last_error(said: str, returncode: int) -> str:
    """The last line of onnx2tf's output that says what failed (an exception's), cut to 200 characters; for a kill
    by SIGKILL, the kernel's out-of-memory killer's usual doing (VGG-16 takes onnx2tf past 16 GiB), that instead."""
    if returncode == -signal.SIGKILL:
        return "killed by SIGKILL, most likely out of memory: onnx2tf holds the whole graph several times over"
    lines = [line.strip() for line in said.splitlines()
             if line.strip() and not line.startswith(("W0000", "I0000", "E0000"))]  # TensorFlow's start-up log
    errors = [line for line in lines if re.match(r"^\w+(Error|Exception)\b", line)]
    how = f"exit code {returncode}" if returncode >= 0 else f"signal {-returncode}"
    return f"{how}: {(errors or lines or ['no output'])[-1][:200]}"


def check_runs(tflite: Path, name: str, version: str) -> None:
    """ConversionError naming the ops when this LiteRT cannot prepare the converted model (an op converted to a
    TensorFlow op, which LiteRT's builtin set lacks), before it reaches the cache. In a child process: LiteRT writes
    to the terminal's stderr, and a crash of it is the child's."""
    done = subprocess.run([sys.executable, "-c", _PREPARE, str(tflite)], capture_output=True, text=True,
                          errors="replace", timeout=CONVERT_TIMEOUT_S, check=False)
    if done.returncode != 0:
        ops = sorted(set(re.findall(r"custom op: (\w+)", done.stderr)))
        failed = _last_error(done.stderr, done.returncode)
        what = f"has no operator {', '.join(ops)}" if ops else f"cannot run it ({failed})"
        raise ConversionError(f"model {name}: LiteRT {what} (converted by onnx2tf {version}); run this model with "
                              "RUNTIME=onnxruntime")
