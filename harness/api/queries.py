"""harness.rank and harness.compare: a session's ranking and two models side by side, as typed results that the CLI's
rank and compare commands print."""

from __future__ import annotations

from pathlib import Path

from harness.analysis.comparison import compare_models
from harness.analysis.ranking import rank_runs
from harness.analysis.run_values import check_metric, select_runs
from harness.api.results import Comparison, Ranking
from harness.api.session import Session, session_folder
from harness.core import metric_registry
from harness.core.config import resolve_results_dir


def _session_dir(session: Session | str | Path | None, results_dir: str | Path | None) -> tuple[Path, str | None]:
    """(results directory, session id) of a Session, a session folder, an id, or None (the newest)."""
    folder = session.path if isinstance(session, Session) else session_folder(session)
    if folder is not None:
        return folder.parent, folder.name
    return resolve_results_dir(None if results_dir is None else str(results_dir)), \
        None if session is None else str(session)


def rank(session: Session | str | Path | None = None, metric: str = metric_registry.DEFAULT_METRIC, *,
         runtime: str | None = None, results_dir: str | Path | None = None) -> Ranking:
    """The session's models ranked by `metric` (lower is better); a model shares its neighbour's rank unless their test
    (FDR-adjusted over the neighbour pairs, or slower in every round) separates them and their medians differ by 10%
    or more (see `harness rank --help`)."""
    directory, session_id = _session_dir(session, results_dir)
    runs, name = select_runs(directory, session_id, runtime)
    metric = check_metric(metric)
    return Ranking(name, metric, rank_runs(runs, metric))


def compare(a: str | Path, b: str | Path, *, cpus: float | None = None,
            results_dir: str | Path | None = None) -> Comparison:
    """Model B against model A (names as profiled, files or zoo names), each from the newest session holding it."""
    directory = resolve_results_dir(None if results_dir is None else str(results_dir))
    return Comparison(str(a), str(b), compare_models(directory, str(a), str(b), cpus))
