"""Where to sample next: nn-Meter's adaptive sampling (Zhang et al. 2021) in its simplest form. After each round, each
kind's measured kernels are fitted with one log-log line of time on MACs; the next round spends half its kernels on
the kinds that line misses most (root mean square of the log residuals), drawn near the configurations it missed
worst, and half stratified as the first round, so the whole space stays covered."""

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
               start: int, kinds: Sequence[str] = KINDS) -> list[Kernel]:
    """`count` new kernels named from k<start>: half stratified as the first round is (designed.sample: every kind,
    convolution's strata in turn), so no kind's coverage depends on how well a line fits it; half shared among the
    kinds in proportion to their spread, each drawn near one of the kind's worst-missed kernels (fresh where the
    kind has no line yet); `kinds`: the engine's (designed.engine_kinds)."""
    rng = random.Random(seed)
    chosen = sample(count // 2, seed, kinds, start=start)
    spread = spreads(kernels, times, kinds)
    total = sum(spread.values()) or 1.0
    missed = residuals(kernels, times)
    by_name = {k.name: k for k in kernels}
    for kind, value in sorted(spread.items(), key=lambda item: -item[1]):
        worst = sorted(missed.get(kind, {}).items(), key=lambda item: -abs(item[1]))
        for i in range(max(1, round((count - count // 2) * value / total))):
            if len(chosen) >= count:
                return chosen
            name = f"k{start + len(chosen):04d}_{kind}"
            chosen.append(near(by_name[worst[i % len(worst)][0]], rng, name) if worst else
                          sample(1, rng.randrange(2**31), (kind,), start + len(chosen))[0])
    return chosen
