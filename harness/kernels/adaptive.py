"""Where to sample next: nn-Meter's adaptive sampling (Zhang et al. 2021) in its simplest form. After each round, each
kind's measured kernels are fitted with one log-log line of time on MACs; the next round spends its kernels on the
kinds that line misses most (root mean square of the log residuals), half of them drawn near the configurations it
missed worst and half fresh from the kind's space, so the space stays covered."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence

import numpy as np

from harness.kernels.designed import KINDS, Kernel, macs, near, sample

MIN_FIT = 3
"""A kind with fewer measured kernels has no line to miss: it gets the largest spread of the kinds, so it is sampled."""
FLOOR_MS = 1e-4


def residuals(kernels: Sequence[Kernel], times: Mapping[str, float]) -> dict[str, dict[str, float]]:
    """Kind -> kernel -> the log residual of its time against the kind's log-log line on MACs."""
    found: dict[str, dict[str, float]] = {}
    for kind in {kernel.kind for kernel in kernels}:
        measured = [k for k in kernels if k.kind == kind and k.name in times]
        if len(measured) < MIN_FIT:
            continue
        x = np.log([max(macs(k), 1) for k in measured])
        y = np.log([max(times[k.name], FLOOR_MS) for k in measured])
        slope, intercept = np.polyfit(x, y, 1) if np.ptp(x) > 0 else (0.0, float(np.mean(y)))
        found[kind] = {k.name: float(yi - (slope * xi + intercept)) for k, xi, yi in zip(measured, x, y, strict=True)}
    return found


def spreads(kernels: Sequence[Kernel], times: Mapping[str, float], kinds: Sequence[str] = KINDS) -> dict[str, float]:
    """Kind -> the root mean square of its log residuals (the largest of them for a kind not yet fitted)."""
    fitted = {kind: math.sqrt(sum(r * r for r in found.values()) / len(found))
              for kind, found in residuals(kernels, times).items()}
    top = max(fitted.values(), default=1.0)
    return {kind: fitted.get(kind, top) for kind in kinds}


def next_round(kernels: Sequence[Kernel], times: Mapping[str, float], count: int, seed: int,
               start: int) -> list[Kernel]:
    """`count` new kernels named from k<start>: shares of the kinds in proportion to their spread (each at least
    one while count allows), half near the kind's worst-missed kernels and half fresh samples."""
    rng = random.Random(seed)
    spread = spreads(kernels, times)
    total = sum(spread.values()) or 1.0
    shares = {kind: max(1, round(count * value / total)) for kind, value in spread.items()}
    missed = residuals(kernels, times)
    chosen: list[Kernel] = []
    for kind, share in sorted(shares.items(), key=lambda item: -item[1]):
        worst = sorted(missed.get(kind, {}).items(), key=lambda item: -abs(item[1]))
        by_name = {k.name: k for k in kernels}
        for i in range(share):
            name_index = start + len(chosen)
            if i % 2 == 0 and worst:
                parent = by_name[worst[(i // 2) % len(worst)][0]]
                chosen.append(near(parent, rng, f"k{name_index:04d}_{kind}"))
            else:
                chosen.append(sample(1, rng.randrange(2**31), (kind,), name_index)[0])
            if len(chosen) >= count:
                return chosen
    return chosen
