"""What a `docker stats` poller would have reported on a run, replayed from the run's own 10 ms samples.

`docker stats` reports the working set (usage - inactive_file), which is what the runner samples. A
poller every P seconds reads it at t = phase + k*P; its phase against the run's start is unknown, so it
is drawn at random and the result reported as typical (median) and worst (farthest from the truth).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PHASES = 200  # random phase offsets per run and poll period


@dataclass(frozen=True)
class PollerView:
    """Per phase offset: the highest and the mean value the poller read (0 when the run ended before its first
    poll: the poller never saw it)."""

    peaks_mib: np.ndarray
    means_mib: np.ndarray


def poll(t_s: np.ndarray, mib: np.ndarray, period_s: float, phase_s: float) -> np.ndarray:
    """The values read at phase + k*period: each the latest sample at or before that instant."""
    instants = np.arange(phase_s, t_s[-1], period_s)
    index = np.searchsorted(t_s, instants, side="right") - 1
    return mib[index[index >= 0]]


def poller_view(samples: dict[str, list[float]], period_s: float, rng: np.random.Generator) -> PollerView:
    """Replay a poller every `period_s` seconds over one run's memory_samples, at PHASES random phases."""
    t_s, mib = np.asarray(samples["t_s"]), np.asarray(samples["mib"])
    read = [poll(t_s, mib, period_s, phase) for phase in rng.uniform(0.0, period_s, PHASES)]
    return PollerView(np.array([r.max() if r.size else 0.0 for r in read]),
                      np.array([r.mean() if r.size else 0.0 for r in read]))


def typical_and_worst(errors_pct: np.ndarray) -> tuple[float, float]:
    """(median error, the error farthest from zero), both signed, in percent."""
    return float(np.median(errors_pct)), float(errors_pct[np.argmax(np.abs(errors_pct))])
