"""`import-device`: read device CSVs and device tools' logs, combine repeats, and store them as one device's data.

Layout: RESULTS_DIR/devices/<device>/measurements.csv (one row per model and thread count: each metric the median
of its repeats, `n` their count), repeats.csv (every row as read, with its source), per_op.json (per-operator
profiles, when a log had one) and import.json (what was read and done). One import is every file of the device:
it replaces what the device held, as a whole (a new folder written beside the old one takes its place, so an import
the disk cuts short leaves the device's earlier data), and only when some content changes, so importing the same
files again rewrites nothing.

A power log (tegrastats' or jtop's rails, a meter's CSV) gives the average power over it and, with the run's
inference count (`--inferences`) or the same model's benchmark log in the import (its mean latency), the energy per
inference; with an idle log of the device (`--idle`), the dynamic energy above idle (harness.device.power).
"""

from __future__ import annotations

import codecs
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from harness.core import metric_registry
from harness.core.bounds import read_bounded, too_large
from harness.core.errors import ConfigError, DataError
from harness.core.storage import write_dir_atomically
from harness.device.data import IMPORT_FILE, MEASUREMENTS_FILE, DeviceData, device_dir
from harness.device.device_csv import FILE, LINE, read_device_csv
from harness.device.jetson import INPUT_RAILS, JTOP_CSV, JTOP_TOTALS, TEGRASTATS
from harness.device.log_formats import BY_NAME, CSV, detect, known_formats
from harness.device.op_profiles import PER_OP_FILE, combine_op_profiles, op_profiles_text
from harness.device.readings import PowerTrace, Reading
from harness.device.repeats import combine_repeats, source_label
from harness.store.results import SCHEMA_VERSION

