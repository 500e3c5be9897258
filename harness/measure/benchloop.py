"""What every bench script shares: its flags (defaulting to the runner's HARNESS_* variables), the timed
loop, and the reporting of phases. Each framework script only loads a model and builds one inference."""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import time
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.measure.power_rails import energy_reader
from harness.measure.report_protocol import (
    DIMS_ENV,
    ENERGY_KEY,
    LATENCIES_KEY,
    MAX_LATENCIES,
    PROFILE_DIR_ENV,
    phase,
    report,
    report_latencies,
)


def parse_args(description: str, argv: list[str] | None = None) -> argparse.Namespace:
    env = os.environ.get
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("model", help="model file")
    parser.add_argument("--iterations", type=int, default=int(env("HARNESS_ITERATIONS", "100")))
    parser.add_argument("--warmup", type=int, default=int(env("HARNESS_WARMUP", "10")))
    parser.add_argument("--batch-size", type=int, default=int(env("HARNESS_BATCH_SIZE", "1")))
    parser.add_argument("--threads", type=int, default=int(env("HARNESS_THREADS", "1")),
                        help="intra-op threads (default: ceil(CPUS), from the runner)")
    parser.add_argument("--dim", action="append", default=env(DIMS_ENV, "").split(), metavar="NAME=SIZE",
                        help="size of a dynamic input dimension, e.g. --dim seq_len=128 (repeatable; adds to and "
                             "overrides DIMS, which the runner passes as HARNESS_DIMS)")
    parser.add_argument("--shape", action="append", default=[], metavar="INPUT=1x3x224x224",
                        help="full input shape, for formats that carry none (TorchScript)")
    return parser.parse_args(argv)


