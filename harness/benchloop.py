"""What every bench script shares: its flags (defaulting to the runner's HARNESS_* variables), the timed
loop, and the reporting of phases. Each framework script only loads a model and builds one inference."""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

from harness.metrics import phase, report


def parse_args(description: str, argv: list[str] | None = None) -> argparse.Namespace:
    env = os.environ.get
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("model", help="model file")
    parser.add_argument("--iterations", type=int, default=int(env("HARNESS_ITERATIONS", "100")))
    parser.add_argument("--warmup", type=int, default=int(env("HARNESS_WARMUP", "10")))
    parser.add_argument("--batch-size", type=int, default=int(env("HARNESS_BATCH_SIZE", "1")))
    parser.add_argument("--threads", type=int, default=int(env("HARNESS_THREADS", "1")),
                        help="intra-op threads (default: ceil(CPUS), from the runner)")
    parser.add_argument("--dim", action="append", default=[], metavar="NAME=SIZE",
                        help="size of a dynamic input dimension, e.g. --dim seq_len=128 (repeatable)")
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
                             f"give its size with --dim {label}=N (pass script arguments after --)")
    return shape


def timed_loop(infer: Callable[[], Any], warmup: int, iterations: int) -> list[float]:
    """WARMUP untimed calls, then ITERATIONS timed ones; reports phases and per-call latencies (ms)."""
    phase("warmup")
    for _ in range(warmup):
        infer()
    phase("steady")
    latencies: list[float] = []
    clock = time.perf_counter_ns
    for _ in range(iterations):
        start = clock()
        infer()
        latencies.append((clock() - start) / 1e6)
    phase("teardown")
    report(latency_ms=latencies)
    return latencies


def timed_load(load: Callable[[], Any]) -> Any:
    """Model load + session creation, timed and reported as load_s."""
    phase("load")
    start = time.perf_counter()
    loaded = load()
    report(load_s=time.perf_counter() - start)
    return loaded
