"""The `harness` command: a thin front end. Each subcommand lives in harness/commands/<name>.py and
exposes `register(subparsers)`; library code raises HarnessError and only this module prints it."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import select
import signal
import sys
from typing import TYPE_CHECKING, Any

from harness import __version__
from harness.commands import COMMANDS
from harness.core import progress
from harness.core.errors import HarnessError, user_interrupt
from harness.core.interrupts import INTERRUPT_EXIT_BASE, Interrupted, signal_number, stop_signals

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

COMMAND_MODULES: tuple[str, ...] = tuple(f"harness.commands.{name.replace('-', '_')}" for name in COMMANDS)


def command_name(module: str) -> str:
    """harness.commands.import_device -> import-device: each module registers the command named after it."""
    return module.rsplit(".", 1)[1].replace("_", "-")


class Parser(argparse.ArgumentParser):
    """argparse without prefix matching, for the harness and each of its commands (add_subparsers makes every
    subparser of this class): `--device` is never read as `--device-name`, and a flag misspelt is an error, not
    another flag."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def _print_message(self, message: str, file: SupportsWrite[str] | None = None) -> None:
        """--help and usage errors as argparse writes them, less its dropping of a failed write: a closed pipe
        (`harness --help | head -1`) ends here as it ends every command, in main."""
        if message:
            (file or sys.stderr).write(message)


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """Only the named command's module is imported when argv names one, and none without one (--help, a typo):
    the listing comes from COMMANDS, so the harness answers at once whatever a command loads when it runs."""
    parser = Parser(
        prog="harness", description="Profile ML models under an edge device's CPU and memory limits."
    )
    parser.add_argument("--version", action="version", version=f"harness {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chosen = [m for m in COMMAND_MODULES if argv and command_name(m) == argv[0]]
    for name in chosen:
        importlib.import_module(name).register(subparsers)
    if not chosen:
        for name, line in COMMANDS.items():
            subparsers.add_parser(name, help=line)
    return parser


def main(argv: list[str] | None = None) -> int:
    """The command, ended quietly when its reader goes away (`harness devices --json | head -1`), as Unix tools end:
    no traceback, exit status 128 + SIGPIPE. A broken pipe of the harness's own (a runner's) is no such end."""
    try:
        try:
            return run_command(argv)
        finally:  # here, not at exit (nor after --help's SystemExit): a reader gone is seen by the handler below
            sys.stdout.flush()
    except BrokenPipeError:
        if not output_closed():
            raise
        for stream in (sys.stdout, sys.stderr):  # what is still buffered for them goes nowhere, even at exit
            with contextlib.suppress(OSError, ValueError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
        return 128 + signal.SIGPIPE


def output_closed() -> bool:
    """Whether stdout's or stderr's reader is gone: a pipe whose read end closed polls as an error."""
    poller = select.poll()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a stream with no descriptor (a test's capture) is open
            poller.register(stream.fileno(), select.POLLOUT)
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))


def run_command(argv: list[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    # Everything after the first `--` belongs to the user's bench script, untouched.
    extra: list[str] = []
    if "--" in argv:
        split = argv.index("--")
        argv, extra = argv[:split], argv[split + 1:]
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    progress.show()  # what a long step does (a model's conversion), on stderr
    args.extra_args = extra
    with stop_signals():  # SIGTERM and SIGHUP take Ctrl-C's path, up to the last line printed
        try:
            return int(args.func(args) or 0)
        except HarnessError as err:
            print(f"harness: error: {err}", file=sys.stderr)
            return err.exit_code
        except BaseException as err:
            interrupt = user_interrupt(err)
            if interrupt is None:
                raise
            with contextlib.suppress(OSError):  # SIGHUP: the terminal that would show the line may be gone
                print(interrupted_line(interrupt), file=sys.stderr)
            return INTERRUPT_EXIT_BASE + signal_number(interrupt)


def interrupted_line(interrupt: BaseException) -> str:
    """One line: the signal when it was not Ctrl-C, and what a session that stopped keeps and how to go on."""
    signum = signal_number(interrupt)
    by = "" if signum == signal.SIGINT else f" by {signal.Signals(signum).name}"
    kept = interrupt.kept if isinstance(interrupt, Interrupted) else None
    return f"harness: interrupted{by}; completed runs are kept{f' ({kept})' if kept else ''}"


if __name__ == "__main__":
    sys.exit(main())
