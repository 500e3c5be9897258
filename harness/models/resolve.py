"""Turn what the user typed (a file or a zoo name) into a checked model: path, kind, bench script, facts.

Everything here runs before the first measurement, so a missing, corrupt or unsupported model stops the
session at once with one line instead of failing run after run.
"""

from __future__ import annotations

import hashlib
import importlib.util
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from harness.core.conditions import runtime_of
from harness.core.config import dim_sizes
from harness.core.errors import ConfigError, ModelError
from harness.core.external_data import ExternalData, confine, data_files
from harness.core.shipped import BENCH_SCRIPTS_DIR, EXAMPLES_DIR
from harness.models.facts_cache import model_facts
from harness.models.input_feeds import FeedRequest, dims_text, dynamic_sizes, fed_sizes, load_inputs, script_env

SCRIPT_KIND = "script"
"""A user script profiled as a whole, with no model: it is the thing measured, named after its file."""

_TORCH = ("torch", "torch_bench.py", "torch", "PyTorch (make setup-zoo installs it)")
# extension -> (kind, bench script, importable module it needs, what installs it)
KINDS: dict[str, tuple[str, str, str, str]] = {
    ".onnx": ("onnx", "onnx_bench.py", "onnxruntime", "the core install (make setup)"),
    ".pt": _TORCH,
    ".pth": _TORCH,
    ".pt2": _TORCH,
    ".py": _TORCH,
    ".tflite": ("tflite", "tflite_bench.py", "ai_edge_litert", "LiteRT: pip install -e '.[litert]'"),
    ".param": ("ncnn", "ncnn_bench.py", "ncnn", "the ncnn extra: make setup-ncnn"),
}
DEFAULT_SCRIPTS = {kind: script for kind, script, _, _ in KINDS.values()}


@dataclass(frozen=True)
class ModelInfo:
    name: str
    """the model's name (a file's stem, made unique by its content)"""
    path: Path
    """the model file"""
    kind: str
    """onnx, ncnn, tflite, torch or script"""
    script: Path
    sha256: str
    """sha256 of the model's bytes (with its external data files)"""
    size_mib: float
    """the model's size (with its external data files)"""
    facts: dict[str, Any] | None = field(default=None, compare=False)
    """static facts of the graph: parameters, MACs, operator mix, family"""
    external_data: ExternalData = ()  # (tensor, location) per file beside the model that holds tensors' data
    converted: Path | None = None  # RUNTIME=ncnn|litert: the .param or .tflite converted from the ONNX at `path`
    conversion: str | None = None  # the tool that converted it, with its version (`pnnx 20261020`, `onnx2tf 1.29.24`)
    refused: str = ""  # why the model cannot run on its engine (a failed conversion): its runs are kept as errors
    dims: str = ""  # the sizes its runs give its named dynamic dimensions (`seq=128`), from DIMS or INPUTS
    inputs_file: str = ""  # INPUTS: the .npz its runs are fed instead of random inputs
    inputs_sha256: str | None = None  # that file's sha256
    script_env: tuple[tuple[str, str], ...] = ()  # what its bench script reads to build inputs (input_feeds)

    @property
    def run_model(self) -> str:
        """The model path handed to the script; empty for a script profiled as a whole."""
        return "" if self.kind == SCRIPT_KIND else str(self.converted or self.path)

    def runtime(self, packages: dict[str, str]) -> str | None:
        """The engine that runs it with its version among `packages` (`ncnn 1.0.20261020`); None with a user's
        script, whose engine the harness does not know."""
        return runtime_of(self.kind, packages) if self.script.name == DEFAULT_SCRIPTS.get(self.kind) else None

    def provenance(self) -> dict[str, Any]:
        return {"model_name": self.name, "model_path": str(self.path), "model_kind": self.kind,
                "model_sha256": self.sha256, "model_size_mib": self.size_mib, "model_facts": self.facts,
                "model_converted": self.converted and str(self.converted), "model_conversion": self.conversion,
                "model_dims": self.dims, "model_inputs_file": self.inputs_file}


