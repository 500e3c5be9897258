"""Session assembly: from a device profile and what a command asks for, the session ready to run.

It picks the backend (or the Dask cluster), resolves and checks every model, plans all runs, and chooses the kind of
session: serial, parallel slots on this host, or the cluster's workers. Commands parse their arguments into a
SessionRequest, call start_session or resume_session, and print.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from harness.backends import Backend, select_backend
from harness.core.config import DeviceProfile, dim_sizes, load_profile, parse_dims
from harness.core.errors import ConfigError
from harness.measure.spec import RunSpec
from harness.models.input_feeds import FeedRequest
from harness.models.resolve import (
    BENCH_SCRIPTS_DIR,
    SCRIPT_KIND,
    ModelInfo,
    example_models,
    resolve_model,
    resolve_script,
)
from harness.run.cluster import ClusterClient, ClusterSession
from harness.run.session import BaseSession, Plan, Session, load_plan, plan_session
from harness.store.results import ensure_writable_dir, new_session_id, resolve_session

EXAMPLE_SETTINGS = {"REPEATS": 7, "ITERATIONS": 50, "WARMUP": 5}
"""The example run's settings where the user set none (env.template's 500 iterations would take minutes): seven
repeats, as REPEATS's default: the ranking orders a model slower in every round from 6 rounds on (2/2^6 <= 0.05),
and from 7 also one with a round the other way (4/2^7); six already give each median a 95% CI, and the whole run
stays near a minute on 2 cores."""


@dataclass(frozen=True)
class SessionRequest:
    """What a command asks of a session beside the device profile: what to measure, and where the runs go."""

    models: tuple[str, ...] = ()  # model files or zoo names
    scripts: tuple[Path, ...] = ()  # the models' bench script (one), or scripts profiled as a whole
    name: str | None = None  # the name of one script profiled as a whole
    script_args: tuple[str, ...] = ()
    seed: int | None = None
    keep_samples: bool = False
    parallel: str | None = None  # --parallel: N or auto
    cluster: str | None = None  # a Dask scheduler's address
    allow_mixed_hosts: bool = False


@dataclass
class SessionStart:
    """A session ready to run, with what its command says before it does."""

    session: BaseSession
    examples: bool = False  # the built-in example models, since none was given
    new_notes: list[str] = field(default_factory=list)  # the plan's notes not yet said (a resume's stored ones were)


def feed_request(profile: DeviceProfile, script_args: tuple[str, ...] = ()) -> FeedRequest:
    """What the profile asks the models be fed (DIMS, INPUTS, BATCH_SIZE), checked against each as it resolves.
    A `--dim NAME=SIZE` among the script's arguments (how a size was given before DIMS) sizes its dimension too."""
    given = " ".join(value for flag, value in zip(script_args, script_args[1:], strict=False) if flag == "--dim")
    try:
        sizes = dim_sizes(parse_dims(given))
    except ValueError:
        raise ConfigError(f"--dim {given} (a script argument after --) is not valid: expected NAME=SIZE such as "
                          "seq=128; better, set DIMS (or --dim before --)") from None
    return FeedRequest({**profile.dim_sizes, **sizes}, profile.inputs, profile.batch_size)


def targets(request: SessionRequest, check_runtime: bool, runtime: str,
            feeds: FeedRequest | None = None) -> tuple[list[ModelInfo], bool]:
    """What the session measures, and whether it is the built-in example set.

    Models (with their bench script, or one --script of the user's); else scripts profiled as a whole; else,
    with nothing given, the examples in examples/models, so the first command works with nothing to bring."""
    names, scripts = request.models, request.scripts
    if names:
        if request.name:
            raise ConfigError("--name names a script profiled as a whole; models are named after their files")
        if len(scripts) > 1:
            raise ConfigError("several --script values with models: give one bench script for the models, "
                              "or drop the models to profile each script as a whole")
        return [resolve_model(m, scripts[0] if scripts else None, check_runtime, runtime, feeds) for m in names], False
    if scripts:
        if request.name and len(scripts) > 1:
            raise ConfigError("--name names one script; with several scripts each is named after its file")
        infos = [resolve_script(path, request.name) for path in scripts]
        clashes = sorted({i.name for i in infos if [j.name for j in infos].count(i.name) > 1})
        if clashes:
            raise ConfigError(f"scripts share the name {', '.join(clashes)}; rename one to keep their results apart")
        return infos, False
    return [resolve_model(str(path), None, check_runtime, runtime, feeds) for path in example_models()], True


def example_profile(profile: DeviceProfile) -> DeviceProfile:
    """EXAMPLE_SETTINGS for every one of them the user left at its default."""
    chosen = {name: value for name, value in EXAMPLE_SETTINGS.items()
              if profile.sources.get(name) in ("default", "env.template")}
    return replace(profile, repeats=chosen.get("REPEATS", profile.repeats),
                   iterations=chosen.get("ITERATIONS", profile.iterations), warmup=chosen.get("WARMUP", profile.warmup),
                   sources={**profile.sources, **dict.fromkeys(chosen, "example run")})


