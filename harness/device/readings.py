"""What one device source says about one model: a row of a device CSV or a device tool's log, in harness units.

Every reader turns its tool's wording into Readings; the import combines them (several readings of one model
and thread count are repeats) and stores them. Units are the harness's: `_ms`, `_s`, `_mib`, `_w`, `_mj`.
"""

from __future__ import annotations

import csv
import math
import re
import statistics
from collections.abc import Iterator
from dataclasses import dataclass, field

from harness.core import metric_registry
from harness.core.errors import DataError

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
MW_PER_W = 1000.0
"""Unit factors, multiplied by: the device CSV's `_us`, `_kb`, `_mb` and `_gb` columns and the logs' figures are
converted by the same numbers, so a value reaches the fit identically from either."""


@dataclass(frozen=True)
class OpTime:
    """One node type of a device's per-operator profile: how many nodes, and the mean ms per inference of them all."""

    node_type: str
    nodes: int
    mean_ms: float


@dataclass(frozen=True)
class PowerTrace:
    """Power samples of one log (harness.device.power reads them): the input's (W) and each rail's (metric name →
    W), with their times (s) when the log has them."""

    input_w: tuple[float, ...]
    rails_w: dict[str, tuple[float, ...]]
    times_s: tuple[float, ...] | None = None

    def duration_s(self, interval_s: float | None) -> float | None:
        """Time the samples span: first to last time, else one interval per sample; None when neither is known."""
        if self.times_s is not None and len(self.times_s) > 1:
            return self.times_s[-1] - self.times_s[0]
        return len(self.input_w) * interval_s if interval_s else None

    def energy_j(self, interval_s: float | None) -> float | None:
        """The input's energy over the log (J): trapezoids between timed samples, else power × interval per
        sample."""
        if self.times_s is not None and len(self.times_s) > 1:
            return sum((t1 - t0) * (p0 + p1) / 2 for t0, t1, p0, p1 in zip(
                self.times_s, self.times_s[1:], self.input_w, self.input_w[1:], strict=False))
        return sum(self.input_w) * interval_s if interval_s else None

    def avg_power_w(self) -> float:
        """Mean input power: time-weighted where the samples have times, else their mean (equal intervals)."""
        duration = self.duration_s(None)
        if duration:
            return (self.energy_j(None) or 0.0) / duration
        return statistics.fmean(self.input_w)

    def split(self, idle_s: float, interval_s: float | None) -> tuple[PowerTrace, PowerTrace] | None:
        """(the first `idle_s` seconds, the rest): by the samples' times, else one interval per sample; None when
        neither is known or either part would be empty."""
        if self.times_s is not None and len(self.times_s) > 1:
            cut = sum(t < self.times_s[0] + idle_s for t in self.times_s)
        elif interval_s:
            cut = round(idle_s / interval_s)
        else:
            return None
        if not 0 < cut < len(self.input_w):
            return None

        def part(start: int, stop: int | None) -> PowerTrace:
            rails = {rail: values[start:stop] for rail, values in self.rails_w.items()}
            return PowerTrace(self.input_w[start:stop], rails,
                              self.times_s[start:stop] if self.times_s is not None else None)

        return part(0, cut), part(cut, None)

    def metrics(self) -> dict[str, float]:
        """avg_power_w and each rail's mean power (`power_cpu_w`, ...)."""
        return {metric_registry.AVG_POWER: self.avg_power_w(),
                **{rail: statistics.fmean(samples) for rail, samples in self.rails_w.items()}}


@dataclass
class Reading:
    """One model's numbers from one source. `model` is None where the source does not name it (a tegrastats log):
    the import then takes the name given on the command line. `power` is a power log's samples, from which the
    import derives energy per inference."""

    source: str
    format: str
    metrics: dict[str, float]
    model: str | None = None
    cpus: float | None = None
    ops: tuple[OpTime, ...] = ()
    notes: list[str] = field(default_factory=list)
    power: PowerTrace | None = None


def tool_lines(text: str) -> list[str]:
    """The text's lines without a logcat or severity prefix, so one pattern reads a log however it was captured."""
    return [LOG_PREFIX.sub("", line, count=1).rstrip() for line in text.splitlines()]


def number(text: str) -> float:
    """A number as the tools print it, thousands separators (dumpsys) allowed."""
    return float(text.replace(",", ""))


def csv_cells(line: str, where: str) -> list[str]:
    """One CSV line's cells; a line the csv module cannot read (a field over its 128 KiB limit) is one DataError
    naming `where`."""
    try:
        return next(csv.reader([line]), [])
    except csv.Error as err:
        raise DataError(f"{where}: not a CSV line ({err}); fix or remove that line") from None


def header_cells(line: str) -> list[str]:
    """A would-be CSV header's cells, stripped, for telling formats apart: none when it is no CSV line at all."""
    try:
        return [cell.strip() for cell in next(csv.reader([line]), [])]
    except csv.Error:
        return []


def checked_number(text: str, where: str, negative: bool = False, scale: float = 1.0) -> float:
    """`text` times `scale` (its unit's factor) as a finite number, non-negative unless `negative`: a figure cut
    short, edited or overflowed (`1.2.`, `nan`, `inf`, 400 digits) is one DataError naming `where` (`file:line`),
    not a value that reaches a fit."""
    try:
        value = number(text) * scale
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or (value < 0 and not negative):
        kind = "finite number" if negative else "finite, non-negative number"
        raise DataError(f"{where}: {text!r} is not a {kind}; was the log cut or edited? Fix or remove that line")
    return value


@dataclass(frozen=True)
class LineMatch:
    """A pattern's match on one line of a log, with the place (`file:line`) its numbers' errors name."""

    where: str
    match: re.Match[str]

    def __getitem__(self, group: str) -> str:
        return self.match[group]

    def number(self, group: str, negative: bool = False, scale: float = 1.0) -> float:
        return checked_number(self.match[group], self.where, negative, scale)


def line_matches(pattern: re.Pattern[str], lines: list[str], source: str, start: int = 0) -> Iterator[LineMatch]:
    """Every line of `lines[start:]` that `pattern` matches (searched), numbered as in the file."""
    for number_in_file, line in enumerate(lines[start:], start=start + 1):
        if found := pattern.search(line):
            yield LineMatch(f"{source}:{number_in_file}", found)


def first_match(pattern: re.Pattern[str], lines: list[str], source: str, start: int = 0) -> LineMatch | None:
    return next(line_matches(pattern, lines, source, start), None)
