"""The bench-script side of the reporting protocol: one call per fact, stdlib only.

The runner sets HARNESS_METRICS to a file path; a script appends JSON lines to it:
    from harness.measure.report_protocol import phase, report
    phase("load"); ...; report(load_s=0.41); phase("steady"); ...; report(latency_ms=[...])
Phase marks carry the system-wide monotonic clock, so the runner can split its memory samples by phase.
Outside the harness (HARNESS_METRICS unset) every call is a no-op, so the same script runs bare.

Long latency series go to a binary file instead (`report_latencies`, which harness.measure.benchloop uses):
HARNESS_LATENCIES names it, 8 bytes per inference (native float64, milliseconds), so the script's and the runner's
memory inside the measured cgroup stays small and bounded at any ITERATIONS. At most MAX_LATENCIES values are kept
per run. The metrics these values become are defined in harness.core.metric_registry.
"""

from __future__ import annotations

import os
import time
from array import array

ENV_VAR = "HARNESS_METRICS"
LATENCIES_KEY = "latency_ms"  # a list of per-inference latencies in ms, when not written to HARNESS_LATENCIES
LOAD_KEY = "load_s"  # seconds the script spent loading the model
BATCH_SIZE_KEY = "batch_size"  # inputs per inference, when the script chose its own
ENERGY_KEY = "energy"  # the timed phase's RAPL energy, or why there is none (harness.measure.rapl)
ENERGY_MJ_KEY, AVG_POWER_KEY = "energy_mj", "avg_power_w"  # in it: the registry's metrics of the same names
LATENCIES_ENV_VAR = "HARNESS_LATENCIES"
MAX_LATENCIES = 100_000  # per run: 800 KB binary; longer runs keep a uniform sample of this size
# With PER_OP=1 the runner names a directory here for the per-op phase's files (see harness.measure.benchloop)
PROFILE_DIR_ENV = "HARNESS_PROFILE_DIR"
# What a bench script builds its inputs from (harness.models.input_feeds settles them before the session): the sizes
# of the model's dynamic dimensions (`seq=128 h=320`, as --dim gives them), the values its integer inputs accept
# (JSON: {input: {"high": n} for ids in [0, n), or {"fill": v}}) and the INPUTS .npz to feed instead of random data.
DIMS_ENV, VALUES_ENV, INPUTS_ENV = "HARNESS_DIMS", "HARNESS_INPUT_VALUES", "HARNESS_INPUTS"


def report(**values: object) -> None:
    """Append one JSON line of metrics (e.g. load_s=0.4, latency_ms=[...], or any custom key)."""
    path = os.environ.get(ENV_VAR)
    if not path:
        return
    import json  # here: the runner imports this module for its names alone, and json costs its start

    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(values) + "\n")


def phase(name: str) -> None:
    """Mark the start of a phase (load, warmup, steady, ...) at this instant."""
    report(phase=name, t=time.monotonic())


def report_latencies(latencies_ms: array) -> None:
    """Per-inference latencies (ms, array('d')) to the HARNESS_LATENCIES file; a JSON line where it is unset."""
    path = os.environ.get(LATENCIES_ENV_VAR)
    if not path:
        report(**{LATENCIES_KEY: latencies_ms.tolist()})
        return
    with open(path, "ab") as handle:
        latencies_ms.tofile(handle)
