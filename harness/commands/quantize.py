"""`harness quantize MODEL --mode dynamic|static`: write an onnxruntime int8 variant and show the size change."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness import zoo
from harness.commands import COMMANDS
from harness.core.errors import ModelError
from harness.models.facts import onnx_facts
from harness.report.console import out_console
from harness.zoo.quantize import MODES, quantize


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "quantize", help=COMMANDS["quantize"],
        description="dynamic: uint8 weights, activations quantized at run time. static: int8 weights and "
        "activations calibrated on random inputs shaped like the model's (QDQ). A zoo MODEL gets the cached "
        "variant <name>_int8_<mode>, which `make profile MODEL=...` accepts directly.",
    )
    parser.add_argument("model", metavar="MODEL", help="an .onnx file or a zoo name")
    parser.add_argument("--mode", choices=MODES, default="dynamic", help="dynamic (default) or static")
    parser.add_argument("--out", type=Path, help="output file (default: <stem>_int8_<mode>.onnx beside MODEL)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    source = Path(args.model).expanduser()
    if source.exists():
        target = quantize(source, args.mode, args.out)
    elif zoo.is_zoo_name(args.model):
        spec = zoo.parse(args.model)
        if spec.quant:
            raise ModelError(f"{spec.name} is already quantized; give the float model {spec.base_name}")
        source = zoo.export(spec.name)
        variant = f"{spec.name}_int8_{args.mode}"
        target = quantize(source, args.mode, args.out) if args.out else zoo.export(variant)
    else:
        raise ModelError(f"model {args.model!r} not found: give an .onnx file or a zoo name (see `harness zoo list`)")
    before, after = onnx_facts(source), onnx_facts(target)
    out_console.print(
        f"{target}\n{args.mode} int8: {before['size_mib']:.2f} MiB -> {after['size_mib']:.2f} MiB "
        f"({after['size_mib'] / before['size_mib']:.2f}x), MACs {after['macs'] / 1e6:.1f}M, inputs unchanged: "
        f"{before['inputs'] == after['inputs']}",
        highlight=False,
    )
    return 0
