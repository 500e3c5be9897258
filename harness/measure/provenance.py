"""collect_metadata(): where and with what a session ran, as one dict of small probes (pyperf habit).

Every probe is cheap and never raises: a metadata gap must not cost a measurement.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

from harness import __version__
from harness.measure import cgroups

RUNTIME_PACKAGES = ("onnxruntime", "onnx", "numpy", "torch", "ai-edge-litert", "docker")


def _git_commit() -> str | None:
    root = Path(__file__).resolve().parents[2]
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _versions() -> dict[str, str]:
    found = {}
    for name in RUNTIME_PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def collect_metadata() -> dict[str, Any]:
    return {
        "harness_version": __version__,
        "git_commit": _git_commit(),
        "hostname": platform.node(),
        "host_cpu_model": cpu_model(),
        "host_cpu_count": os.cpu_count(),
        "host_cpus_allowed": len(os.sched_getaffinity(0)),
        "kernel": platform.release(),
        "cgroup_version": cgroups.discover().version,
        "python": platform.python_version(),
        "packages": _versions(),
    }
