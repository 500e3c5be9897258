"""collect_metadata(): where and with what a session ran, as one dict of small probes (pyperf habit).

Every probe is cheap and never raises: a metadata gap must not cost a measurement.
"""

from __future__ import annotations

import contextlib
import os
import platform
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness import __version__
from harness.measure import cgroups
from harness.measure.board_side import cpu_model

__all__ = ["RUNTIME_PACKAGES", "collect_metadata", "cpu_model", "installed_versions"]

RUNTIME_PACKAGES = ("onnxruntime", "onnx", "numpy", "torch", "ai-edge-litert", "ncnn", "pnnx", "docker")


def _git_commit() -> str | None:
    root = Path(__file__).resolve().parents[2]
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_versions(names: Sequence[str], path: Sequence[str] | None = None) -> dict[str, str]:
    """Versions of the installed distributions among `names`, read from their .dist-info (or .egg-info) directory
    names on sys.path (or `path`: another venv's site-packages), the first on the path winning, as importlib.metadata
    finds them: without importing it, which alone costs a session's start a twentieth of a second."""
    wanted = {_normalized(name): name for name in names}
    found: dict[str, str] = {}
    for entry in sys.path if path is None else path:
        with contextlib.suppress(OSError), os.scandir(entry or ".") as listing:
            for item in listing:
                stem, _, suffix = item.name.rpartition(".")
                distribution, _, version = stem.partition("-")
                name = wanted.get(_normalized(distribution))
                if suffix in ("dist-info", "egg-info") and name and version and name not in found:
                    found[name] = version.partition("-py")[0]  # egg-info: name-version-pyX.Y
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
        "packages": installed_versions(RUNTIME_PACKAGES),
    }
