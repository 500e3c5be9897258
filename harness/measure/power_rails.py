"""A board's energy over the timed phase from its hwmon sensors, where it has no RAPL: stdlib only (the bench loop
runs it, on a Jetson or any board with a power monitor).

Three kinds of hwmon file, read in this order of preference:
- `energyN_input`: a counter of microjoules (read at the phase's start and end, as RAPL's);
- `powerN_input` / `powerN_average`: microwatts now;
- `inN_input` (mV) with `currN_input` (mA) of the same N: an INA3221's rails (Jetson's VDD_IN, POM_5V_IN, ...).

Sensors that give power are sampled every INTERVAL_S on a thread of the script's own, and the samples integrated
(trapezoids). Where a sensor labels its channels, those that measure the board's input (a label with IN, VIN or
VDD_IN) are taken alone, since the others are parts of it; else every channel is summed. The record names the
channels and says whose energy it is: the whole board's, so whatever else runs there is in it.
"""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass
from typing import Any

from harness.measure.rapl import EnergyReader, energy_record

HWMON = "/sys/class/hwmon"
INTERVAL_S = 0.02
INPUT_LABEL = re.compile(r"(^|_)(VDD_IN|VIN|IN)($|_)|^POM_5V_IN$", re.IGNORECASE)
WHOSE = "the board's power sensors (hwmon): the whole board, so other load there is in it"


@dataclass(frozen=True)
class Channel:
    """One sensor channel: `kind` energy (µJ counter), power (µW), or rail (mV × mA)."""

    name: str
    kind: str
    paths: tuple[str, ...]
    label: str = ""


def _read(path: str) -> str:
    with open(path, encoding="ascii") as handle:
        return handle.read().strip()


def _label(folder: str, stem: str) -> str:
    try:
        return _read(os.path.join(folder, f"{stem}_label"))
    except OSError:
        return ""


def channels(root: str = HWMON) -> list[Channel]:
    """Every readable energy, power or rail channel under `root`, by kind in order of preference."""
    found: list[Channel] = []
    for device in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        folder = os.path.join(root, device)
        try:
            name, files = _read(os.path.join(folder, "name")), set(os.listdir(folder))
        except OSError:
            continue
        for item in sorted(files):
            match = re.fullmatch(r"(energy|power|in)(\d+)_(input|average)", item)
            if not match:
                continue
            kind, number = match.group(1), match.group(2)
            paths: tuple[str, ...] = (os.path.join(folder, item),)
            if kind == "in":
                if f"curr{number}_input" not in files:
                    continue
                kind, paths = "rail", (*paths, os.path.join(folder, f"curr{number}_input"))
            try:
                for path in paths:
                    int(_read(path))
            except (OSError, ValueError):
                continue
            stem = item.rsplit("_", 1)[0]
            found.append(Channel(f"{name}:{_label(folder, stem) or stem}", kind, paths, _label(folder, stem)))
    for kind in ("energy", "power", "rail"):
        chosen = [channel for channel in found if channel.kind == kind]
        if chosen:
            inputs = [channel for channel in chosen if INPUT_LABEL.search(channel.label)]
            return inputs or chosen
    return []


class PowerRails:
    """The bench loop's energy reader on a board with hwmon sensors: start() and stop(inferences), as RAPL's."""

    def __init__(self, root: str = HWMON, interval_s: float = INTERVAL_S) -> None:
        self.channels = channels(root)
        self.absent = None if self.channels else f"no hwmon energy, power or rail channel under {root}"
        self.interval_s = interval_s
        self.read_s = 0.0
        self._samples: list[tuple[float, float]] = []  # (time, watts)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started_uj = 0
        self.t0 = 0.0

    def _watts(self) -> float:
        began = time.perf_counter()
        total = 0.0
        for channel in self.channels:
            values = [int(_read(path)) for path in channel.paths]
            total += values[0] / 1e6 if channel.kind == "power" else values[0] * values[1] / 1e6
        self.read_s += time.perf_counter() - began
        return total

    def _energy_uj(self) -> int:
        began = time.perf_counter()
        total = sum(int(_read(channel.paths[0])) for channel in self.channels)
        self.read_s += time.perf_counter() - began
        return total

    def _sample(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._samples.append((time.perf_counter(), self._watts()))

    def start(self) -> None:
        if self.absent is None:
            if self.channels[0].kind == "energy":
                self._started_uj = self._energy_uj()
            else:
                self._samples.append((time.perf_counter(), self._watts()))
                self._thread = threading.Thread(target=self._sample, daemon=True, name="harness-power")
                self._thread.start()
        self.t0 = time.perf_counter()

    def stop(self, inferences: int) -> dict[str, Any]:
        seconds = time.perf_counter() - self.t0
        if self.absent is not None:
            return {"absent": self.absent}
        try:
            if self.channels[0].kind == "energy":
                energy_j = (self._energy_uj() - self._started_uj) / 1e6
            else:
                self._stop.set()
                if self._thread is not None:
                    self._thread.join()
                self._samples.append((time.perf_counter(), self._watts()))
                energy_j = sum((t1 - t0) * (w0 + w1) / 2 for (t0, w0), (t1, w1)
                               in zip(self._samples, self._samples[1:], strict=False))
        except (OSError, ValueError) as err:
            return {"absent": f"a power sensor stopped being readable ({err})"}
        return energy_record(energy_j, seconds, inferences, [channel.name for channel in self.channels], WHOSE,
                             self.read_s, samples=len(self._samples))


def energy_reader() -> EnergyReader | PowerRails:
    """RAPL where the machine has a readable package counter, else the board's hwmon sensors, else RAPL's reason."""
    rapl = EnergyReader()
    if rapl.absent is None:
        return rapl
    rails = PowerRails()
    if rails.absent is None:
        return rails
    rapl.absent = f"{rapl.absent}; {rails.absent}"
    return rapl
