"""`harness zoo list` and `harness zoo export NAME...`: the built-in architectures and their cached exports."""

from __future__ import annotations

import argparse
import json
import sys

from rich.table import Table

from harness import zoo
from harness.commands._analysis import stdout as _console
from harness.model_facts import onnx_facts

_GRAMMAR_NOTE = (
    "A name is <family>[_<values>]; append _int8_dynamic or _int8_static for an onnxruntime int8 variant "
    "(e.g. mobilenet_v2_0.5_224_int8_static). MobileNet <res> is any multiple of 32 in 32..640. "
    "Random weights, nothing downloaded; exports are cached in {cache} (HARNESS_ZOO_DIR)."
)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("zoo", help="list or export the built-in model zoo (random weights)")
    actions = parser.add_subparsers(dest="zoo_command", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="families, their name grammar and the published variants")
    listing.add_argument("--json", action="store_true", help="print JSON on stdout")
    listing.add_argument("--names", action="store_true", help="print one model name per line")
    listing.set_defaults(func=run_list)
    export = actions.add_parser("export", help="build and cache models; prints each file with its static facts")
    export.add_argument("names", nargs="+", metavar="NAME", help="zoo names, e.g. mobilenet_v2_0.5_224 resnet18")
    export.add_argument("--format", choices=zoo.FORMATS, default="onnx", help="onnx (default) or torchscript")
    export.add_argument("--json", action="store_true", help="print JSON on stdout")
    export.set_defaults(func=run_export)


def run_list(args: argparse.Namespace) -> int:
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
    _console.print(families)
    _console.print(_GRAMMAR_NOTE.format(cache=zoo.cache_dir()), highlight=False)
    variants = Table(title="Published variants", title_justify="left")
    for column in ("name", "input", "cached"):
        variants.add_column(column)
    for model in models:
        variants.add_row(model["name"], "x".join(map(str, model["input_shape"])), "yes" if model["cached"] else "")
    _console.print(variants)
    return 0


def run_export(args: argparse.Namespace) -> int:
    rows = []
    for name in args.names:
        path = zoo.export(name, args.format)
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
    _console.print(table)
    return 0
