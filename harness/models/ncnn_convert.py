"""RUNTIME=ncnn: an ONNX model converted once to ncnn's .param/.bin with pnnx, and kept by what it was made from.

The cache key is the ONNX file's sha256, pnnx's version and the input shapes, so a converted model is never stale and
a second session converts nothing. pnnx writes beside its input several files of its own (its .pnnx.param, a
simplified ONNX, two Python scripts): it runs in a temporary folder, and only the .bin and then the .param reach the
cache, each whole (a .param in the cache means its .bin is there too). ncnn's .param carries no input shape, so the
conversion writes each input's shape into its Input layer (w, h, d, c), where ncnn_bench.py reads it.

A graph pnnx cannot convert, or converts into a layer ncnn lacks (pnnx leaves such an op as it is, prints `todo OP`
and still exits 0), is one ConversionError naming the op and the engine: that model's runs are recorded as errors
and the session goes on.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx

from harness.core import progress
from harness.core.cache import cache_dir
from harness.core.errors import ModelError
from harness.measure.ncnn_param import layers, param_text
from harness.measure.provenance import installed_versions
from harness.zoo.cache import keyed_path, write_model_atomically

CONVERTER = "pnnx"
PNNX_MAX_IR_VERSION = 13
"""pnnx reads the graph through its own onnxruntime (1.30 in pnnx 20261020), which reads IR versions up to 13 and
crashes pnnx on a newer one (IR 14 is what onnx 1.23 writes): the copy pnnx converts says 13 at most. The IR version
numbers the file format; the operators are those of the model's opset either way."""
CONVERT_TIMEOUT_S = 600.0
INPUT_DIMS = {1: ("0",), 2: ("1", "0"), 3: ("2", "1", "0"), 4: ("2", "11", "1", "0")}
"""An input's dims after the batch -> the Input layer's parameter ids that hold them (ncnn: 0=w 1=h 11=d 2=c)."""
MISSING_EXTRA = ("ncnn (RUNTIME=ncnn, or a prediction from an ncnn kernel table) needs the ncnn extra (ncnn and "
                 "pnnx), which is not installed: in a checkout `make setup-ncnn` (`make profile RUNTIME=ncnn` does so "
                 "itself); from a wheel, pip install 'harness[ncnn]'")


class ConversionError(ModelError):
    """The model cannot run on its engine (ncnn, LiteRT): its runs are recorded as errors with this line, and the
    session goes on."""


@dataclass(frozen=True)
class Converted:
    param: Path
    weights: Path
    tool: str  # `pnnx 20261020`


def converter_version() -> str:
    """pnnx's version; MISSING_EXTRA when pnnx or ncnn is not installed."""
    version = installed_versions([CONVERTER]).get(CONVERTER)
    if version is None or any(importlib.util.find_spec(module) is None for module in (CONVERTER, "ncnn")):
        raise ModelError(MISSING_EXTRA)
    return version


def input_shapes(inputs: list[dict[str, Any]], name: str) -> list[list[int]]:
    """Each graph input's shape for pnnx, from the model's facts (`inputs`: what a caller feeds, initializers left
    out): a dynamic first dim is a batch of 1 (ncnn runs one input at a time); any other dim must be fixed, and the
    input float32, which is what ncnn_bench.py feeds."""
    shapes = []
    for item in inputs:
        if item["dtype"] != "float32":
            raise ConversionError(f"model {name}: input {item['name']!r} is {item['dtype'] or 'of no type'}; ncnn runs "
                                  "float32 inputs only (use RUNTIME=onnxruntime)")
        dims = [dim if isinstance(dim, int) else 0 for dim in item["shape"]]
        if dims and dims[0] <= 0:
            dims[0] = 1
        if not dims or any(dim <= 0 for dim in dims) or len(dims) - 1 not in INPUT_DIMS:
            raise ConversionError(f"model {name}: input {item['name']!r} has shape {dims or 'unknown'}; ncnn needs a "
                                  "fixed shape of 2 to 5 dims, the first the batch (use RUNTIME=onnxruntime)")
        shapes.append(dims)
    return shapes


