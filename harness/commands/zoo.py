"""`harness zoo list` and `harness zoo export NAME...`: the built-in architectures and their cached exports."""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import os
import shlex
import shutil
import sys
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from harness import zoo
from harness.commands import COMMANDS
from harness.core.config import load_profile
from harness.core.errors import ConfigError, ModelError
from harness.report.console import out_console
from harness.zoo.cache import write_model_atomically

NCNN_EXTRA_MODULES = ("ncnn", "pnnx")

_GRAMMAR_NOTE = (
    "A name is <family>[_<values>]; append _int8_dynamic or _int8_static for an onnxruntime int8 variant "
    "(e.g. mobilenet_v2_0.5_224_int8_static). A <res> is any multiple of 32 in 32..640. A named input dim besides "
    "the batch (seq, height, width) is dynamic: give its size when profiling (-- --dim seq=128). "
    "Random weights, nothing downloaded; exports are cached in {cache} (HARNESS_ZOO_DIR)."
)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("zoo", help=COMMANDS["zoo"])
    actions = parser.add_subparsers(dest="zoo_command", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="families, their name grammar and the published variants")
    listing.add_argument("--json", action="store_true", help="print JSON on stdout")
    listing.add_argument("--names", action="store_true", help="print one model name per line")
    export = actions.add_parser("export", help="build and cache models; prints each file with its static facts")
    export.add_argument("names", nargs="+", metavar="NAME", help="zoo names, e.g. mobilenet_v2_0.5_224 resnet18")
    export.add_argument("--format", choices=zoo.FORMATS, default="onnx", help="onnx (default) or torchscript")
    export.add_argument("--json", action="store_true", help="print JSON on stdout")
    export.add_argument("--out", type=Path, help="copy each file to DIR/<name>.<ext> (how examples/models is made)")
    needs = actions.add_parser("needs-extra", help="exit 0 when MODEL names zoo models, or DEVICE a library table "
                                                   "(zero-shot), and the zoo extra is missing, "
                                                   "or with --extra ncnn (litert) when the profile's RUNTIME is ncnn "
                                                   "(litert) or MODEL names a .param (.tflite) and that engine's extra "
                                                   "is missing (make profile installs it then)")
    needs.add_argument("names", nargs="*", metavar="NAME", help="model files or zoo names (default: $MODEL)")
    needs.add_argument("--extra", choices=("zoo", "ncnn", "litert"), default="zoo",
                       help="which extra to ask about (default: zoo)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """The ACTION named: list, export or needs-extra."""
    actions = {"list": list_models, "export": export_models, "needs-extra": needs_extra}
    return actions[args.zoo_command](args)


def list_models(args: argparse.Namespace) -> int:
    models = zoo.list_models()
    if args.json:
        json.dump(models, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    if args.names:
        sys.stdout.write("".join(f"{model['name']}\n" for model in models))
        return 0
    families = Table(title="Zoo families", title_justify="left")
    for column in ("name grammar", "values", "what", "source"):
        families.add_column(column, overflow="fold")
    for family in zoo.FAMILIES:
        values = "; ".join(f"{key}: {', '.join(options)}" for key, options in family.choices.items())
        families.add_row(family.grammar, values or "-", family.description, family.source)
    out_console.print(families)
    out_console.print(_GRAMMAR_NOTE.format(cache=zoo.cache_dir()), highlight=False)
    variants = Table(title="Published variants", title_justify="left")
    for column in ("name", "input", "cached"):
        variants.add_column(column)
    for model in models:
        # escaped: a signature's [batch,seq] is text, not rich markup
        variants.add_row(model["name"], escape(model["input"]), "yes" if model["cached"] else "")
    out_console.print(variants)
    return 0


def export_models(args: argparse.Namespace) -> int:
    from harness.models.facts import onnx_facts  # onnx: for an export only, never for `zoo list`

    rows = []
    for name in args.names:
        path = zoo.export(name, args.format)
        if args.out:
            path = write_model_atomically(args.out / f"{zoo.parse(name).name}{path.suffix}",
                                          functools.partial(shutil.copyfile, path))
        facts = onnx_facts(path) if args.format == "onnx" else {}
        rows.append({"name": zoo.parse(name).name, "path": str(path), **facts})
    if args.json:
        json.dump(rows, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    table = Table(title=f"Exported ({args.format})", title_justify="left")
    for column in ("name", "size MiB", "params", "MMACs", "layers", "path"):
        table.add_column(column, justify="left" if column in ("name", "path") else "right", overflow="fold")
    for row in rows:
        numbers = (
            (f"{row['size_mib']:.2f}", f"{row['params']:,}", f"{row['macs'] / 1e6:.1f}", str(row["layers"]))
            if "macs" in row
            else ("", "", "", "")
        )
        table.add_row(row["name"], *numbers, row["path"])
    out_console.print(table)
    return 0


def needs_extra(args: argparse.Namespace) -> int:
    """0 when a zoo name is asked for but torch, torchvision or onnxscript is missing (make then installs them); with
    --extra ncnn, when ncnn runs the session's models but ncnn or pnnx is missing; with --extra litert, when LiteRT
    runs them but ai-edge-litert is missing, or onnx2tf's venv when RUNTIME is litert."""
    names = args.names or shlex.split(os.environ.get("HARNESS_MODEL", ""))
    if args.extra == "ncnn":
        return 0 if needs_ncnn(names) and any(importlib.util.find_spec(m) is None for m in NCNN_EXTRA_MODULES) else 1
    if args.extra == "litert":
        return 0 if litert_missing(names) else 1
    return 0 if zoo.unbuildable(names) or (zero_shot_device() and zoo.extra_missing()) else 1


def zero_shot_device() -> bool:
    """Whether DEVICE (make predict) names a shipped library table, whose models the zoo builds for zero-shot."""
    name = os.environ.get("HARNESS_DEVICE", "")
    if not name:
        return False
    from harness.device.library import shipped_tables  # pandas: only when a device is named

    return name in {table.name for table in shipped_tables()}


def needs_ncnn(names: list[str]) -> bool:
    """Whether ncnn runs some of `names`: the profile says RUNTIME=ncnn, or a name is a .param."""
    return any(Path(name).suffix.lower() == ".param" for name in names) or profile_runtime() == "ncnn"


def litert_missing(names: list[str]) -> bool:
    """Whether LiteRT runs some of `names` (a .tflite, or RUNTIME=litert) without ai-edge-litert, or RUNTIME=litert
    converts them without onnx2tf's venv."""
    from harness.models.litert_convert import converter_versions

    if profile_runtime() == "litert":
        try:
            converter_versions()
        except ModelError:
            return True
        return False
    tflite = any(Path(name).suffix.lower() == ".tflite" for name in names)
    return tflite and importlib.util.find_spec("ai_edge_litert") is None


def profile_runtime() -> str | None:
    """RUNTIME of the profile every layer make reads; None when it does not load (`harness profile` then names what
    is wrong in it)."""
    try:
        return load_profile(os.environ.get("HARNESS_ENV_FILE") or None).runtime
    except ConfigError:
        return None
