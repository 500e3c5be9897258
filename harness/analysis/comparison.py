"""Two models side by side: static facts and measured medians with B/A ratios, from the newest session holding each.

Each model's runs come from the newest session that holds it, so `make profile MODEL=x` then
`make profile MODEL=x_int8_static` compares the latest measurement of each. Medians over repeats with the
95% CI of the median where there are 6 or more (harness.analysis.stats.summarize); a ratio below 1 means B is smaller
(faster, lighter). `harness compare` and harness.compare both read it.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from harness.analysis.model_runs import model_matcher
from harness.analysis.stats import metric_value, summarize
from harness.core import conditions, metric_registry
from harness.core.errors import ConfigError, DataError
from harness.core.records import RunRecord
from harness.store.results import list_sessions, load_runs

# (row label, where in model_facts, scale) for facts read from the graph, the same for every run of a model
STATIC_ROWS = (("size MiB", "size_mib", 1.0), ("params", "params", 1.0), ("MMACs", "macs", 1e-6),
               ("layers", "layers", 1.0))
MEASURED = tuple(metric_registry.get(name) for name in metric_registry.COMPARE_METRICS)
"""Measured rows, each summarised over a model's ok runs."""
# Labels worth a warning when they differ; what must match (harness.core.conditions) is refused when it differs.
CHECKED_SETTINGS = ("device_name",)



def latest_runs(results_dir: Path, arg: str) -> tuple[str, list[RunRecord]]:
    """(session id, runs of the model) from the newest session holding `arg`."""
    belongs = model_matcher(arg)
    for session_dir in reversed(list_sessions(results_dir)):
        runs = [run for run in load_runs(session_dir) if belongs(run)]
        if runs:
            return session_dir.name, runs
    raise DataError(f"no runs of model {arg!r} under {results_dir}; run `make profile MODEL={arg}` first")


def _side(arg: str, session: str, runs: list[RunRecord]) -> dict[str, Any]:
    """One column: facts and settings from the latest run, each measured metric summarised over the ok runs."""
    ok = [run for run in runs if run.get("status") == "ok"]
    statuses = Counter(run.get("status", "error") for run in runs)
    latest = runs[-1]
    return {
        "model": arg, "model_name": latest.get("model_name"), "session": session, "cpus": float(latest["cpus"]),
        "n_runs": len(runs), "n_ok": len(ok), "statuses": dict(statuses),
        "facts": latest.get("model_facts") or {"size_mib": latest.get("model_size_mib")},
        "settings": {key: latest.get(key) for key in CHECKED_SETTINGS},
        "metrics": {m.name: summarize([value for run in ok if (value := metric_value(run, m.name)) is not None])
                    .as_dict() for m in MEASURED},
    }


def _ratio(a: float | None, b: float | None) -> float | None:
    return b / a if a and b is not None else None


def _rows(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for label, key, scale in STATIC_ROWS:
        va, vb = (side["facts"].get(key) for side in (a, b))
        va, vb = (v * scale if isinstance(v, (int, float)) and scale != 1.0 else v for v in (va, vb))
        rows.append({"metric": label, "key": key, "a": va, "b": vb, "ratio": _ratio(va, vb)})
    for measured in MEASURED:
        metric = measured.name
        sa, sb = a["metrics"][metric], b["metrics"][metric]
        rows.append({"metric": f"{measured.label} {measured.unit}", "key": metric, "a": sa["median"], "b": sb["median"],
                     "ratio": _ratio(sa["median"], sb["median"]), "a_summary": sa, "b_summary": sb})
    return rows


def compare_models(results_dir: Path, model_a: str, model_b: str, cpus: float | None = None) -> list[dict[str, Any]]:
    """One comparison per CPUS value both models were measured at (or the one asked for)."""
    sessions = [latest_runs(results_dir, model) for model in (model_a, model_b)]
    cpus_sets = [{float(run["cpus"]) for run in runs} for _, runs in sessions]
    common = sorted(cpus_sets[0] & cpus_sets[1])
    if cpus is not None:
        if cpus not in common:
            raise ConfigError(f"--cpus {cpus:g}: {model_a} has runs at {sorted(cpus_sets[0])}, {model_b} at "
                              f"{sorted(cpus_sets[1])}; pick a value both have")
        common = [cpus]
    if not common:
        raise DataError(f"{model_a} was measured at CPUS {sorted(cpus_sets[0])} and {model_b} at "
                        f"{sorted(cpus_sets[1])}; profile both with the same CPUS to compare them")
    comparisons = []
    for value in common:
        at = [[r for r in runs if float(r["cpus"]) == value] for _, runs in sessions]
        keys = [k for k in conditions.differing_keys(r.line for r in at[0] + at[1]) if k != "model_sha256"]
        if keys:
            raise DataError(f"{model_a} and {model_b} were measured under different conditions at cpus={value:g} "
                            f"({'; '.join(conditions.describe(side[-1]['conditions'], keys) for side in at)}); "
                            "profile both under one profile to compare them")
        sides = [_side(model, session, runs) for model, (session, _), runs in zip((model_a, model_b), sessions, at,
                                                                                strict=True)]
        comparisons.append({"cpus": value, "a": sides[0], "b": sides[1], "rows": _rows(*sides)})
    return comparisons
