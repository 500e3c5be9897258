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
    run_and_print,
    session_request,
    start_from_args,
    warn,
    write_session_report,
)
from harness.core.config import load_profile
from harness.core.errors import HarnessError
from harness.report.console import err_console
from harness.run.assemble import resume_session
from harness.run.session import BaseSession

NEXT_STEPS = (
    "your model:  make profile MODEL=path/to/model.onnx   (or a zoo name: MODEL=mobilenet_v2_0.5_224)",
    "your script: make profile SCRIPT=job.py ARGS=\"--epochs 1\"   (profiled as a whole)",
    "a device:    make profile ENV=devices/raspberry-pi-4.env MODEL=...   (presets in devices/)",
)
"""What to try after the built-in examples."""
NEXT_STEPS_OWN = (
    "rank:        harness rank   (models whose difference is not significant share a rank)",
    "a device:    make profile ENV=devices/raspberry-pi-4.env MODEL=...   (presets in devices/)",
    "predict it:  harness import-device my_device.csv --device my-device && make predict MODEL=... DEVICE=my-device",
)
"""What to try after a session of the user's own models."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("profile", help=COMMANDS["profile"],
                                   description=__doc__)
    add_profile_options(parser, "CPUS, e.g. 2 or 0.5")
    parser.add_argument("--resume", metavar="SESSION", help="finish the runs an interrupted session did not do")
    parser.add_argument("--no-report", action="store_true",
                        help="skip the session's report (written after every session, but not with --json)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.resume:
        return resume(args)
    start = start_from_args(args)
    announce(start)
    code = run_and_print(start.session, args.json)
    report_and_next_steps(args, start.session, NEXT_STEPS if start.examples else NEXT_STEPS_OWN)
    return code


def report_and_next_steps(args: argparse.Namespace, session: BaseSession, steps: tuple[str, ...]) -> None:
    """After every session (unless --json or --no-report): its report, and what to do next."""
    if args.json or args.no_report:
        return
    try:
        report = write_session_report(session, args)
    except HarnessError as err:  # a full disk: the session is kept, and the message says how to write it later
        warn(str(err))
        return
    err_console.print(f"\n[bold]Next[/]: open the report: {report}", highlight=False)
    for line in steps:
        err_console.print(f"  {line}", highlight=False)


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
    code = run_and_print(session, args.json)
    report_and_next_steps(args, session, NEXT_STEPS_OWN)
    return code
