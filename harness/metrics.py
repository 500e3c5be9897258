"""The bench-script side of the reporting protocol: one call per fact, stdlib only.

The runner sets HARNESS_METRICS to a file path; a script appends JSON lines to it:
    from harness.metrics import phase, report
    phase("load"); ...; report(load_s=0.41); phase("steady"); ...; report(latency_ms=[...])
Phase marks carry the system-wide monotonic clock, so the runner can split its memory samples by phase.
Outside the harness (HARNESS_METRICS unset) every call is a no-op, so the same script runs bare.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

ENV_VAR = "HARNESS_METRICS"


def report(**values: Any) -> None:
    """Append one JSON line of metrics (e.g. load_s=0.4, latency_ms=[...], or any custom key)."""
    path = os.environ.get(ENV_VAR)
    if not path:
        return
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(values) + "\n")


def phase(name: str) -> None:
    """Mark the start of a phase (load, warmup, steady, ...) at this instant."""
    report(phase=name, t=time.monotonic())
