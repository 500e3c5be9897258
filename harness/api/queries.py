"""harness.rank, harness.rank_on_device and harness.compare: a session's ranking, measured or as a device would run it,
and two models side by side, as typed results that the CLI's rank and compare commands print."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from harness.analysis.comparison import compare_models
from harness.analysis.ranking import rank_runs
from harness.analysis.run_values import check_metric, select_runs
from harness.api.predictors import CellsPredictor, DevicePredictor, load_predictor, model_name, predictor_kind
from harness.api.results import Comparison, DeviceRanking, Ranking
from harness.api.session import Session, session_folder
from harness.calibration.calibrate import group_label
from harness.core import metric_registry
from harness.core.config import resolve_results_dir
from harness.core.errors import ConfigError, DataError
from harness.core.records import RunRecord


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


def rank_on_device(device: str, session: Session | str | Path | None = None, *, runtime: str | None = None,
                   results_dir: str | Path | None = None) -> DeviceRanking:
    """The session's models ranked by `device`'s predicted latency (load_predictor: an imported device's chosen fit,
    its kernel table among them; a probed device's kernel table from each model's graph; a library table zero-shot),
    fastest first; a model whose 95% prediction interval overlaps that of its rank's first model shares the rank."""
    directory, session_id = _session_dir(session, results_dir)
    runs, name = select_runs(directory, session_id, runtime)
    given = {"session": name, "metric": metric_registry.LATENCY, "runtime": runtime, "results_dir": directory}
    kind = predictor_kind(device, {"results_dir": directory})
    if kind is CellsPredictor:
        raise ConfigError(f"device={device!r} ranks NAS-Bench-201 cells, not a session's models: use harness.predict")
    predictor = load_predictor(device, **{k: v for k, v in given.items() if v is not None and k in kind.KEYWORDS})
    inputs = _model_inputs(runs, by_name=kind is DevicePredictor)
    named = {model_name(source): model for model, source in inputs.items()}  # a file's prediction under its run name
    rows = [replace(p, model=named.get(p.model, p.model)) for p in predictor.predict(inputs.values())]
    if not any(p.predicted is not None and p.metric == metric_registry.LATENCY for p in rows):
        why = "; ".join(dict.fromkeys(p.note for p in rows if p.note)) or "no latency was calibrated"
        raise DataError(f"device {device}: no model of session {name} has a predicted latency: {why}")
    import pandas as pd

    from harness.report.answer import device_ranking  # the report's answer ranks a device the same way

    predicted = pd.DataFrame([{**p.to_dict(), "group": group_label(p.group), "carried_by": p.carried_by}
                              for p in rows])
    table = device_ranking(predicted)
    assert table is not None  # a latency was predicted
    ranked = predicted[predicted["metric"].eq(metric_registry.LATENCY) & predicted["group"].eq(table["group"].iloc[0])]
    carried = ranked.set_index("model").loc[table["model"]]  # the rows device_ranking ranked, not another metric's
    table = table.assign(fit=carried["fit"].to_numpy(), carried_by=carried["carried_by"].to_numpy())
    return DeviceRanking(predictor.device, name, table, list(predictor.notes))


def _model_inputs(runs: list[RunRecord], by_name: bool) -> dict[str, str]:
    """The session's models, by name, as the predictor takes them: their names for an imported device (its
    calibration pairs them with the runs), else their files where they still exist (a kernel table reads each
    graph)."""
    models: dict[str, str] = {}
    for run in runs:
        path = str(run.model.get("model_path") or "")
        if run.model_name and run.model_name not in models:
            models[run.model_name] = run.model_name if by_name or not Path(path).is_file() else path
    return models


def compare(a: str | Path, b: str | Path, *, cpus: float | None = None,
            results_dir: str | Path | None = None) -> Comparison:
    """Model B against model A (names as profiled, files or zoo names), each from the newest session holding it."""
    directory = resolve_results_dir(None if results_dir is None else str(results_dir))
    return Comparison(str(a), str(b), compare_models(directory, str(a), str(b), cpus))
