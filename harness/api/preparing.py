"""Zero-shot preparation, in-process: a library table's zoo models and the user's, profiled on this host by the same
function harness.profile plans and runs with, once per set of conditions.

The sessions go under RESULTS_DIR/zero-shot/<conditions>/, one folder per profile that makes sessions differ (the
engine, DIMS, INPUTS, the limits, the backend): a later call under the same conditions reuses them, pooled, and a
call under others (a DIMS model's session, another engine) never reads, nor is refused by, those sessions.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.analysis.run_values import select_runs
from harness.api.profiling import device_profile, run_session, start_profile
from harness.core import progress
from harness.core.config import VARIABLES, DeviceProfile, resolve_results_dir
from harness.core.errors import ConfigError, ModelError
from harness.core.records import RunRecord
from harness.device.library import LibraryTable
from harness.models.identity import same_graph
from harness.models.input_feeds import FeedRequest
from harness.models.ncnn_convert import ConversionError, input_shapes
from harness.models.resolve import resolve_model
from harness.run.assemble import feed_request
from harness.run.zero_shot import ZERO_SHOT_DIR, zoo_models
from harness.store.results import ALL_SESSIONS, iter_all_runs
from harness.zoo import needs_torch

ZERO_SHOT_SETTINGS: dict[str, Any] = {"cpus": 1, "repeats": 3, "iterations": 30, "warmup": 5}
"""How the table's models are profiled when no session holds them: one host core (the calibration maps it to the
device's threads, as the library's benchmarks do), few short repeats; the engine, memory, DIMS and backend are the
profile's (env.template < .env < HARNESS_SET_* < prepare()'s keywords)."""
SESSION_CONDITIONS = ("RUNTIME", "DIMS", "INPUTS", "CPUS", "CPU_PINNING", "MEMORY", "SWAP", "ITERATIONS", "WARMUP",
                      "BATCH_SIZE", "BACKEND", "IMAGE")
"""The profile's variables that make two zero-shot sessions differ (harness.core.conditions holds them per run):
each set of their values has its own folder under RESULTS_DIR/zero-shot."""


@dataclass(frozen=True)
class Prepared:
    """What a zero-shot prediction calibrates with: the runs of every session under one set of conditions (pooled),
    and each model asked for under its name among those runs."""

    directory: Path
    runs: list[RunRecord]
    names: dict[str, str]
    profiled: tuple[str, ...] = ()  # the models this call profiled; empty when the sessions held them all
    twins: tuple[tuple[str, str], ...] = ()  # (a model asked for, the table's zoo model whose graph it has)

    @property
    def notes(self) -> list[str]:
        """What a prediction says of each model taken for the zoo model whose graph it has."""
        return [f"{model}: the graph of the zoo's {zoo} (weights aside), so it is predicted, matched and measured as "
                f"{zoo}" for model, zoo in self.twins]

    @property
    def session(self) -> str:
        """How a prediction names the runs it used: every session of the folder, pooled."""
        return f"{ALL_SESSIONS} of {self.directory.name}"


def conditions_key(profile: DeviceProfile) -> str:
    """The folder of a profile's zero-shot sessions: its engine, then a digest of SESSION_CONDITIONS' values."""
    values = {name: str(getattr(profile, VARIABLES[name][0])) for name in SESSION_CONDITIONS}
    digest = hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()[:12]
    return f"{profile.runtime}-{digest}"


def prepare(table: LibraryTable, models: Sequence[str] = (), *, results_dir: str | Path | None = None,
            runtime: str | None = None, **settings: Any) -> Prepared:
    """Have `table`'s zoo models and `models` (files or zoo names) profiled on this host under one set of
    conditions, profiling in this process only those its sessions lack, with harness.profile's own function.
    `runtime` and `settings` (harness.profile's keywords: dims, memory, backend, ...) override the profile's
    variables, and pick the sessions: runs under other conditions are neither read nor refused."""
    directory = resolve_results_dir(None if results_dir is None else str(results_dir)) / ZERO_SHOT_DIR
    chosen = {**ZERO_SHOT_SETTINGS, "runtime": runtime, **settings}
    profile, _ = device_profile(None, chosen)
    folder = directory / conditions_key(profile)
    for model in models:
        refuse_engine(table, model, feed_request(profile))
    zoo = zoo_models(table)
    twins = zoo_twins(models, zoo)
    names = {model: twins.get(model) or resolve_model(model, check_runtime=False).name for model in models}
    held = {run.model_name for run in iter_all_runs(folder)} if folder.is_dir() else set()
    wanted = dict.fromkeys([*zoo, *(model for model in models if model not in twins)])
    missing = [model for model in wanted if names.get(model, model) not in held]
    if missing:
        _profile(missing, folder, chosen)
    runs, _ = select_runs(folder, ALL_SESSIONS, profile.runtime)
    return Prepared(folder, runs, names, tuple(missing), tuple(twins.items()))


def refuse_engine(table: LibraryTable, model: str, feeds: FeedRequest) -> None:
    """One line when `table`'s engine cannot run `model`, instead of a prediction for it: ncnn feeds float32 inputs
    of fixed shapes only (harness.models.ncnn_convert.input_shapes, the rule RUNTIME=ncnn applies), so a token
    model's int64 input_ids has no ncnn latency to predict."""
    if table.engine != "ncnn":
        return
    resolved = resolve_model(model, check_runtime=False, feeds=feeds)
    if resolved.kind != "onnx":
        return
    try:
        input_shapes((resolved.facts or {}).get("inputs", []), resolved.name)
    except ConversionError as err:
        said = str(err).removeprefix(f"model {resolved.name}: ").split(" (use RUNTIME=")[0]
        raise ModelError(f"--device {table.name}: its latencies are ncnn's, which cannot run {resolved.name} ({said}); "
                         "predict it on a device or library table of an engine that runs it (harness devices: "
                         "engine)") from None


def zoo_twins(models: Sequence[str], zoo: Sequence[str]) -> dict[str, str]:
    """Each of `models` (files) whose ONNX graph is one of the `zoo` models' (harness.models.identity: weights and
    names aside) -> that zoo name; the zoo's files are built (or found in its cache) only when a model file is given."""
    files = [model for model in models if Path(model).expanduser().is_file() and model not in zoo]
    if not files:
        return {}
    candidates = [(name, resolve_model(name, check_runtime=False).path) for name in zoo]
    return {model: twin for model in files if (twin := same_graph(Path(model).expanduser(), candidates))}


def _profile(models: list[str], folder: Path, settings: dict[str, Any]) -> None:
    """One session of `models` in `folder`, its progress on stderr where progress is shown (the CLI, or
    harness.core.progress.show()), silent from a library call otherwise."""
    if importlib.util.find_spec("torch") is None and any(needs_torch(model) for model in models):
        raise ConfigError("zero-shot: the library table's models are built by the zoo, whose extra is missing; run "
                          "`make setup-zoo` (torch, about 5.5 GB) and predict again")
    progress.LOGGER.info(f"zero-shot: profiling {len(models)} models on this host under {folder} "
                         f"({', '.join(f'{k}={v}' for k, v in ZERO_SHOT_SETTINGS.items())}); a later predict under "
                         "the same conditions reuses the session")
    start = start_profile(models, **{**settings, "results_dir": folder})
    run_session(start.session, progress=progress.shown())
