"""What one device source says about one model: a row of a device CSV or a device tool's log, in harness units.

Every reader turns its tool's wording into Readings; the import combines them (several readings of one model
and thread count are repeats) and stores them. Units are the harness's: `_ms`, `_s`, `_mib`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

LOG_PREFIX = re.compile(
    r"^\s*(?:\d\d-\d\d(?:-\d{4})? \d\d:\d\d:\d\d(?:\.\d+)?\s+(?:\d+\s+\d+\s+)?"  # logcat's time (pid tid)
    r"[VDIWEF][/ ]\S+\s*(?:\(\s*\d+\))?\s*:\s?)?"  # level/tag (pid):
    r"(?:(?:INFO|WARNING|WARN|ERROR|VERBOSE|DEBUG): )?"  # the TFLite logger's severity
)
"""What a log line may carry before the tool's own text: an Android logcat prefix (`07-14 13:23:08.133 25289 25289 I
tflite  : ` in the threadtime format, `07-08 15:33:55.768 I/tflite  ( 5395): ` in the time format) and the
TFLite logger's severity (`INFO: `)."""

MIB = 2**20
KIB_PER_MIB = 1024
MS_PER_US = 1e-3
MIB_PER_KIB = 2**10 / MIB
MIB_PER_MB = 1e6 / MIB
MIB_PER_GB = 1e9 / MIB
"""Unit factors, multiplied by: the device CSV's `_us`, `_kb`, `_mb` and `_gb` columns and the logs' figures are
converted by the same numbers, so a value reaches the fit identically from either."""


@dataclass(frozen=True)
class OpTime:
    """One node type of a device's per-operator profile: how many nodes, and the mean ms per inference of them all."""

    node_type: str
    nodes: int
    mean_ms: float


@dataclass
class Reading:
    """One model's numbers from one source. `model` is None where the source does not name it (a tegrastats log):
    the import then takes the name given on the command line."""

    source: str
    format: str
    metrics: dict[str, float]
    model: str | None = None
    cpus: float | None = None
    ops: tuple[OpTime, ...] = ()
    notes: list[str] = field(default_factory=list)


def tool_lines(text: str) -> list[str]:
    """The text's lines without a logcat or severity prefix, so one pattern reads a log however it was captured."""
    return [LOG_PREFIX.sub("", line, count=1).rstrip() for line in text.splitlines()]


def number(text: str) -> float:
    """A number as the tools print it, thousands separators (dumpsys) allowed."""
    return float(text.replace(",", ""))
