"""What a long step is doing, for people. The library says it through the `harness` logger, silent unless asked (as
library calls are); the CLI shows it on stderr (show()), as a notebook can with `harness.core.progress.show()`.
Model conversion (pnnx, onnx2tf) says here what it converts and how long it took."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

LOGGER = logging.getLogger("harness")


class _StderrLines(logging.Handler):
    """Each message as one line on the stderr of the moment (a test's captured one included), flushed."""

    def emit(self, record: logging.LogRecord) -> None:
        sys.stderr.write(self.format(record) + "\n")
        sys.stderr.flush()


def show() -> None:
    """Show the harness's progress messages on stderr (once, however often called)."""
    if not shown():
        LOGGER.addHandler(_StderrLines())
    LOGGER.setLevel(logging.INFO)
    LOGGER.propagate = False


def shown() -> bool:
    """Whether progress is shown (show() was called): what else a step prints (a child's output) follows it."""
    return any(isinstance(handler, _StderrLines) for handler in LOGGER.handlers)


@contextmanager
def step(doing: str) -> Iterator[None]:
    """`doing ...` before the step, and `doing: done in 8.2 s` after it (or `failed after`, when it raised)."""
    LOGGER.info("%s ...", doing)
    started = time.monotonic()
    try:
        yield
    except BaseException:
        LOGGER.info("%s: failed after %.1f s", doing, time.monotonic() - started)
        raise
    LOGGER.info("%s: done in %.1f s", doing, time.monotonic() - started)