def convert(onnx_path: Path, sha256: str, name: str, inputs: list[dict[str, Any]]) -> Converted:
    """The ncnn model of `onnx_path` (its content `sha256`, its facts' `inputs`), converted now or found in the cache:
    the graph is read only to convert it."""
    version = converter_version()
    shapes = input_shapes(inputs, name)
    param = keyed_path(name, ".param", {"onnx_sha256": sha256, CONVERTER: version, "shapes": shapes},
                       cache_dir("ncnn"))
    weights = param.with_suffix(".bin")
    if not (param.is_file() and weights.is_file()):
        with progress.step(f"converting {name} for ncnn with {CONVERTER} {version}"), \
                tempfile.TemporaryDirectory(prefix="harness-pnnx-") as tmp:
            _run_pnnx(onnx.load(str(onnx_path)), shapes, Path(tmp), name, version)
            write_model_atomically(weights, lambda out: shutil.copyfile(Path(tmp) / "model.bin", out))
            write_model_atomically(param, lambda out: out.write_text(
                with_input_shapes(param_text(Path(tmp) / "model.param"), shapes)))
    return Converted(param=param, weights=weights, tool=f"{CONVERTER} {version}")


def _run_pnnx(model: onnx.ModelProto, shapes: list[list[int]], folder: Path, name: str, version: str) -> None:
    """pnnx on a copy of the model in `folder`, leaving model.param and model.bin there; ConversionError otherwise."""
    model.ir_version = min(model.ir_version, PNNX_MAX_IR_VERSION)
    onnx.save(model, str(folder / "model.onnx"))
    spec = importlib.util.find_spec(CONVERTER)
    if spec is None or spec.origin is None:  # uninstalled since converter_version() found it
        raise ModelError(MISSING_EXTRA)
    executable = Path(spec.origin).parent / CONVERTER  # the binary the package ships
    outputs = {key: f"{key}.out" for key in ("pnnxparam", "pnnxbin", "pnnxpy", "pnnxonnx", "ncnnpy")}
    command = [str(executable), "model.onnx", "inputshape=" + ",".join(f"[{','.join(map(str, s))}]" for s in shapes),
               "ncnnparam=model.param", "ncnnbin=model.bin", *(f"{key}={value}" for key, value in outputs.items())]
    try:
        done = subprocess.run(command, cwd=folder, capture_output=True, text=True, errors="replace",
                              timeout=CONVERT_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise ConversionError(f"model {name}: pnnx {version} did not convert it for ncnn within "
                              f"{CONVERT_TIMEOUT_S:.0f} s") from None
    said = done.stdout + done.stderr
    missing = sorted(set(re.findall(r"^todo (\S+)", said, re.MULTILINE)))
    if done.returncode == 0 and (folder / "model.param").is_file():
        missing = sorted({*missing, *unknown_layers(param_text(folder / "model.param"))})
        if not missing:
            return
    if missing:
        raise ConversionError(f"model {name}: ncnn has no operator {', '.join(missing)} (pnnx {version} could not "
                              "convert it); run this model with RUNTIME=onnxruntime")
    how = f"signal {-done.returncode}" if done.returncode < 0 else f"exit code {done.returncode}"
    last = next((line.strip() for line in reversed(said.splitlines()) if line.strip()), "no output")
    raise ConversionError(f"model {name}: pnnx {version} could not convert it for ncnn ({how}: {last[-200:]})")


def unknown_layers(param_text: str) -> set[str]:
    """Layer types of a .param that this ncnn does not have (pnnx may write an op it could not convert as is)."""
    import ncnn

    return {fields[0] for fields in layers(param_text) if ncnn.layer_to_index(fields[0]) < 0}


def with_input_shapes(param_text: str, shapes: list[list[int]]) -> str:
    """The .param with each Input layer given its input's dims after the batch, in the order of the inputs."""
    lines, inputs = param_text.splitlines(), iter(shapes)
    for index, line in enumerate(lines):
        fields = line.split()
        if index >= 2 and fields and fields[0] == "Input":
            dims = next(inputs)[1:]
            given = zip(INPUT_DIMS[len(dims)], dims, strict=True)
            lines[index] = " ".join([*fields, *(f"{key}={dim}" for key, dim in given)])
    return "\n".join(lines) + "\n"
