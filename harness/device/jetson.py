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

Both carry the board's power rails too (harness.device.power turns them into energy). tegrastats prints each rail as
`NAME current/average` in mW (jetson-stats' tegra_parse.py: "[VDD_name] X/Y, X = Current power consumption in
milliwatts. Y = Average power consumption in milliwatts."), bare on L4T 32 and with the unit on Orin (L4T 35):
    ... POM_5V_IN 2163/2163 POM_5V_GPU 0/0 POM_5V_CPU 410/410                   (Nano)
    ... VDD_IN 5012mW/4980mW VDD_CPU_GPU_CV 592mW/590mW VDD_SOC 1420mW/1418mW   (Orin Nano, Xavier NX)
The input rail (POM_5V_IN, VDD_IN) is the module's whole draw; the others are parts of it, each kept as its own
metric (`power_cpu_w`, `power_gpu_w`, `power_soc_w`, `power_cpu_gpu_cv_w`). The running average is not read: the
mean of the current values is the average over the log. jetson-stats' logger writes `Power <RAIL>` columns and
their total `Power TOT` in mW (jtop 4: the POM_5V_IN or VDD_IN rail, taken out of the rails, else the rails' sum;
jtop/core/power.py total_power), or the total as `power cur` (jtop 3).
"""

from __future__ import annotations

import csv
import io
import re
import statistics
from datetime import datetime

from harness.core import metric_registry
from harness.core.errors import DataError
from harness.device.power import check_rails, rail_metric
from harness.device.readings import (
    KIB_PER_MIB,
    MIB_PER_KIB,
    MW_PER_W,
    PowerTrace,
    Reading,
    checked_number,
    header_cells,
    line_matches,
)

TEGRASTATS = "tegrastats"
JTOP_CSV = "jtop_csv"
RAM = re.compile(r"\bRAM (?P<used>\d+)/(?P<total>\d+)(?P<unit>[kMG])B\b")
UNIT_TO_MIB = {"k": MIB_PER_KIB, "M": 1.0, "G": float(KIB_PER_MIB)}
KIB_FLOOR = 2**17
"""jtop RAM values above this are KiB: 128 GiB in MiB, more than any Jetson's RAM."""
JTOP_COLUMNS = {"time", "RAM"}
RAIL = re.compile(r"\b(?P<rail>[A-Z][A-Z0-9_]*) (?P<current>\d+)(?:mW)?/(?P<average>\d+)(?:mW)?(?=\s|$)")
INPUT_RAILS = ("POM_5V_IN", "VDD_IN")
"""The rails that are the module's whole input: the others are parts of it."""
JTOP_TOTALS = ("Power TOT", "power cur")
"""jetson-stats' total power column: jtop 4's `Power TOT`, jtop 3's `power cur` (mW)."""
JTOP_RAIL_PREFIX = "Power "


def _used_memory(samples_mib: list[float], source: str, what: str) -> dict[str, float]:
    if not samples_mib:
        raise DataError(f"{source}: no {what}; is it a log of the run?")
    return {metric_registry.PEAK_MEMORY: max(samples_mib), metric_registry.AVG_MEMORY: statistics.fmean(samples_mib)}


def tegrastats_looks_like(text: str) -> bool:
    return RAM.search(text) is not None and "(lfb " in text


def _power_trace(inputs_mw: list[float], rails_mw: dict[str, list[float]], times_s: list[float] | None = None
                 ) -> PowerTrace:
    def watts(values: list[float]) -> tuple[float, ...]:
        return tuple(value / MW_PER_W for value in values)

    return PowerTrace(watts(inputs_mw), {rail_metric(name): watts(values) for name, values in rails_mw.items()},
                      tuple(times_s) if times_s is not None else None)


def _with_power(memory: dict[str, float], trace: PowerTrace | None, what: str) -> tuple[dict[str, float], list[str]]:
    """The reading's metrics and notes: memory beside the power, when the log has it."""
    if trace is None:
        return memory, [f"no input power rail ({', '.join(INPUT_RAILS)}): no power read"]
    return {**memory, **trace.metrics()}, [f"{len(trace.input_w)} power samples of {what}"]


def parse_tegrastats(text: str, source: str) -> Reading:
    """RAM used per line, and the power rails where the lines have them: every line the same rails, its parts no
    more than its input, or one error naming the line."""
    samples, inputs = [], []
    rails: dict[str, list[float]] = {}
    names: tuple[str, ...] | None = None
    input_name = None
    for found in line_matches(RAM, text.splitlines(), source):
        samples.append(found.number("used", scale=UNIT_TO_MIB[found["unit"]]))
        line = {rail["rail"]: checked_number(rail["current"], found.where)
                for rail in RAIL.finditer(found.match.string)}
        if names is None:
            names = tuple(line)
            input_name = next((name for name in INPUT_RAILS if name in line), None)
        elif tuple(line) != names:
            raise DataError(f"{found.where}: power rails {', '.join(line) or 'none'} where the log's first line has "
                            f"{', '.join(names) or 'none'}; was the line cut or two logs joined? Fix or remove that "
                            "line")
        if input_name is None:
            continue
        parts = {name: value for name, value in line.items() if name != input_name}
        check_rails(line[input_name], parts, input_name, found.where)
        inputs.append(line[input_name])
        for name, value in parts.items():
            rails.setdefault(name, []).append(value)
    memory = _used_memory(samples, source, "`RAM used/totalMB` sample")
    trace = _power_trace(inputs, rails) if input_name is not None else None
    metrics, notes = _with_power(memory, trace, input_name or "")
    return Reading(source, TEGRASTATS, metrics, notes=[f"{len(samples)} tegrastats samples", *notes], power=trace)


def _jtop_header(text: str) -> list[str]:
    first = next((line for line in text.splitlines() if line.strip()), "")
    return header_cells(first)


def jtop_looks_like(text: str) -> bool:
    return set(_jtop_header(text)) >= JTOP_COLUMNS


def _rows(text: str, source: str) -> list[tuple[str, dict[str, str]]]:
    """The CSV's rows, each with the place (`file:line`) its errors name."""
    reader = csv.DictReader(io.StringIO(text))
    rows = []
    try:
        for row in reader:
            rows.append((f"{source}:{reader.line_num}", {key: value for key, value in row.items() if key is not None}))
    except csv.Error as err:
        raise DataError(f"{source}:{reader.line_num}: not a CSV line ({err}); is it jtop_logger.py's CSV?") from None
    return rows


def _ram_cells(rows: list[tuple[str, dict[str, str]]]) -> list[float]:
    """The RAM column's numbers; a cell that is none is one error naming its line."""
    return [checked_number(cell, where) for where, row in rows if (cell := (row.get("RAM") or "").strip())]


def _jtop_time(cell: str, where: str) -> float:
    try:
        return datetime.fromisoformat(cell.strip()).timestamp()
    except (ValueError, OverflowError, OSError):  # not a date; or one the platform's clock cannot place
        raise DataError(f"{where}: time {cell.strip()!r} is not a date and time as jtop_logger.py writes it "
                        "(2023-04-18 10:23:45.123456); was the log edited? Fix or remove that line") from None


def _jtop_power(rows: list[tuple[str, dict[str, str]]], header: list[str]) -> PowerTrace | None:
    """The total column's samples (mW), each rail's beside it, and their times; None without a total column."""
    total = next((column for column in JTOP_TOTALS if column in header), None)
    if total is None:
        return None
    parts = [column for column in header if column.startswith(JTOP_RAIL_PREFIX) and column != total
             and column.removeprefix(JTOP_RAIL_PREFIX) not in INPUT_RAILS]
    inputs, times = [], []
    rails: dict[str, list[float]] = {column.removeprefix(JTOP_RAIL_PREFIX): [] for column in parts}
    for where, row in rows:
        inputs.append(checked_number((row.get(total) or "").strip(), where))
        line = {name: checked_number((row.get(JTOP_RAIL_PREFIX + name) or "").strip(), where) for name in rails}
        check_rails(inputs[-1], line, total, where)
        for name, value in line.items():
            rails[name].append(value)
        times.append(_jtop_time(row.get("time") or "", where))
        if len(times) > 1 and times[-1] < times[-2]:
            raise DataError(f"{where}: time {row.get('time')} is before the line above's; are two logs joined? Give "
                            "them as separate files")
    return _power_trace(inputs, rails, times) if inputs else None


def parse_jtop_csv(text: str, source: str) -> Reading:
    rows = _rows(text, source)
    trace = _jtop_power(rows, _jtop_header(text))
    values = _ram_cells(rows)
    memory: dict[str, float] = {}
    note = "RAM not read: jtop 4.2 and later log it as a fraction of the total"
    if not (values and max(values) <= 1.0):
        scale = MIB_PER_KIB if values and max(values) > KIB_FLOOR else 1.0
        memory = _used_memory([value * scale for value in values], source, "RAM sample") if values or not trace else {}
        note = f"{len(values)} jtop samples, RAM read as {'KiB' if scale != 1.0 else 'MiB'}"
    elif trace is None:
        raise DataError(f"{source}: its RAM column is a fraction of the total (jtop 4.2 and later), which does not "
                        "say how much memory; log the run with tegrastats instead")
    metrics, notes = _with_power(memory, trace, "jtop's total")
    return Reading(source, JTOP_CSV, metrics, notes=[note, *notes], power=trace)