def sha256_of(*paths: Path) -> str:
    """The sha256 of the files' bytes one after the other (an ncnn model is its .param and its .bin)."""
    digest = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as handle:
            for chunk in iter(partial(handle.read, 1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


def content_sha256(path: Path) -> str:
    """A model file's identity as resolve_model gives it (with its .bin for ncnn, with its external-data files for
    ONNX), so the runs of a model named by its file are found; the file's bytes alone where it resolves to no model."""
    try:
        return resolve_model(str(path), check_runtime=False).sha256
    except ModelError:
        return sha256_of(path)


def _zoo_model(name: str) -> tuple[Path, str, str | None] | None:
    """(exported file, canonical name, int8 quantization or None) of a zoo name: `mobilenet_v2_1_224` is
    `mobilenet_v2_1.0_224`."""
    from harness import zoo

    if not zoo.is_zoo_name(name):
        return None
    spec = zoo.parse(name)
    return zoo.export(name), spec.name, spec.quant


def resolve_model(arg: str, script: Path | None = None, check_runtime: bool = True,
                  runtime: str = "onnxruntime", feeds: FeedRequest | None = None) -> ModelInfo:
    """A path or a zoo name -> ModelInfo. With a user SCRIPT, any existing file is accepted as its input.
    `runtime` (RUNTIME) is the engine of ONNX models: with ncnn or litert they run converted (ncnn_convert,
    litert_convert). With `feeds` (a profile's DIMS, INPUTS and BATCH_SIZE) the model is checked to be runnable
    with them and its facts are those of the sizes it will run at; without, it is read as it is (for reports)."""
    path = Path(arg).expanduser()
    quant = None
    if not path.exists():
        zoo_model = _zoo_model(arg)
        if zoo_model is None:
            raise ModelError(f"model {arg!r} not found: give a path to a model file or a zoo name "
                             "(see `harness zoo list`)")
        path, name, quant = zoo_model
    else:
        name = path.stem
    if not path.is_file():
        raise ModelError(f"model {path} is not a file")
    suffix = path.suffix.lower()
    if script is None and suffix not in KINDS:
        raise ModelError(f"model {path}: unknown extension {suffix or '(none)'!r}; supported: "
                         f"{', '.join(KINDS)} (or pass your own --script)")
    kind, default_script, module, extra = KINDS.get(suffix, ("custom", "", "", ""))
    if script is None and check_runtime and importlib.util.find_spec(module) is None:
        raise ModelError(f"model {path.name} needs {module}, which is not installed: install {extra}")
    path = path.resolve()  # the runs read it there, and its external data from beside it
    if kind == "ncnn":
        return _ncnn_model(path, name, script)
    sha256 = sha256_of(path)
    facts = model_facts(path, sha256) if kind == "onnx" else None  # also rejects a corrupt file, now
    # Checked on every resolve, not only when the facts were read: the files beside a cached model may have changed.
    external = confine(str(path), (facts or {}).get("external_data", []))
    # A model is its graph and its weights: the same graph beside other data files is another model, of another size.
    files = [path, *map(Path, data_files(str(path), external))]
    model = ModelInfo(name=name, path=path, kind=kind, script=(script or BENCH_SCRIPTS_DIR / default_script),
                      sha256=sha256_of(*files) if external else sha256,
                      size_mib=sum(file.stat().st_size for file in files) / 1024**2, facts=facts,
                      external_data=external)
    if feeds is not None and kind == "onnx":
        model = _fed(model, feeds, strict=script is None)
    if feeds is not None and feeds.inputs_file and script is None and (kind != "onnx" or runtime != "onnxruntime"):
        raise ConfigError(f"INPUTS={feeds.inputs_file} is fed by onnxruntime only, and {path.name} runs on "
                          f"{'RUNTIME=' + runtime if kind == 'onnx' else 'its ' + kind + ' engine'}; drop INPUTS "
                          "for random inputs, or run it with RUNTIME=onnxruntime")
    if kind != "onnx" or script is not None:
        return model
    return _on_ncnn(model) if runtime == "ncnn" else _on_litert(model, quant) if runtime == "litert" else model


def _fed(model: ModelInfo, feeds: FeedRequest, strict: bool) -> ModelInfo:
    """The model with what its runs are fed: its dynamic dimensions sized (by INPUTS' arrays, else by DIMS; one
    error line before any run where a size is missing, when `strict`, or a file does not fit) and its facts at those
    sizes."""
    inputs = (model.facts or {}).get("inputs", [])
    sha256 = None
    if feeds.inputs_file:
        arrays, sha256 = load_inputs(feeds.inputs_file)
        sizes = fed_sizes(model.path.name, inputs, arrays, feeds)
    else:
        sizes = dynamic_sizes(model.path.name, inputs, feeds.dims, strict)
    facts = model_facts(model.path, model.sha256, sizes) if sizes else model.facts
    return replace(model, facts=facts, dims=dims_text(sizes), inputs_sha256=sha256,
                   inputs_file=feeds.inputs_file and str(Path(feeds.inputs_file).expanduser().resolve()),
                   script_env=script_env(sizes, (facts or {}).get("inputs", [])))


def _ncnn_model(path: Path, name: str, script: Path | None) -> ModelInfo:
    """A .param given as MODEL, with its weights in the .bin of the same name beside it (one of its model files)."""
    weights = path.with_suffix(".bin")
    if not weights.is_file():
        raise ModelError(f"model {path}: ncnn reads its weights from {weights.name} beside it, which is not there; "
                         "put the .bin of this .param in the same folder")
    return ModelInfo(name=name, path=path, kind="ncnn", script=script or BENCH_SCRIPTS_DIR / "ncnn_bench.py",
                     sha256=sha256_of(path, weights), size_mib=(path.stat().st_size + weights.stat().st_size) / 1024**2,
                     external_data=confine(str(path), [("weights", weights.name)]))


def _on_ncnn(model: ModelInfo) -> ModelInfo:
    """The ONNX model run on ncnn: converted (or found converted) with pnnx. The name, content hash and facts stay
    the ONNX model's; a conversion that fails leaves a model whose runs are kept as errors with its one line."""
    from harness.models.ncnn_convert import CONVERTER, ConversionError, convert, converter_version

    on_ncnn = replace(model, kind="ncnn", script=BENCH_SCRIPTS_DIR / "ncnn_bench.py")
    try:
        converted = convert(model.path, model.sha256, model.name, (model.facts or {}).get("inputs", []))
    except ConversionError as err:
        return replace(on_ncnn, conversion=f"{CONVERTER} {converter_version()}", refused=str(err))
    return replace(on_ncnn, converted=converted.param, conversion=converted.tool,
                   external_data=confine(str(converted.param), [("weights", converted.weights.name)]))


def _on_litert(model: ModelInfo, quant: str | None) -> ModelInfo:
    """The ONNX model run on LiteRT: converted (or found converted) with onnx2tf, as _on_ncnn does with pnnx. A zoo
    int8 variant (`quant`) is its float model quantized by LiteRT's converter, as a phone's int8 model is."""
    from harness import zoo
    from harness.models.litert_convert import ConversionError, conversion_tool, convert

    on_litert = replace(model, kind="tflite", script=BENCH_SCRIPTS_DIR / "tflite_bench.py",
                        conversion=conversion_tool(quant), external_data=())  # the .tflite holds its weights
    source, sha256 = model.path, model.sha256
    if quant:
        source = zoo.export(zoo.parse(model.name).base_name)
        sha256 = sha256_of(source)
    try:
        converted = convert(source, sha256, model.name, (model.facts or {}).get("inputs", []), quant,
                            dim_sizes(model.dims))
    except ConversionError as err:
        return replace(on_litert, refused=str(err))
    return replace(on_litert, converted=converted)


def resolve_script(path: Path, name: str | None = None) -> ModelInfo:
    """A user script profiled as a whole (no model): named after its file unless `name` is given."""
    path = path.expanduser()
    if not path.is_file():
        raise ModelError(f"script {path} not found: give the path of an existing file with --script (make: SCRIPT=...)")
    return ModelInfo(name=name or path.stem, path=path.resolve(), kind=SCRIPT_KIND, script=path.resolve(),
                     sha256=sha256_of(path), size_mib=path.stat().st_size / 1024**2)


def example_models() -> list[Path]:
    """The checked-in example models, smallest first in name order."""
    found = sorted(EXAMPLES_DIR.glob("*.onnx"))
    if not found:
        raise ModelError(f"no example models in {EXAMPLES_DIR}; restore them with `git checkout examples/models` "
                         "or give a model (MODEL=...)")
    return found