REPEATS_FILE = "repeats.csv"
MAX_DEVICE_FILE_BYTES = 64 * 1024 * 1024
"""The most bytes a device file (a CSV, a tool's log) may hold: a device's measurements of a few thousand models, or
a tool's output with its per-op table, take a few MiB; a larger file is refused in one line before it is read."""
BYTE_ORDER_MARKS = ((codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"),
                    (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"), (codecs.BOM_UTF8, "utf-8"))
"""Text saved as UTF-16 or UTF-32 starts with its byte-order mark (Windows PowerShell's `>` writes UTF-16), UTF-8
may; UTF-32-LE's is tried before UTF-16-LE's, which begins it."""


@dataclass(frozen=True)
class DeviceFile:
    """One file to import and, for a log that does not name its model, the model it stands for."""

    path: Path
    model: str | None = None

    @classmethod
    def from_argument(cls, argument: str) -> DeviceFile:
        """`FILE`, or `MODEL=FILE` (an existing file whose name holds `=` is taken as a file)."""
        model, sep, path = argument.partition("=")
        if sep and model and not Path(argument).exists():
            return cls(Path(path), model)
        return cls(Path(argument))


@dataclass(frozen=True)
class EnergyRun:
    """What turns an import's power logs into energy per inference: the run's inference count, tegrastats'
    `--interval` (its lines carry no time fine enough), and the idle device's power: a log of its own (`idle`), or
    each log's first `idle_s` seconds, before the run."""

    inferences: int | None = None
    interval_ms: float | None = None
    idle: Path | None = None
    idle_s: float | None = None

    def check(self) -> None:
        for name, value in (("--inferences", self.inferences), ("--interval", self.interval_ms),
                            ("--idle-s", self.idle_s)):
            if value is not None and not (0 < value < float("inf")):
                raise ConfigError(f"{name} {value}: not a positive number; give the run's {name.lstrip('-')}")
        if self.idle is not None and self.idle_s is not None:
            raise ConfigError("--idle and --idle-s both given; give the idle device's own log or its seconds at the "
                              "start of each log, not both")


@dataclass
class ImportResult:
    device: str
    path: Path
    status: str  # created | updated | unchanged
    table: pd.DataFrame
    metrics: list[str]
    tags: list[str]
    sources: list[dict[str, Any]]
    conversions: list[dict[str, Any]]
    provenance: list[dict[str, Any]]  # per table row: model, cpus, n, sources
    op_profiles: int
    unknown_models: list[str] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return len(self.table)

    @property
    def models(self) -> int:
        return self.table["model"].nunique()

    @property
    def repeats(self) -> list[dict[str, Any]]:
        """The rows that combine several repeats."""
        return [row for row in self.provenance if row["n"] > 1]


def _text(path: Path) -> str:
    """The file's text: UTF-8 (a BOM allowed), or UTF-16 or UTF-32 that start with their byte-order mark. Bytes
    that do not decode are one error naming the line they are on."""
    try:
        data = read_bounded(path, MAX_DEVICE_FILE_BYTES)
    except FileNotFoundError as err:
        raise DataError(f"device file {path} not found; check the path") from err
    except IsADirectoryError as err:
        raise DataError(f"device file {path} is a directory; give a CSV or a tool's text output") from err
    except OSError as err:
        raise DataError(f"device file {path} cannot be read ({err.strerror}); check its permissions") from err
    if data is None:
        raise DataError(too_large(path, MAX_DEVICE_FILE_BYTES, "a device file", "MAX_DEVICE_FILE_BYTES"))
    mark, encoding = next(((mark, name) for mark, name in BYTE_ORDER_MARKS if data.startswith(mark)), (b"", "utf-8"))
    body = data[len(mark):]
    try:
        return body.decode(encoding)
    except UnicodeDecodeError as err:
        line = body[:err.start].decode(encoding, errors="replace").count("\n") + 1
        raise DataError(f"{path}:{line}: not {encoding.upper()} text (byte {body[err.start]:#04x} at offset "
                        f"{len(mark) + err.start}); give a CSV or a tool's text output, saved as UTF-8") from None


def _reading(file: DeviceFile, text: str, fmt: str, default_model: str | None) -> Reading:
    """The log's reading, named by MODEL=FILE, else --model, else the log itself."""
    reading = BY_NAME[fmt].parse(text, str(file.path))
    reading.model = file.model or default_model or reading.model
    if not reading.model:
        raise ConfigError(f"{file.path}: {fmt} output does not name its model; name it: MODEL={file.path} or "
                          "--model NAME")
    return reading


def _benchmark_latency(readings: list[Reading], model: str | None) -> tuple[float, float | None] | None:
    """The median mean latency (ms) of `model`'s benchmark logs in the import, and their thread count when they
    agree on one; None without any."""
    logs = [r for r in readings if r.model == model and r.power is None and metric_registry.LATENCY in r.metrics]
    if not logs:
        return None
    cpus = {r.cpus for r in logs}
    return float(pd.Series([r.metrics[metric_registry.LATENCY] for r in logs]).median()), (
        cpus.pop() if len(cpus) == 1 else None)


def _energy_per_inference(reading: Reading, trace: PowerTrace, readings: list[Reading], energy: EnergyRun) -> bool:
    """Put energy_mj in the reading of power log `trace`: its energy over --inferences, else its average power times
    the benchmark's mean latency (W × ms = mJ; the reading takes the benchmark's thread count, so both are one row).
    False when neither is at hand."""
    interval_s = energy.interval_ms / 1000 if energy.interval_ms else None
    if energy.inferences:
        total_j = trace.energy_j(interval_s)
        if total_j is None:
            raise ConfigError(f"{reading.source}: {reading.format} lines carry no time fine enough to integrate; give "
                              "--interval MS, the interval tegrastats ran with")
        reading.metrics[metric_registry.ENERGY] = total_j * 1000 / energy.inferences
        reading.notes.append(f"{total_j:.6g} J over {trace.duration_s(interval_s):.6g} s and "
                             f"{energy.inferences} inferences")
        return True
    latency = _benchmark_latency(readings, reading.model)
    if latency is None:
        reading.notes.append("no energy per inference: give --inferences N, or the model's benchmark log beside it")
        return False
    reading.metrics[metric_registry.ENERGY] = reading.metrics[metric_registry.AVG_POWER] * latency[0]
    reading.cpus = reading.cpus if reading.cpus is not None else latency[1]
    reading.notes.append(f"energy per inference: average power × the benchmark's mean latency {latency[0]:.6g} ms")
    return True


def _idle_power(path: Path) -> float:
    """The average input power of an idle log (W)."""
    text = _text(path)
    found = detect(text)
    reading = BY_NAME[found].parse(text, str(path)) if found in BY_NAME else None
    if reading is None or reading.power is None:
        raise DataError(f"{path}: no input power in it (a tegrastats or jtop log with {', '.join(INPUT_RAILS)}, or a "
                        "meter's CSV); --idle takes a power log of the idle device")
    return reading.metrics[metric_registry.AVG_POWER]


def _split_idle(reading: Reading, trace: PowerTrace, idle_s: float, interval_ms: float | None
                ) -> tuple[PowerTrace, float]:
    """The log's run after its first `idle_s` seconds (its power metrics now the run's alone), and the idle part's
    average power (W)."""
    parts = trace.split(idle_s, interval_ms / 1000 if interval_ms else None)
    if parts is None:
        raise DataError(f"{reading.source}: {len(trace.input_w)} power samples do not split into --idle-s "
                        f"{idle_s:g} s of idle and a run after it (tegrastats logs need --interval MS)")
    idle, run = parts
    reading.power = run
    reading.metrics.update(run.metrics())
    reading.notes.append(f"the first {idle_s:g} s ({len(idle.input_w)} samples) idle, at "
                         f"{idle.avg_power_w():.4g} W")
    return run, idle.avg_power_w()


def add_energy(readings: list[Reading], energy: EnergyRun) -> None:
    """Energy per inference, and above idle, in every power log's reading that the import can give it to."""
    energy.check()
    if (energy.inferences or energy.idle or energy.idle_s) and all(r.power is None for r in readings):
        unpowered = next((r for r in readings if r.format in (TEGRASTATS, JTOP_CSV)), None)
        where = (f"{unpowered.source}: no line holds an input power rail ({', '.join(INPUT_RAILS)} in tegrastats, "
                 f"{' or '.join(JTOP_TOTALS)} in jtop's CSV)" if unpowered else "no power log among the files")
        raise DataError(f"{where}; --inferences, --idle and --idle-s need a power log of the run")
    shared_idle_w = _idle_power(energy.idle) if energy.idle else None
    for reading in readings:
        if reading.power is None:
            continue
        trace, idle_w = (reading.power, shared_idle_w) if energy.idle_s is None else _split_idle(
            reading, reading.power, energy.idle_s, energy.interval_ms)
        if not _energy_per_inference(reading, trace, readings, energy) or idle_w is None:
            continue
        average = reading.metrics[metric_registry.AVG_POWER]
        if average <= idle_w:
            idle = f"the idle log's {idle_w:.4g} W ({energy.idle})" if energy.idle else (
                f"its first {energy.idle_s:g} s' {idle_w:.4g} W")
            raise DataError(f"{reading.source}: average input power {average:.4g} W is not above {idle}; was the "
                            "device idle then, and in the same power mode?")
        dynamic_share = 1 - idle_w / average
        reading.metrics[metric_registry.DYNAMIC_ENERGY] = reading.metrics[metric_registry.ENERGY] * dynamic_share
        reading.notes.append(f"dynamic energy above the idle {idle_w:.4g} W")


def _reading_row(reading: Reading) -> dict[str, Any]:
    return {"model": reading.model, "cpus": reading.cpus, **reading.metrics, FILE: reading.source, LINE: None}


def read_device_files(files: list[DeviceFile], fmt: str | None = None, default_model: str | None = None,
                      energy: EnergyRun | None = None) -> tuple[pd.DataFrame, dict[str, Any], list[Reading]]:
    """Every row the files hold (FILE and LINE say where from), what was read, and the logs' readings."""
    frames: list[pd.DataFrame | Reading] = []
    comments: list[str] = []
    readings: list[Reading] = []
    metrics: dict[str, None] = {}  # dicts as ordered sets: a wide file's thousand columns are each looked up once
    tags: dict[str, None] = {}
    conversions: dict[str, dict[str, Any]] = {}
    sources: list[dict[str, Any]] = []
    for file in files:
        text = _text(file.path)
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        twin = next((source["name"] for source in sources if source["sha256"] == digest), None)
        if twin is not None:
            raise ConfigError(f"{file.path}: the same content as {twin}; give each file once (a second copy would "
                              "count as another repeat)")
        found = fmt or detect(text) or (CSV if file.path.suffix.lower() == ".csv" else None)
        if found is None:
            nul = "; it holds NUL bytes: UTF-16 without a byte-order mark? Save it as UTF-8" if "\0" in text else ""
            raise DataError(f"{file.path}: not a format import-device reads (known: {known_formats()}); give "
                            f"--format FORMAT if it is one of them{nul}")
        source: dict[str, Any] = {"name": str(file.path), "format": found, "sha256": digest}
        if found == CSV:
            if file.model:
                raise ConfigError(f"{file.model}={file.path}: a device CSV names its models in its model column; "
                                  "give the file alone")
            rows = read_device_csv(text, str(file.path))
            frames.append(rows.frame)
            metrics.update(dict.fromkeys(rows.metrics))
            tags.update(dict.fromkeys(rows.tags))
            conversions.update((json.dumps(c, sort_keys=True), c) for c in rows.conversions)
            comments += rows.comments
        else:
            reading = _reading(file, text, found, default_model)
            readings.append(reading)
            frames.append(reading)
            source["reading"] = reading
        sources.append(source)
    add_energy(readings, energy or EnergyRun())
    for source in sources:
        if (reading := source.pop("reading", None)) is not None:
            metrics.update(dict.fromkeys(reading.metrics))
            source.update(model=reading.model, cpus=reading.cpus, metrics=reading.metrics, op_types=len(reading.ops),
                          notes=reading.notes)
    frame = pd.concat([pd.DataFrame([_reading_row(f)]) if isinstance(f, Reading) else f for f in frames],
                      ignore_index=True)
    if "cpus" in frame and frame["cpus"].isna().all():
        frame = frame.drop(columns="cpus")
    info = {"source_name": ", ".join(s["name"] for s in sources), "sources": sources, "metrics": list(metrics),
            "tags": list(tags), "conversions": list(conversions.values()), "comments": comments}
    return frame, info, readings


def _repeats_text(frame: pd.DataFrame, metrics: list[str]) -> str:
    rows = frame.assign(source=[source_label(row) for _, row in frame.iterrows()])
    columns = [c for c in ("model", "cpus", "harness_model") if c in rows] + metrics + ["source"]
    return rows[columns].to_csv(index=False, lineterminator="\n")


def _store(target: Path, files: dict[str, str | None]) -> str:
    """The device folder holding exactly `files` (None: absent); `created`, `updated` or `unchanged`. Nothing is
    written when no content changes; otherwise the whole folder is replaced at once, so an import the disk cuts
    short leaves the device's earlier data (or no folder), never a mix."""
    current = {name: (target / name).read_text(encoding="utf-8") if (target / name).exists() else None
               for name in files}
    if current == files:
        return "unchanged"
    existed = any(text is not None for text in current.values())
    write_dir_atomically(target, {name: text.encode("utf-8") for name, text in files.items() if text is not None})
    return "updated" if existed else "created"


def read_device(files: list[DeviceFile], device: str) -> DeviceData:
    """`files` as one device's data, as import_device would store it, without storing it."""
    frame, info, _ = read_device_files(files)
    table, _ = combine_repeats(frame, info["metrics"], info["tags"])
    return DeviceData(device, table, info)


def import_device(files: list[DeviceFile], device: str, results_dir: Path, harness_models: list[str],
                  fmt: str | None = None, default_model: str | None = None, energy: EnergyRun | None = None
                  ) -> ImportResult:
    """Read `files` and store them as `device`'s data; only a change in content rewrites the files."""
    target = device_dir(results_dir, device)
    if fmt is not None and fmt != CSV and fmt not in BY_NAME:
        raise ConfigError(f"--format {fmt}: not a format import-device reads; give one of {known_formats()}")
    frame, info, readings = read_device_files(files, fmt, default_model, energy)
    table, provenance = combine_repeats(frame, info["metrics"], info["tags"])
    profiles = combine_op_profiles(readings)
    record = {"schema_version": SCHEMA_VERSION, "device": device, **info,
              "repeats": [row for row in provenance if row["n"] > 1]}
    if energy is not None and energy != EnergyRun():
        record["energy"] = {"inferences": energy.inferences, "interval_ms": energy.interval_ms,
                            "idle": str(energy.idle) if energy.idle else None, "idle_s": energy.idle_s}
    status = _store(target, {
        MEASUREMENTS_FILE: table.to_csv(index=False, lineterminator="\n"),
        REPEATS_FILE: _repeats_text(frame, info["metrics"]),
        PER_OP_FILE: op_profiles_text(profiles) if profiles else None,
        IMPORT_FILE: json.dumps(record, indent=2) + "\n",
    })
    matched = DeviceData(device, table, record).match(harness_models)
    return ImportResult(device, target, status, table, info["metrics"], info["tags"], info["sources"],
                        info["conversions"], provenance, len(profiles), sorted(set(table["model"]) - set(matched)))
