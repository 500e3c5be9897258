"""Which stored runs belong to a model the user named: a file (by its content), a profiled name or a zoo name,
in the newest session that holds them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness import zoo
from harness.core import conditions, metric_registry
from harness.core.errors import DataError
from harness.core.records import RunRecord
from harness.models.resolve import content_sha256
from harness.store.results import list_sessions, load_runs, resolve_session


def model_matcher(arg: str) -> Callable[[RunRecord], bool]:
    """Which runs belong to `arg`: for a file, runs of those exact bytes (sha256), wherever it was profiled
    from; otherwise runs whose model_name is `arg` as typed or, for a zoo name, its canonical spelling."""
    path = Path(arg).expanduser()
    if path.is_file():
        digest = content_sha256(path)
        return lambda run: run.model.get("model_sha256") == digest
    names = {arg, zoo.parse(arg).name} if zoo.is_zoo_name(arg) else {arg}
    return lambda run: run.model_name in names


def profiled_runs(results_dir: Path, model: str, session: str | None,
                  engine: str | None = None) -> tuple[Path, list[RunRecord]]:
    """(session dir, ok runs of MODEL that carry a per-op table, on `engine` when given): of SESSION, or of the newest
    that has them."""
    belongs = model_matcher(model)
    candidates = [resolve_session(results_dir, session)] if session else list(reversed(list_sessions(results_dir)))
    for session_dir in candidates:
        runs = [r for r in load_runs(session_dir) if belongs(r) and r.ok and r.get(metric_registry.OP_TIME)
                and (engine is None or conditions.runtime_name(r) == engine)]
        if runs:
            return session_dir, runs
    where = f"session {session}" if session else results_dir
    on = f" on {engine}" if engine else ""
    runtime = f" --runtime {engine}" if engine else ""
    raise DataError(f"no per-op profile of {model!r}{on} in {where}; run `harness profile {model} --per-op{runtime}` "
                    "(or PER_OP=1 in the env file) first")


def profiled_by_engine(results_dir: Path, model: str) -> dict[str, tuple[Path, list[RunRecord]]]:
    """Per engine (RUNTIME value) that profiled MODEL per op: its newest such session and runs there."""
    found = {}
    for engine in conditions.RUNTIME_ENGINES:
        try:
            found[engine] = profiled_runs(results_dir, model, None, engine)
        except DataError:
            continue
    return found
