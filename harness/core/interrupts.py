"""SIGTERM and SIGHUP stop the harness the way Ctrl-C does.

`docker stop`, systemd, Kubernetes, CI cancellation and `timeout` send SIGTERM; a closed terminal sends SIGHUP. Left to
Python's defaults either one kills the harness outright: no run torn down, no session marked interrupted, no `--resume`
line. While `stop_signals()` is in force each of them raises `Interrupted`, a KeyboardInterrupt, in the main thread, so
every path Ctrl-C takes (the run in flight torn down, the runners started ahead and their cgroups removed, containers
removed, the session marked interrupted, one line with its `--resume` command) is the path they take. The first one
raises; later ones are ignored until the harness has finished cleaning up, so a second SIGTERM (systemd's, a
supervisor's repeat) cannot cut that short. A signal ignored when the harness started (`nohup` ignores SIGHUP) stays
ignored. The CLI exits with 128 + the signal's number, as a shell reports a process
a signal ended: 130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP (INTERRUPT_EXIT_BASE).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
"""The signals turned into an interruption, beside SIGINT (which Python already raises as KeyboardInterrupt)."""
INTERRUPT_EXIT_BASE = 128
"""An interrupted harness exits with INTERRUPT_EXIT_BASE + the signal's number (130, 143, 129)."""


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where Ctrl-C's KeyboardInterrupt would be, so every handler of one handles the other;
    and any of the three once a session has stopped for it, with `kept`: what it kept and how to go on."""

    def __init__(self, signum: int, kept: str | None = None) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum, self.kept = signum, kept


def signal_number(interrupt: BaseException) -> int:
    """The signal behind an interruption: Interrupted's, else SIGINT (Ctrl-C's own KeyboardInterrupt)."""
    return interrupt.signum if isinstance(interrupt, Interrupted) else signal.SIGINT


@contextlib.contextmanager
def stop_signals() -> Iterator[None]:
    """Within: SIGTERM and SIGHUP (those not ignored at the start) raise Interrupted in the main thread (the first;
    later ones are ignored); the handlers before are restored on the way out. Elsewhere than the main thread (a test
    driving the CLI from a thread) signal handlers cannot be set, and nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, _frame: FrameType | None) -> None:
        for number in previous:
            signal.signal(number, _ignore)  # a handler, not SIG_IGN: a process started meanwhile would inherit that
        raise Interrupted(signum)

    previous = {number: signal.getsignal(number) for number in STOP_SIGNALS}
    previous = {number: handler for number, handler in previous.items() if handler is not signal.SIG_IGN}
    for number in previous:
        signal.signal(number, stop)
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _ignore(_signum: int, _frame: FrameType | None) -> None:
    """A stop signal after the first: the harness is already stopping."""
