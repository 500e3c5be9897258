"""The steps that bring a stored file of an older schema_version to the next one; store.migrate chains them.

  1 -> 2: a run's latency summary `latency_ms` became `latency_stats_ms` (`latency_ms` had meant both that
          dict and the per-run p50; it is now the metric of the run's headline latency, p50 in older runs);
          `limits` became `limits_requested`, beside a new `limits_applied` and
          `conditions`; session.json's profile values became typed (MEMORY in bytes as a number, not a string).
  2 -> 3: a run's conditions name its engine (`runtime`, e.g. `onnxruntime 1.32.0`, from its model kind and the
          package versions recorded where it ran) and its model's conversion (`conversion`, none before); session.json
          is unchanged (a profile without RUNTIME reads as the default, onnxruntime).
  3 -> 4: a run's provenance is written once, on its session's first line, and again only on a line whose provenance
          differs (a cluster worker's host); a line without one has its session's first line's (store.load_runs puts
          it back). A line of version 3 carries its own, so neither file changes on reading.

The old field names live here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.core.conditions import conditions_of_v1_run, with_runtime
from harness.core.config import VARIABLES

Migration = Callable[[dict[str, Any]], dict[str, Any]]


def _run_1_to_2(run: dict[str, Any]) -> dict[str, Any]:
    run = dict(run)
    if "latency_ms" in run:
        run["latency_stats_ms"] = run.pop("latency_ms")
    stats = run.get("latency_stats_ms")
    if isinstance(stats, dict) and "headline" not in stats:  # stored before runs named their headline latency
        run["latency_stats_ms"] = {**stats, "headline": stats.get("p50")}
        run["latency_headline"] = "p50"
    if "limits" in run:
        run["limits_requested"] = {"cpus": run.get("cpus"), **run.pop("limits")}
        run.setdefault("limits_applied", None)  # not recorded before version 2
    run.setdefault("conditions", conditions_of_v1_run(run))
    return run


def _session_1_to_2(info: dict[str, Any]) -> dict[str, Any]:
    info = dict(info)
    profile = dict(info.get("profile") or {})
    for name, text in profile.items():
        if name in VARIABLES and isinstance(text, str):
            try:
                profile[name] = VARIABLES[name][1](text)
            except (ValueError, TypeError, OverflowError):
                continue  # kept as written: resuming validates it again and names it if it is wrong
    info["profile"] = profile
    return info


RUN_MIGRATIONS: dict[int, Migration] = {1: _run_1_to_2, 2: with_runtime, 3: dict}
SESSION_MIGRATIONS: dict[int, Migration] = {1: _session_1_to_2, 2: dict, 3: dict}
