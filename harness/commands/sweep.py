"""`harness sweep MODEL... --cpus 1,2,4`: models x CPUS values x repeats in one interleaved session, one report."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from harness.commands.profile import add_profile_options, execute, profile_from_args
from harness.config import VARIABLES
from harness.console import err_console
from harness.errors import ConfigError
from harness.models import ModelInfo
from harness.report import REPORT_DIR, build_report, write_report
from harness.session import Plan, plan_session
from harness.store import new_session_id, resolve_session


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


def run_sweep(args: argparse.Namespace) -> int:
    cpus_values = parse_cpus_list(args.cpus or os.environ.get("HARNESS_CPUS_LIST") or "1")
    profile = profile_from_args(args, skip=("cpus",))
    extra = tuple(getattr(args, "extra_args", ()))

    def plan_for(models: list[ModelInfo]) -> Plan:
        return plan_session(profile, models, cpus_values, extra, new_session_id(), args.seed, args.keep_samples)

    code = execute(profile, plan_for, args)
    if not args.no_report:
        session_dir = resolve_session(Path(profile.results_dir), None)
        out = session_dir / REPORT_DIR
        write_report(build_report(Path(profile.results_dir), session_dir), out)
        err_console.print(f"report: {out / 'report.html'}")
    return code


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("sweep", help="models x CPUS values x repeats, one session and one report",
                                   description=__doc__)
    add_profile_options(parser, "comma-separated CPUS values, e.g. 1,2,4 (default: $CPUS_LIST or 1)")
    parser.add_argument("--no-report", action="store_true", help="skip writing the session report")
    parser.set_defaults(func=run_sweep)