def parse_pairs(items: list[str], flag: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name or not value:
            raise SystemExit(f"{flag} {item!r}: expected NAME=VALUE")
        pairs[name] = value
    return pairs


def resolve_shape(name: str, dims: list[Any], batch: int, sizes: dict[str, str]) -> list[int]:
    """Static dims as they are; a dynamic first dim is the batch; other dynamic dims need --dim."""
    shape: list[int] = []
    for index, dim in enumerate(dims):
        if isinstance(dim, int) and dim > 0:
            shape.append(dim)
        elif isinstance(dim, str) and dim in sizes:
            shape.append(int(sizes[dim]))
        elif index == 0:
            shape.append(batch)
        else:
            label = dim if isinstance(dim, str) else f"#{index}"
            raise SystemExit(f"input {name!r} has dynamic dimension {label!r} (index {index}); "
                             f'set DIMS="{label}=N" (make profile ... DIMS="{label}=128", or --dim {label}=128)')
    return shape


STEADY_WINDOW = 5
"""Warm-up calls per window, beyond WARMUP: two windows in a row whose medians agree within STEADY_TOLERANCE end it."""
STEADY_TOLERANCE = 0.02
STEADY_MIN_S = 0.1
"""The extra warm-up lasts at most as long as the WARMUP calls took, or this long if that is longer."""


def warm_up(infer: Callable[[], Any], warmup: int) -> int:
    """WARMUP calls, then windows of STEADY_WINDOW until the medians of two windows in a row agree within
    STEADY_TOLERANCE, for at most as long again as the WARMUP calls took, or STEADY_MIN_S (two windows at least);
    returns the calls made. An engine's first calls allocate its arenas, fill the caches and wait for the clock
    governor, and how many that takes depends on the model and the machine, not on a fixed count. WARMUP=0 measures
    from a cold start: no warm-up at all."""
    clock = time.perf_counter
    start = clock()
    for _ in range(warmup):
        infer()
    if warmup == 0:
        return 0
    budget, calls, previous = max(clock() - start, STEADY_MIN_S), warmup, math.nan
    extra_start = clock()
    while calls < warmup + 2 * STEADY_WINDOW or clock() - extra_start < budget:
        window = []
        for _ in range(STEADY_WINDOW):
            began = clock()
            infer()
            window.append(clock() - began)
        calls += STEADY_WINDOW
        middle = sorted(window)[STEADY_WINDOW // 2]
        if abs(middle - previous) <= STEADY_TOLERANCE * previous:
            break
        previous = middle
    return calls


def timed_loop(infer: Callable[[], Any], warmup: int, iterations: int) -> array:
    """WARMUP untimed calls and more until steady (warm_up), then ITERATIONS timed ones; reports phases, the warm-up
    calls made and per-call latencies (ms).

    Latencies live in one preallocated array('d') of at most MAX_LATENCIES values, so the script's own memory does
    not grow with ITERATIONS. Beyond that many calls it keeps a uniform random sample (reservoir sampling, seeded)
    and reports the exact count, mean, min and max of every call as `latency_all`. The host's RAPL counters are read
    right before the first timed call and right after the last (harness.measure.rapl), outside every call's time;
    on a board without RAPL, its hwmon power sensors are read or sampled over the same phase
    (harness.measure.power_rails)."""
    phase("warmup")
    report(warmup_calls=warm_up(infer, warmup))
    kept = min(iterations, MAX_LATENCIES)
    latencies = array("d", bytes(8 * kept))
    rng = random.Random(0)
    total = 0.0
    low, high = math.inf, 0.0
    clock = time.perf_counter_ns
    energy = energy_reader()
    phase("steady")
    energy.start()
    for index in range(iterations):
        start = clock()
        infer()
        elapsed = (clock() - start) / 1e6
        if index < kept:
            latencies[index] = elapsed
        elif (slot := rng.randrange(index + 1)) < kept:
            latencies[slot] = elapsed
        total, low, high = total + elapsed, min(low, elapsed), max(high, elapsed)
    energy_record = energy.stop(iterations)
    phase("teardown")
    report(**{ENERGY_KEY: energy_record})
    report_latencies(latencies)
    if iterations > kept:
        report(latency_all={"n": iterations, "mean": total / iterations, "min": low, "max": high})
    return latencies


def timed_load(load: Callable[[], Any]) -> Any:
    """Model load + session creation, timed and reported as load_s."""
    phase("load")
    start = time.perf_counter()
    loaded = load()
    report(load_s=time.perf_counter() - start)
    return loaded


# The per-op phase (PER_OP=1): the runner names a directory in PROFILE_DIR_ENV; a script that finds it runs
# this extra, marked phase after the timed one, with the framework's own profiler, and leaves the framework's
# raw trace plus PROFILE_META there. The steady phase above never runs under a profiler.
PROFILE_META = "per_op_meta.json"
PROFILE_ITERATIONS_CAP = 50  # profiled inferences: min(ITERATIONS, this); enough for a stable mean per node
PROFILE_WARMUP_CAP = 5  # unprofiled-in-effect warmup calls a fresh profiling session needs (dropped from tables)


def profile_dir() -> Path | None:
    """Where the per-op phase leaves its files, or None when PER_OP is off."""
    path = os.environ.get(PROFILE_DIR_ENV)
    return Path(path) if path else None


def profiled_loop(infer: Callable[[], Any], warmup: int, iterations: int) -> dict[str, Any]:
    """The per-op phase, marked `profile` so memory samples and the session's trace keep it apart from `steady`:
    min(WARMUP, cap) calls whose profile is dropped, then min(ITERATIONS, cap) timed, profiled calls.
    Returns the meta fields of its calls: skipped calls, wall latencies (ms), the monotonic start of the first
    timed call and its offset from the phase mark (to place the framework's trace on the run's timeline)."""
    phase("profile")
    marked = time.monotonic()
    skip = min(warmup, PROFILE_WARMUP_CAP)
    for _ in range(skip):
        infer()
    clock = time.perf_counter_ns
    first_start = time.monotonic()
    latencies: list[float] = []
    for _ in range(min(iterations, PROFILE_ITERATIONS_CAP)):
        start = clock()
        infer()
        latencies.append((clock() - start) / 1e6)
    return {"skip_runs": skip, LATENCIES_KEY: latencies, "first_start_s": first_start,
            "phase_offset_s": first_start - marked}


def write_profile_meta(directory: Path, **meta: Any) -> None:
    """What the host needs to read the raw trace: framework, trace file, calls to skip, wall latencies."""
    (directory / PROFILE_META).write_text(json.dumps(meta), encoding="utf-8")
