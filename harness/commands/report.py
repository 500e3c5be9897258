"""`harness report`: Markdown + self-contained HTML report of a session, with PNG figures and CSV/JSON tables."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.analysis.run_values import ALL_SESSIONS
from harness.commands import COMMANDS
from harness.commands.shared import add_answer_options, add_results_options, env_default
from harness.core.config import resolve_results_dir
from harness.core.errors import StorageError
from harness.report.console import out_console
from harness.report.document import REPORT_DIR, answer_markdown, build_report, write_report
from harness.store.results import ensure_writable_dir, list_sessions, resolve_session


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "report", help=COMMANDS["report"],
        description="Summary, ranking and, for every imported device, the calibration with its plots.",
    )
    add_results_options(parser, json_flag=False)
    parser.add_argument("--device", action="append", default=None,
                        help="calibrate against this device only, a device whose measurements the harness holds (a "
                             "name given to import-device; repeatable; default: every imported device)")
    parser.add_argument("--group-by", default=env_default("HARNESS_GROUP_BY") or "cpus",
                        help="calibration groups: cpus (default) or a tag column of the device CSV, as for regress")
    add_answer_options(parser)
    parser.add_argument("--out", type=Path, help=f"output directory (default: <session>/{REPORT_DIR})")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    results_dir = resolve_results_dir(args.results_dir)
    devices = args.device or ([env_default("HARNESS_DEVICE")] if env_default("HARNESS_DEVICE") else None)
    if args.session == ALL_SESSIONS:
        sessions = list_sessions(results_dir)
    else:
        sessions = [resolve_session(results_dir, args.session)]
    for session_dir in sessions:
        out = args.out / session_dir.name if args.out and len(sessions) > 1 else args.out or session_dir / REPORT_DIR
        ensure_writable_dir(out, "report directory" + (" (--out)" if args.out else ""))
        report = build_report(results_dir, session_dir, devices, args.group_by, args.accuracy, args.max_latency_ms)
        try:
            written = write_report(report, out)
        except StorageError:  # the answer still reaches the user, then the one line of what was not written
            out_console.print(answer_markdown(report), markup=False, highlight=False, soft_wrap=True)
            raise
        out_console.print(f"report of session {session_dir.name}: {out / 'report.html'} ({len(written)} files)",
                     highlight=False)
    return 0
