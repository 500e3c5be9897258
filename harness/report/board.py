"""The report's "Host and board" section: for a session with runs on a board (TARGET), each model's numbers on this
host and on the board side by side, with the board's provenance; for a host session, the same beside its models'
runs on any board under the results directory."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.analysis.boards import board_key
from harness.analysis.run_values import harness_values
from harness.analysis.throttle import throttle_reason
from harness.core import metric_registry
from harness.core.records import RunRecord
from harness.core.targets import is_target_run
from harness.report.sections import ReportTable, Section
from harness.store.results import iter_all_runs

METRICS = (metric_registry.LATENCY, metric_registry.PEAK_MEMORY)


def board_section(results_dir: Path, runs: list[RunRecord]) -> Section | None:
    """None when neither this session nor the results directory pairs its models with a board's runs."""
    models = {run.model_name for run in runs}
    every = [run for run in iter_all_runs(results_dir) if run.model_name in models]
    boards = [run for run in every if is_target_run(run)]
    host = [run for run in every if not is_target_run(run)]
    if not boards or not host:
        return None
    rows = []
    for key in sorted({board_key(run) for run in boards}):
        board_runs = [run for run in boards if board_key(run) == key]
        host_runs = [run for run in host if run.threads == key[2]]
        for metric in METRICS:
            here = harness_values(host_runs, metric).set_index("model_name")["value"]
            there = harness_values(board_runs, metric).set_index("model_name")["value"]
            for model in sorted(set(here.index) & set(there.index)):
                rows.append({"board": key[0], "engine": key[1], "threads": key[2], "model": model, "metric": metric,
                             "host": float(here[model]), "board_value": float(there[model]),
                             "board_over_host": float(there[model] / here[model]) if here[model] else None,
                             "throttled": throttle_reason([r for r in board_runs if r.model_name == model]) or ""})
    if not rows:
        return None
    first = boards[-1].line.get("provenance") or {}  # the newest board run says what the board has now
    facts = first.get("board") or {}
    section = Section("Host and board", [
        f"Medians over each side's ok repeats. Board {facts.get('hostname')}: {facts.get('machine')}, "
        f"{facts.get('cpu_model')}, {len(facts.get('cores') or [])} cores, Python {facts.get('python')}, limits: "
        f"{boards[-1].isolation}; engines {', '.join(f'{k} {v}' for k, v in (first.get('packages') or {}).items())}."])
    section.tables.append(ReportTable("host_and_board", "This host and the board, model by model",
                                      pd.DataFrame(rows).rename(columns={"board_value": "on board"})))
    return section
