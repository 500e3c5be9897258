"""Power over a device run, and the energy per inference it gives.

Device tools log power as samples: tegrastats and jetson-stats one line per interval (mW per rail), a power meter
a CSV of time and W, or mA and V. A PowerTrace is the input (whole-board) power at each sample, each rail's beside
it, and the samples' times where the log has them. The energy over the log is the power integrated: with times, by
the trapezoid rule; without (tegrastats), each sample stands for one interval, the `--interval` it ran with.

Energy per inference is that energy over the run's inferences, or, where the import holds the same model's
benchmark log instead, the average power times its mean latency (W × ms = mJ): both assume the log covers the
timed phase only, which is how docs/energy.md says to capture it. An idle log of the same device gives the dynamic
energy: what the run drew above idle.
"""

from __future__ import annotations

import re

from harness.core.errors import DataError
from harness.device.readings import PowerTrace, Reading, checked_number, csv_cells, header_cells

RAIL_SLACK = 1.05
"""How far the sum of a line's rails may exceed its input rail before the line is refused: the rails are read one
after another by the same INA3221 monitors, so a load step between two reads can tip them over by a few percent."""
METER_CSV = "power_csv"
UNITS: dict[str, tuple[str, float]] = {
    "s": ("time", 1.0), "ms": ("time", 1e-3), "us": ("time", 1e-6), "µs": ("time", 1e-6),
    "w": ("power", 1.0), "mw": ("power", 1e-3),
    "a": ("current", 1.0), "ma": ("current", 1e-3),
    "v": ("voltage", 1.0), "mv": ("voltage", 1e-3),
}
"""A meter column's unit (lower case) → its quantity and the factor to s, W, A or V."""
QUANTITY_WORDS = {"time": "time", "timestamp": "time", "t": "time", "elapsed": "time",
                  "power": "power", "p": "power", "current": "current", "curr": "current", "i": "current",
                  "voltage": "voltage", "volt": "voltage", "u": "voltage"}
"""The words of a meter column's name that say what it holds (`Main Avg Current (mA)` holds a current)."""
EXAMPLE_UNIT = {"time": "time_s or time (ms)", "power": "power_w or power (mW)", "current": "current_ma or "
                "current (A)", "voltage": "voltage_v or voltage (mV)"}
BRACKETED_UNIT = re.compile(r"[(\[]\s*(?P<unit>[^)\]]*?)\s*[)\]]\s*$")
SEPARATORS = re.compile(r"[\s_/()\[\]]+")


def rail_metric(rail: str) -> str:
    """A tegrastats or jtop rail's metric: `POM_5V_CPU`, `VDD_CPU` and `CPU` are all `power_cpu_w`."""
    name = rail.removeprefix("POM_5V_").removeprefix("VDD_")
    return f"power_{name.lower()}_w"


def check_rails(input_mw: float, rails_mw: dict[str, float], input_name: str, where: str) -> None:
    """A line whose rails add up to more than its own input rail (beyond RAIL_SLACK) is one error naming it."""
    total = sum(rails_mw.values())
    if total > input_mw * RAIL_SLACK:
        named = " + ".join(f"{name} {value:g}" for name, value in rails_mw.items())
        raise DataError(f"{where}: rails {named} = {total:g} mW, more than its input rail {input_name} {input_mw:g} "
                        "mW; was the line edited or two logs joined? Fix or remove that line")


def _column(cell: str) -> tuple[str | None, str | None]:
    """(quantity, unit) a meter column's header names: `Current (mA)` → (current, ma), `W` → (power, w),
    `time` → (time, None); (None, None) for a column that is none of them."""
    text = cell.strip().lower()
    if text in UNITS:
        return UNITS[text][0], text
    unit, name = None, text
    if (bracketed := BRACKETED_UNIT.search(text)) is not None:
        unit, name = bracketed["unit"], text[:bracketed.start()]
    else:
        *rest, last = SEPARATORS.split(text)
        if rest and last in UNITS:
            unit, name = last, " ".join(rest)
    quantity = next((QUANTITY_WORDS[word] for word in SEPARATORS.split(name) if word in QUANTITY_WORDS), None)
    if unit not in UNITS:
        return quantity, None
    return quantity or (UNITS[unit][0] if not name.strip() else None), unit


def _first_line(text: str) -> tuple[int, str]:
    return next(((number, line) for number, line in enumerate(text.splitlines(), start=1)
                 if line.strip() and not line.lstrip().startswith("#")), (1, ""))


def meter_looks_like(text: str) -> bool:
    """A CSV header with a time column and a power or current column, and no `model` or `RAM` column."""
    cells = header_cells(_first_line(text)[1])
    if any(cell.lower() in ("model", "ram") for cell in cells):
        return False
    quantities = {_column(cell)[0] for cell in cells}
    return "time" in quantities and bool(quantities & {"power", "current"})


def _meter_columns(cells: list[str], where: str) -> dict[str, tuple[int, float]]:
    """Quantity → (column index, factor to s/W/A/V) of the first column of each; a column of a quantity with no
    unit, or a unit that is not its quantity's, is one error naming it."""
    columns: dict[str, tuple[int, float]] = {}
    for index, cell in enumerate(cells):
        quantity, unit = _column(cell)
        if quantity is None or quantity in columns:
            continue
        if unit is None:
            raise DataError(f"{where}: column {cell.strip()!r} names no unit; write it as {EXAMPLE_UNIT[quantity]}")
        unit_quantity, factor = UNITS[unit]
        if unit_quantity != quantity:
            raise DataError(f"{where}: column {cell.strip()!r} is a {quantity} in {unit}, a unit of {unit_quantity}; "
                            "fix its name or its unit")
        columns[quantity] = (index, factor)
    if "time" not in columns:
        raise DataError(f"{where}: no time column; name one with its unit, e.g. time_s")
    if "power" not in columns and not {"current", "voltage"} <= set(columns):
        lacking = "voltage" if "current" in columns else "power"
        raise DataError(f"{where}: no {lacking} column; log power (W) or current and voltage (mA and V)")
    return columns


def parse_meter_csv(text: str, source: str) -> Reading:
    """A power meter's CSV: time plus power, or current and voltage (their product), units from the header."""
    header_line, header = _first_line(text)
    columns = _meter_columns(csv_cells(header, f"{source}:{header_line}"), f"{source}:{header_line}")
    times: list[float] = []
    watts: list[float] = []
    for number, line in enumerate(text.splitlines()[header_line:], start=header_line + 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        where = f"{source}:{number}"
        cells = csv_cells(line, where)
        if len(cells) <= max(index for index, _ in columns.values()):
            raise DataError(f"{where}: {len(cells)} cells, fewer than the header names; was the log cut?")

        def value(quantity: str, cells: list[str] = cells, where: str = where) -> float:
            index, factor = columns[quantity]
            return checked_number(cells[index].strip(), where, scale=factor)

        time = value("time")
        if times and time < times[-1]:
            raise DataError(f"{where}: time {cells[columns['time'][0]].strip()} is before the line above's; are two "
                            "logs joined? Give them as separate files")
        times.append(time)
        watts.append(value("power") if "power" in columns else value("current") * value("voltage"))
    if not watts:
        raise DataError(f"{source}: a header but no samples; is it the meter's log of the run?")
    trace = PowerTrace(tuple(watts), {}, tuple(times))
    return Reading(source, METER_CSV, trace.metrics(), power=trace,
                   notes=[f"{len(watts)} power samples over {trace.duration_s(None) or 0:g} s"])
