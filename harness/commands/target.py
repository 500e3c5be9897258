"""`harness target check|setup|clean ssh://...`: what a board has and lacks, its engines installed into a venv of the
harness's own there (wheels downloaded here for its platform, copied over), and that venv removed (docs/targets.md).
"""

from __future__ import annotations

import argparse
import os

from harness.backends.target import setup
from harness.commands import COMMANDS
from harness.commands.shared import print_board_check, print_json
from harness.core.targets import Address, target_addresses
from harness.report.console import out_console

RUNTIMES = tuple(setup.PACKAGES)


def addresses(args: argparse.Namespace) -> tuple[Address, ...]:
    text = " ".join(args.targets) or os.environ.get("HARNESS_SET_TARGET", "")
    found = target_addresses(text, "harness target")
    if not found:
        from harness.core.errors import ConfigError

        raise ConfigError("harness target: name a board, e.g. `harness target check ssh://pi@raspberrypi.local` "
                          "(or TARGET=...)")
    return found


def run_check(args: argparse.Namespace) -> int:
    for address in addresses(args):
        if args.json:
            facts, lacks = setup.check(address)
            print_json({"target": address.url, "facts": facts, "lacks": lacks})
        else:
            print_board_check(address)
    return 0


def run_setup(args: argparse.Namespace) -> int:
    runtimes = args.runtime or ["onnxruntime"]
    for address in addresses(args):
        report = setup.setup(address, runtimes)
        if args.json:
            print_json({"target": report.url, "packages": report.packages, "seconds": report.seconds,
                        "bytes_sent": report.bytes_sent})
            continue
        steps = ", ".join(f"{step} {seconds:.1f} s" for step, seconds in report.seconds.items())
        out_console.print(f"{report.url}: venv ~/{setup.ENV} has "
                          f"{', '.join(f'{k} {v}' for k, v in sorted(report.packages.items()))} "
                          f"({report.bytes_sent / 1024**2:.1f} MiB sent; {steps})", highlight=False, markup=False)
    return 0


def run_clean(args: argparse.Namespace) -> int:
    for address in addresses(args):
        setup.clean(address)
        out_console.print(f"{address.url}: removed ~/{setup.BASE} (the harness's venv and session files)",
                          highlight=False, markup=False)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("target", help=COMMANDS["target"], description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    for name, func, text in (("check", run_check, "what the board has and lacks (Python, engines, cgroups, energy)"),
                             ("setup", run_setup, "install the engines into a venv on the board"),
                             ("clean", run_clean, "remove the harness's venv and files from the board")):
        action = actions.add_parser(name, help=text, description=text)
        action.add_argument("targets", nargs="*", metavar="ssh://USER@HOST[:PORT]",
                            help="the boards (default: $TARGET)")
        if name == "setup":
            action.add_argument("--runtime", action="append", choices=RUNTIMES,
                                help="an engine to install (repeatable; default: onnxruntime)")
        if name != "clean":
            action.add_argument("--json", action="store_true", help="print the result as JSON")
        action.set_defaults(func=func)
