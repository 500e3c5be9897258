"""`harness profile MODEL...`: measure models under the device profile's limits, REPEATS times each."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands import COMMANDS
from harness.commands.shared import (
    add_profile_options,
    announce,
    print_notes,
    print_refusals,
    profile_env_file,
    profile_from_args,
    run_and_print,
    session_request,
    write_session_report,
)
from harness.core.config import load_profile
from harness.report.console import err_console
from harness.run.assemble import resume_session, start_session

NEXT_STEPS = (
    "your model:  make profile MODEL=path/to/model.onnx   (or a zoo name: MODEL=mobilenet_v2_0.5_224)",
    "your script: make profile SCRIPT=job.py ARGS=\"--epochs 1\"   (profiled as a whole)",
    "a device:    make profile ENV=devices/raspberry-pi-4.env MODEL=...   (presets in devices/)",
)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("profile", help=COMMANDS["profile"],
                                   description=__doc__)
    add_profile_options(parser, "CPUS, e.g. 2 or 0.5")
    parser.add_argument("--resume", metavar="SESSION", help="finish the runs an interrupted session did not do")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.resume:
        return resume(args)
    start = start_session(profile_from_args(args), session_request(args))
    announce(start)
    code = run_and_print(start.session, args.json)
    if start.examples:
        report = write_session_report(start.session)
        err_console.print(f"\n[bold]Next[/]: open the report: {report}", highlight=False)
        for line in NEXT_STEPS:
            err_console.print(f"  {line}", highlight=False)
    return code


def resume(args: argparse.Namespace) -> int:
    """Run what an interrupted session did not, with the profile and plan it stored (only --env and --results-dir
    say where to find it)."""
    base = load_profile(profile_env_file(args), {"RESULTS_DIR": args.results_dir} if args.results_dir else None)
    start = resume_session(Path(base.results_dir), args.resume, session_request(args))
    session = start.session
    err_console.print(f"resuming {session.plan.session_id}: {len(session.plan.specs)} planned runs · "
                      f"{session.backend_reason}")
    print_refusals(session.plan.models)
    print_notes(start.new_notes)
    return run_and_print(session, args.json)
