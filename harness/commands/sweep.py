"""`harness sweep MODEL... --cpus 1,2,4`: models x CPUS values x repeats in one interleaved session, one report."""

from __future__ import annotations

import argparse
import os

from harness.commands import COMMANDS
from harness.commands.shared import (
    add_profile_options,
    announce,
    profile_from_args,
    run_and_print,
    session_request,
    write_session_report,
)
from harness.core.config import VARIABLES
from harness.core.errors import ConfigError
from harness.report.console import err_console
from harness.run.assemble import start_session


def parse_cpus_list(text: str) -> list[float]:
    """'1,2,4' -> [1.0, 2.0, 4.0]; each value validated like CPUS."""
    parse, form = VARIABLES["CPUS"][1], VARIABLES["CPUS"][2]
    try:
        values = [parse(part) for part in text.split(",") if part.strip()]
    except ValueError:
        values = []
    if not values:
        raise ConfigError(f"--cpus {text!r} is not valid: expected a comma-separated list of CPUS, each {form}")
    return values


def run(args: argparse.Namespace) -> int:
    """A list (--cpus or make's CPUS) replaces the profile's CPUS; without one, the profile's CPUS is swept."""
    text = args.cpus or os.environ.get("HARNESS_CPUS_LIST")
    cpus_values = parse_cpus_list(text) if text else None
    profile = profile_from_args(args, skip=("cpus",) if text else ())
    start = start_session(profile, session_request(args), cpus_values)
    announce(start)
    code = run_and_print(start.session, args.json)
    if not args.no_report:
        err_console.print(f"report: {write_session_report(start.session)}")
    return code


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("sweep", help=COMMANDS["sweep"],
                                   description=__doc__)
    add_profile_options(parser, "comma-separated CPUS values, e.g. 1,2,4 (default: make's CPUS, else the profile's)")
    parser.add_argument("--no-report", action="store_true", help="skip writing the session report")
    parser.set_defaults(func=run)