def start_session(profile: DeviceProfile, request: SessionRequest,
                  cpus_values: list[float] | None = None) -> SessionStart:
    """Pick the backend, resolve and check every model, plan all runs (each CPUS value of `cpus_values`, else the
    profile's), and build the session that runs them."""
    backend, reason = pick_backend(profile, request)
    with closed_on_error(backend):
        models, examples = targets(request, check_runtime=backend.name == "local", runtime=profile.runtime,
                                   feeds=feed_request(profile, request.script_args))
        ensure_writable_dir(Path(profile.results_dir),  # after the models' checks: a bad model leaves no directory
                            f"RESULTS_DIR (from {profile.sources.get('RESULTS_DIR', 'default')})")
        if examples:
            profile = example_profile(profile)
        plan = plan_session(profile, models, cpus_values, request.script_args, new_session_id(), request.seed,
                            request.keep_samples, elsewhere_cores(backend))
        plan.notes += leftover_notes(backend)
        session = build_session(profile, plan, backend, reason, request)
    return SessionStart(session, examples, list(plan.notes))


def elsewhere_cores(backend: Backend | ClusterClient) -> tuple[int, ...] | None:
    """The cores of the machine the runs run on when it is not this host (a board's), else None."""
    return None if isinstance(backend, ClusterClient) or backend.elsewhere is None else backend.elsewhere.cores


def leftover_notes(backend: Backend | ClusterClient) -> list[str]:
    """One note per killed harness whose cgroups the local backend removed as it started (harness.measure.leases)."""
    from harness.backends.local import LocalBackend

    swept = backend.swept if isinstance(backend, LocalBackend) else {}
    return [f"removed {len(paths)} cgroup{'s' if len(paths) > 1 else ''} that {owner} left (its harness was killed)"
            for owner, paths in sorted(swept.items())]


def user_script(specs: list[RunSpec], model_name: str) -> Path | None:
    """The --script a model's planned runs use, or None where that is the harness's own bench script: the model is
    then resolved as the session first resolved it (its kind picks the script, RUNTIME its engine), so the runs made
    after a resume carry the same conditions as those made before."""
    script = next((Path(spec.script) for spec in specs if spec.model_name == model_name), None)
    return None if script is None or script.resolve().parent == BENCH_SCRIPTS_DIR else script


def resume_session(results_dir: Path, session_ref: str, request: SessionRequest) -> SessionStart:
    """Rebuild an interrupted session's profile and plan from its session.json, to run what is missing."""
    session_dir = resolve_session(results_dir, session_ref)
    info, specs = load_plan(session_dir)
    profile = load_profile(None, {**info["profile"], "RESULTS_DIR": str(session_dir.parent)})
    backend, reason = pick_backend(profile, request)
    with closed_on_error(backend):
        feeds = feed_request(profile, specs[0].script_args if specs else ())  # with a `-- --dim`, as first planned
        models = [resolve_script(Path(m["model_path"]), m["model_name"]) if m["model_kind"] == SCRIPT_KIND else
                  replace(resolve_model(m["model_path"], user_script(specs, m["model_name"]),
                                        check_runtime=backend.name == "local",
                                        runtime=profile.runtime, feeds=feeds),
                          name=m["model_name"]) for m in info["models"]]
        plan = Plan(info["session_id"], info["seed"], specs, models, info["cpus_values"],
                    info.get("notes", []) + leftover_notes(backend))
        session = build_session(profile, plan, backend, reason, request)
    return SessionStart(session, new_notes=plan.notes[len(info.get("notes", [])):])


@contextmanager
def closed_on_error(backend: Backend | ClusterClient) -> Iterator[None]:
    """Until a session owns the backend (and closes it when it ends), a refusal closes it here: a cluster
    client left open would keep trying to reconnect long after the CLI has said why it stopped."""
    try:
        yield
    except BaseException:
        backend.close()
        raise


def pick_backend(profile: DeviceProfile, request: SessionRequest) -> tuple[Backend | ClusterClient, str]:
    """This host's backend, or with a cluster address the Dask cluster's client (each worker then picks its own)."""
    if not request.cluster:
        return select_backend(profile)
    return ClusterClient(request.cluster), f"cluster {request.cluster}"


def build_session(profile: DeviceProfile, plan: Plan, backend: Backend | ClusterClient, reason: str,
                  request: SessionRequest) -> BaseSession:
    """A serial Session; with --parallel a ParallelSession over this host's slots (its notes join the plan's);
    with a cluster a ClusterSession over the cluster's nodes."""
    from harness.run.slots import SlotPlan, parse_parallel, plan_slots, run_needs

    parallel = parse_parallel(request.parallel) if request.parallel else 1
    if isinstance(backend, ClusterClient):
        return ClusterSession(profile, plan, backend, reason, parallel=parallel,
                              allow_mixed_hosts=request.allow_mixed_hosts)
    farm = backend.elsewhere
    if farm is not None and farm.machines > 1:  # a farm: one slot per board, each the board's cores
        from harness.run.parallel import ParallelSession

        return ParallelSession(profile, plan, backend, reason, slots=SlotPlan((farm.cores,) * farm.machines))
    if not request.parallel:
        return Session(profile, plan, backend, reason)
    import psutil

    from harness.run.parallel import ParallelSession

    slots = plan_slots(run_needs(plan.specs), parallel, sorted(os.sched_getaffinity(0)),
                       psutil.virtual_memory().available, Path(profile.results_dir))
    cores = " | ".join(",".join(map(str, slot)) for slot in slots.slots)
    notes = [*slots.notes, *([f"--parallel: up to {slots.count} runs at once, on cores {cores}"] if slots.count > 1
                             else [])]
    plan.notes.extend(note for note in notes if note not in plan.notes)
    if slots.count <= 1:
        return Session(profile, plan, backend, reason)
    return ParallelSession(profile, plan, backend, reason, slots=slots)
