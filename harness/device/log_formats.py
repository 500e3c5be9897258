"""Which device tool wrote a text, told from its content, and the reader for it.

A device CSV (the harness's own format: a `model` column) is recognised first; then each tool by wording only it
prints; a `.csv` file that is none of them is read as a device CSV, whose reader names what it lacks. `--format`
names the reader when the detection cannot (a log cut to a few lines).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from harness.device import dumpsys, jetson, ort_perf_test, power, tflite_benchmark
from harness.device.readings import Reading, header_cells

CSV = "csv"


@dataclass(frozen=True)
class LogFormat:
    name: str
    tool: str
    looks_like: Callable[[str], bool]
    parse: Callable[[str, str], Reading]


LOG_FORMATS: tuple[LogFormat, ...] = (
    LogFormat(dumpsys.NAME, "Android dumpsys meminfo", dumpsys.looks_like, dumpsys.parse),
    LogFormat(tflite_benchmark.NAME, "TensorFlow Lite benchmark_model", tflite_benchmark.looks_like,
              tflite_benchmark.parse),
    LogFormat(ort_perf_test.NAME, "onnxruntime_perf_test", ort_perf_test.looks_like, ort_perf_test.parse),
    LogFormat(jetson.TEGRASTATS, "Jetson tegrastats", jetson.tegrastats_looks_like, jetson.parse_tegrastats),
    LogFormat(jetson.JTOP_CSV, "jetson-stats jtop logger CSV", jetson.jtop_looks_like, jetson.parse_jtop_csv),
    LogFormat(power.METER_CSV, "a power meter's CSV: time plus W, or mA and V", power.meter_looks_like,
              power.parse_meter_csv),
)
BY_NAME = {f.name: f for f in LOG_FORMATS}
FORMAT_NAMES = (CSV, *BY_NAME)


def is_device_csv(text: str) -> bool:
    """The first line that is neither empty nor a `#` comment names a `model` column."""
    first = next((line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")), "")
    return "model" in (cell.lower() for cell in header_cells(first))


def detect(text: str) -> str | None:
    """The name of the format `text` is in, or None when nothing this harness reads wrote it."""
    if is_device_csv(text):
        return CSV
    return next((f.name for f in LOG_FORMATS if f.looks_like(text)), None)


def known_formats() -> str:
    """For an error line: every format with the tool that writes it."""
    return ", ".join([f"{CSV} (a device CSV)", *(f"{f.name} ({f.tool})" for f in LOG_FORMATS)])
