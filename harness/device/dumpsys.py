"""Android `dumpsys meminfo <package>` output: the app process's PSS and RSS, in KiB.

The wording, from AOSP frameworks/base (ActivityManagerService prints the header, ActivityThread.dumpMemInfoTable
the rest):
    Applications Memory Usage (in Kilobytes):
    ** MEMINFO in pid 5865 [com.example.app] **
     ... a table whose `TOTAL` row starts with the total PSS ...
     App Summary
                           Pss(KB)                        Rss(KB)
               TOTAL PSS:    44224            TOTAL RSS:    93520       TOTAL SWAP PSS:        0
Before Android 10 the summary has `TOTAL:` (PSS) and no RSS. Kilobytes are KiB: the figures are summed from
/proc/<pid>/smaps, which counts in kB of 1024 bytes. A file may hold several snapshots (one dumpsys per interval
while the model runs): each figure is the largest of them. RSS becomes peak_rss_mib (the resident set the harness
also reports) and PSS pss_mib, stored but not fitted. The output names the app, not the model: the import takes
the model's name from the command line.
"""

from __future__ import annotations

import re

from harness.core import metric_registry
from harness.core.errors import DataError
from harness.device.readings import MIB_PER_KIB, Reading, checked_number, tool_lines

NAME = "dumpsys_meminfo"
SNAPSHOT = "** MEMINFO in pid"
MARKERS = (SNAPSHOT, "Applications Memory Usage (in Kilobytes)")
SUMMARY_PSS = re.compile(r"^\s*TOTAL(?: PSS)?:\s+(?P<kb>[\d,]+)")
SUMMARY_RSS = re.compile(r"\bTOTAL RSS:\s+(?P<kb>[\d,]+)")
TABLE_TOTAL = re.compile(r"^\s*TOTAL\s+(?P<kb>[\d,]+)\s")


def looks_like(text: str) -> bool:
    return any(marker in text for marker in MARKERS)


def _snapshots(lines: list[str]) -> list[tuple[int, list[str]]]:
    """(index of its first line, its lines) per `** MEMINFO in pid` block (the whole text when it has no such
    line)."""
    starts = [i for i, line in enumerate(lines) if SNAPSHOT in line] or [0]
    return [(start, lines[start:end]) for start, end in zip(starts, [*starts[1:], len(lines)], strict=True)]


def _snapshot_kib(start: int, lines: list[str], source: str) -> tuple[float | None, float | None]:
    """(total PSS, total RSS) in KiB of one snapshot: the summary's figures, else the table's TOTAL row for PSS."""
    pss = rss = table_pss = None
    for number_in_file, line in enumerate(lines, start=start + 1):
        where = f"{source}:{number_in_file}"
        if (found := SUMMARY_PSS.match(line)) and pss is None:
            pss = checked_number(found["kb"], where)
        if (found := SUMMARY_RSS.search(line)) and rss is None:
            rss = checked_number(found["kb"], where)
        if (found := TABLE_TOTAL.match(line)) and table_pss is None:
            table_pss = checked_number(found["kb"], where)
    return (pss if pss is not None else table_pss), rss


def parse(text: str, source: str) -> Reading:
    snapshots = [_snapshot_kib(start, lines, source) for start, lines in _snapshots(tool_lines(text))]
    pss = [value for value, _ in snapshots if value is not None]
    rss = [value for _, value in snapshots if value is not None]
    if not pss and not rss:
        raise DataError(f"{source}: no `TOTAL PSS:` or `TOTAL` line; is it `dumpsys meminfo <package>` of a running "
                        "app (not the all-process summary)?")
    metrics = {}
    if rss:
        metrics[metric_registry.PEAK_RSS] = max(rss) * MIB_PER_KIB
    if pss:
        metrics["pss_mib"] = max(pss) * MIB_PER_KIB
    return Reading(source, NAME, metrics, notes=[f"{len(snapshots)} meminfo snapshot(s)"])
