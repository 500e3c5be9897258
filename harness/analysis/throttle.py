"""Whether a board throttled during its runs: from the temperatures and core clocks its agent read before and after
each run (RunOutcome.board). A clock that fell by more than FREQ_DROP, or a zone at HOT_C or above, bends latency as
surely as a noisy neighbour: the session says so beside its instability flags."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from harness.core.records import RunRecord

FREQ_DROP = 0.10  # a core's clock after a run below (1 - FREQ_DROP) of the session's highest reading of it
HOT_C = 80.0  # most boards start throttling between 80 and 85 °C (Raspberry Pi 4: 80, Jetson Nano: about 97 at TJ)


def throttle_reason(runs: Iterable[RunRecord]) -> str | None:
    """Why these runs of one board look throttled (the hottest reading, the largest clock drop), or None."""
    readings: list[dict[str, Any]] = []
    for run in runs:
        board = run.line.get("board") or {}
        readings += [board[key] for key in ("before", "after") if board.get(key)]
    if not readings:
        return None
    reasons = []
    temps = [r["temperature_c"] for r in readings if r.get("temperature_c") is not None]
    if temps and max(temps) >= HOT_C:
        reasons.append(f"{max(temps):.0f} °C at its hottest")
    highest: dict[str, float] = {}
    for reading in readings:
        for core, mhz in (reading.get("freq_mhz") or {}).items():
            highest[core] = max(highest.get(core, 0.0), mhz)
    drops = [(core, 1 - reading["freq_mhz"][core] / highest[core]) for reading in readings
             for core in (reading.get("freq_mhz") or {}) if highest.get(core)]
    core, drop = max(drops, key=lambda item: item[1], default=("", 0.0))
    if drop > FREQ_DROP:
        reasons.append(f"{core} clocked {drop:.0%} below its highest")
    return "; ".join(reasons) or None


def throttle_notes(runs: list[RunRecord]) -> list[str]:
    """One line per model whose board runs look throttled."""
    by_model: dict[tuple[str, float], list[RunRecord]] = {}
    for run in runs:
        by_model.setdefault((run.model_name, run.cpus), []).append(run)
    notes = []
    for (model, cpus), members in sorted(by_model.items()):
        reason = throttle_reason(members)
        if reason:
            notes.append(f"throttled: {model} cpus={cpus:g} on its board ({reason}); let the board cool, fix its "
                         "governor at `performance`, or add a heatsink, then profile again")
    return notes
