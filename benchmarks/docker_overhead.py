"""What the Docker backend costs: a no-change image rebuild, and the per-run container overhead next to the
local backend's (goals: rebuild < 10 s from cache; overhead < 1 s per run, runtime and peak as local).

    .venv/bin/python benchmarks/docker_overhead.py [--base-image harness-base:bookworm] [--repeats 5]

The rebuild is timed on the second of two builds, so the first pays for any source change. overhead_s is
what a run costs beyond the script's own runtime: container create, start, wait, logs and remove.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from _common import print_table, profile_runs, write_json

from harness.backends.docker_image import build_image, default_ca_bundle
from harness.core.config import VARIABLES

WORKLOAD = Path(__file__).resolve().parent.parent / "tests" / "workloads" / "alloc.py"


def rebuild_seconds(tag: str, base_image: str) -> float:
    build_args = {"WITH_TORCH": "0", "WITH_LITERT": "0"}
    build_image(tag, base_image, build_args, default_ca_bundle(), log=io.StringIO())
    started = time.monotonic()
    build_image(tag, base_image, build_args, default_ca_bundle(), log=io.StringIO())
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--base-image", default=os.environ.get("HARNESS_BASE_IMAGE") or "python:3.11-slim")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("results/bench/docker_overhead.json"))
    args = parser.parse_args()
    tag = VARIABLES["IMAGE"][3]
    rows = [{"what": "image rebuild, nothing changed: seconds", "backend": "docker", "median": round(
        rebuild_seconds(tag, args.base_image), 2)}]
    with tempfile.TemporaryDirectory() as tmp:
        for backend in ("local", "docker"):
            (Path(tmp) / backend).mkdir()
            runs = profile_runs(Path(tmp) / backend, WORKLOAD, ["0"], backend=backend, repeats=args.repeats).runs
            for field in ("overhead_s", "runtime_s", "peak_memory_mib"):
                rows.append({"what": f"alloc.py 0: {field}", "backend": backend,
                             "median": round(statistics.median(r[field] for r in runs), 3)})
    print_table("Docker backend cost (goals: rebuild < 10 s, overhead < 1 s per run)", rows)
    write_json(args.out, rows)
    print(json.dumps({"written": str(args.out)}))


if __name__ == "__main__":
    main()
