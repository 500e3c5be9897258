r"""NVIDIA Jetson memory logs: `tegrastats` lines and jetson-stats' logger CSV, read as RAM used over a run.

tegrastats prints one line per interval (NVIDIA's tegrastats documentation; jetson-stats parses it with
`RAM (\d+)\/(\d+)(\w)B( ?)\(lfb (\d+)x(\d+)(\w)B\)`, jtop/core/tegra_parse.py), newer releases with a
timestamp first:
    RAM 2448/3964MB (lfb 29x4MB) SWAP 0/1982MB (cached 0MB) CPU [6%@102,4%@102,...] ...
    04-18-2023 10:23:45 RAM 2957/7620MB (lfb 1x2MB) ...
Its MB are MiB: the largest free block it reports is at most 4MB, the kernel's 2^10 pages of 4 KiB.

jetson-stats' logger (examples/jtop_logger.py) writes `jetson.stats` as CSV rows (`time,uptime,CPU1,...,RAM,...`);
its RAM column is the used memory in KiB in jtop 4.0-4.1 (read from /proc/meminfo), in MiB in jtop 3 (taken from
tegrastats) and a fraction of the total since jtop 4.2, which this reader refuses, since it does not say of
how much. KiB and MiB are told apart by size: a running Jetson uses at least a few hundred MiB, which in KiB is
above KIB_FLOOR, and no Jetson has KIB_FLOOR MiB of RAM.

Both are the whole system's RAM, the OS's own use included: peak_memory_mib is the largest sample and
avg_memory_mib their mean. Start the log right before the model and stop it right after; a fit's intercept
(ols, relative) carries the OS's share. Neither names the model: the import takes it from the command line.
"""

from __future__ import annotations

import csv
import io
import re
import statistics

from harness.core import metric_registry
from harness.core.errors import DataError
from harness.device.readings import KIB_PER_MIB, MIB_PER_KIB, Reading, checked_number, header_cells, line_matches

TEGRASTATS = "tegrastats"
JTOP_CSV = "jtop_csv"
RAM = re.compile(r"\bRAM (?P<used>\d+)/(?P<total>\d+)(?P<unit>[kMG])B\b")
UNIT_TO_MIB = {"k": MIB_PER_KIB, "M": 1.0, "G": float(KIB_PER_MIB)}
KIB_FLOOR = 2**17
"""jtop RAM values above this are KiB: 128 GiB in MiB, more than any Jetson's RAM."""
JTOP_COLUMNS = {"time", "RAM"}


def _used_memory(samples_mib: list[float], source: str, what: str) -> dict[str, float]:
    if not samples_mib:
        raise DataError(f"{source}: no {what}; is it a log of the run?")
    return {metric_registry.PEAK_MEMORY: max(samples_mib), metric_registry.AVG_MEMORY: statistics.fmean(samples_mib)}


def tegrastats_looks_like(text: str) -> bool:
    return RAM.search(text) is not None and "(lfb " in text


def parse_tegrastats(text: str, source: str) -> Reading:
    samples = [found.number("used", scale=UNIT_TO_MIB[found["unit"]])
               for found in line_matches(RAM, text.splitlines(), source)]
    metrics = _used_memory(samples, source, "`RAM used/totalMB` sample")
    return Reading(source, TEGRASTATS, metrics, notes=[f"{len(samples)} tegrastats samples"])


def _jtop_header(text: str) -> list[str]:
    first = next((line for line in text.splitlines() if line.strip()), "")
    return header_cells(first)


def jtop_looks_like(text: str) -> bool:
    return set(_jtop_header(text)) >= JTOP_COLUMNS


def _ram_cells(text: str, source: str) -> list[float]:
    """The RAM column's numbers; a cell that is none is one error naming its line."""
    reader = csv.DictReader(io.StringIO(text))
    values = []
    try:
        for row in reader:
            cell = (row.get("RAM") or "").strip()
            if cell:
                values.append(checked_number(cell, f"{source}:{reader.line_num}"))
    except csv.Error as err:
        raise DataError(f"{source}:{reader.line_num}: not a CSV line ({err}); is it jtop_logger.py's CSV?") from None
    return values


def parse_jtop_csv(text: str, source: str) -> Reading:
    values = _ram_cells(text, source)
    if values and max(values) <= 1.0:
        raise DataError(f"{source}: its RAM column is a fraction of the total (jtop 4.2 and later), which does not "
                        "say how much memory; log the run with tegrastats instead")
    scale = MIB_PER_KIB if values and max(values) > KIB_FLOOR else 1.0
    metrics = _used_memory([value * scale for value in values], source, "RAM sample")
    unit = "KiB" if scale != 1.0 else "MiB"
    return Reading(source, JTOP_CSV, metrics, notes=[f"{len(values)} jtop samples, RAM read as {unit}"])
