"""`harness sweep MODEL... --cpus 1,2,4`: models x CPUS values x repeats in one interleaved session, one report."""

from __future__ import annotations

import argparse
import os

from harness.commands import COMMANDS
from harness.commands.shared import (
    add_profile_options,
    announce,
    run_and_print,
    start_from_args,
    write_session_report,
)
from harness.core.errors import ConfigError
from harness.report.console import err_console


def cpus_list(text: str) -> list[str]:
    """'1,2,4' -> ['1', '2', '4'], each validated as CPUS where the session is planned."""
    values = [part.strip() for part in text.split(",") if part.strip()]
    if not values:
        raise ConfigError(f"--cpus {text!r} is not valid: expected a comma-separated list of CPUS values")
    return values


def run(args: argparse.Namespace) -> int:
    """A list (--cpus or make's CPUS) replaces the profile's CPUS; without one, the profile's CPUS is swept."""
    text = args.cpus or os.environ.get("HARNESS_CPUS_LIST")
    start = start_from_args(args, cpus_list(text) if text else None)
    announce(start)
    code = run_and_print(start.session, args.json)
    if not args.no_report:
        err_console.print(f"report: {write_session_report(start.session, args)}")
    return code


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("sweep", help=COMMANDS["sweep"],
                                   description=__doc__)
    add_profile_options(parser, "comma-separated CPUS values, e.g. 1,2,4 (default: make's CPUS, else the profile's)")
    parser.add_argument("--no-report", action="store_true", help="skip writing the session report")
    parser.set_defaults(func=run)
