"""`harness profile MODEL...`: measure models under the device profile's limits, REPEATS times each."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from rich.markup import escape

from harness.backends import Backend, select_backend
from harness.commands import COMMANDS
from harness.core.config import DeviceProfile, environment_values, load_profile
from harness.core.errors import ConfigError
from harness.measure.spec import RunSpec
from harness.models.resolve import (
    BENCH_SCRIPTS_DIR,
    SCRIPT_KIND,
    ModelInfo,
    example_models,
    resolve_model,
    resolve_script,
)
from harness.report.console import err_console, print_summary, run_progress
from harness.run.session import Plan, Session, load_plan, plan_session
from harness.store.results import ensure_writable_dir, new_session_id, resolve_session

# CLI flag (argparse dest) -> env.template variable it overrides
FLAG_VARIABLES = {
    "device_name": "DEVICE_NAME", "cpus": "CPUS", "cpu_pinning": "CPU_PINNING", "memory": "MEMORY", "swap": "SWAP",
    "repeats": "REPEATS", "iterations": "ITERATIONS", "warmup": "WARMUP", "batch_size": "BATCH_SIZE",
    "sample_interval_ms": "SAMPLE_INTERVAL_MS", "timeout": "TIMEOUT_S", "backend": "BACKEND", "image": "IMAGE",
    "results_dir": "RESULTS_DIR", "per_op": "PER_OP", "runtime": "RUNTIME",
}
EXAMPLE_SETTINGS = {"REPEATS": 7, "ITERATIONS": 50, "WARMUP": 5}
"""The example run's settings where the user set none (env.template's 500 iterations would take minutes): seven
repeats are the fewest with which the ranking can order its three models (its paired test over 7 rounds reaches
0.05/3, Holm's first threshold for 3 pairs; six already give each median a 95% CI), and the whole run stays near a
minute on 2 cores."""
NEXT_STEPS = (
    "your model:  make profile MODEL=path/to/model.onnx   (or a zoo name: MODEL=mobilenet_v2_0.5_224)",
    "your script: make profile SCRIPT=job.py ARGS=\"--epochs 1\"   (profiled as a whole)",
    "a device:    make profile ENV=devices/raspberry-pi-4.env MODEL=...   (presets in devices/)",
)


def add_profile_options(parser: argparse.ArgumentParser, cpus_help: str) -> None:
    """Flags shared by profile and sweep: each overrides one env.template variable."""
    parser.add_argument("models", nargs="*", metavar="MODEL", help="model files or zoo names (default: $MODEL)")
    parser.add_argument("--env", default=os.environ.get("HARNESS_ENV_FILE") or None,
                        help="device profile env file, e.g. devices/jetson-nano.env (default: $ENV)")
    parser.add_argument("--cpus", help=cpus_help)
    parser.add_argument("--memory", help="MEMORY, e.g. 512m or 2g")
    for flag in ("device-name", "cpu-pinning", "swap", "repeats", "iterations", "warmup", "batch-size",
                 "sample-interval-ms", "timeout", "image", "results-dir"):
        parser.add_argument(f"--{flag}", help=f"overrides {FLAG_VARIABLES[flag.replace('-', '_')]}")
    parser.add_argument("--backend", help="auto, docker or local")
    parser.add_argument("--runtime", help="RUNTIME: the engine for ONNX models, onnxruntime, ncnn or litert")
    parser.add_argument("--script", type=Path, action="append",
                        help="your own script (arguments for it go after --): with MODELs it is their bench script; "
                             "without, it is profiled as a whole (repeat --script for several; default: $SCRIPT)")
    parser.add_argument("--name", help="name of a script profiled as a whole (default: its file name)")
    parser.add_argument("--seed", type=int, help="seed of the run order shuffle (default: random, recorded)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON on stdout, nothing else")
    parser.add_argument("--per-op", action="store_const", const="1",
                        help="PER_OP=1: after each run's timed phase, profile every operator (see `harness ops`)")
    parser.add_argument("--keep-samples", action="store_true",
                        help="store each run's memory time series (memory_samples) in runs.jsonl")
    parser.add_argument("--parallel", metavar="N|auto", default=os.environ.get("HARNESS_PARALLEL") or None,
                        help="run up to N runs at once on disjoint cores of this host (auto: as many as the cores, "
                             "memory and measured interference allow; default: one at a time)")
    parser.add_argument("--cluster", metavar="ADDRESS", default=os.environ.get("HARNESS_CLUSTER") or None,
                        help="run on a Dask distributed cluster's workers, e.g. tcp://10.0.0.5:8786 (see "
                             "docs/scaling.md); --parallel then applies on each worker")
    parser.add_argument("--allow-mixed-hosts", action="store_true",
                        help="with --cluster: accept nodes whose CPU models differ (the summary groups by host)")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("profile", help=COMMANDS["profile"],
                                   description=__doc__)
    add_profile_options(parser, "CPUS, e.g. 2 or 0.5")
    parser.add_argument("--resume", metavar="SESSION", help="finish the runs an interrupted session did not do")
    parser.set_defaults(func=run_profile)


def profile_from_args(args: argparse.Namespace, skip: tuple[str, ...] = ()) -> DeviceProfile:
    """The profile from every layer; `skip` names flags (and their variables) that the command reads itself."""
    overrides = {var: getattr(args, dest) for dest, var in FLAG_VARIABLES.items() if dest not in skip}
    skipped = {FLAG_VARIABLES[dest] for dest in skip}
    environment = {name: value for name, value in environment_values().items() if name not in skipped}
    return load_profile(args.env, overrides, environment)


def script_args(args: argparse.Namespace) -> list[str]:
    """Arguments after `--`, else $ARGS (make) split like a shell would, but never run by one."""
    return list(args.extra_args) or shlex.split(os.environ.get("HARNESS_ARGS", ""))


def targets(args: argparse.Namespace, check_runtime: bool, runtime: str) -> tuple[list[ModelInfo], bool]:
    """What the session measures, and whether it is the built-in example set.

    Models (with their bench script, or one --script of the user's); else scripts profiled as a whole; else,
    with nothing given, the examples in examples/models, so the first command works with nothing to bring."""
    names = list(args.models) or shlex.split(os.environ.get("HARNESS_MODEL", ""))
    scripts = list(args.script or []) or [Path(p) for p in shlex.split(os.environ.get("HARNESS_SCRIPT", ""))]
    if names:
        if args.name:
            raise ConfigError("--name names a script profiled as a whole; models are named after their files")
        if len(scripts) > 1:
            raise ConfigError("several --script values with models: give one bench script for the models, "
                              "or drop the models to profile each script as a whole")
        return [resolve_model(m, scripts[0] if scripts else None, check_runtime, runtime) for m in names], False
    if scripts:
        if args.name and len(scripts) > 1:
            raise ConfigError("--name names one script; with several scripts each is named after its file")
        infos = [resolve_script(path, args.name) for path in scripts]
        clashes = sorted({i.name for i in infos if [j.name for j in infos].count(i.name) > 1})
        if clashes:
            raise ConfigError(f"scripts share the name {', '.join(clashes)}; rename one to keep their results apart")
        return infos, False
    return [resolve_model(str(path), None, check_runtime, runtime) for path in example_models()], True


def example_profile(profile: DeviceProfile) -> DeviceProfile:
    """EXAMPLE_SETTINGS for every one of them the user left at its default."""
    chosen = {name: value for name, value in EXAMPLE_SETTINGS.items()
              if profile.sources.get(name) in ("default", "env.template")}
    return replace(profile, **{name.lower(): value for name, value in chosen.items()},
                   sources={**profile.sources, **dict.fromkeys(chosen, "example run")})


def start_session(profile: DeviceProfile, args: argparse.Namespace,
                  cpus_values: list[float] | None) -> tuple[Session, bool]:
    """Pick the backend, resolve and check every model, plan all runs, and say what is about to happen.
    Also says whether the session is the built-in example run."""
    backend, reason = pick_backend(profile, args)
    with closed_on_error(backend):
        models, examples = targets(args, check_runtime=backend.name == "local", runtime=profile.runtime)
        ensure_writable_dir(Path(profile.results_dir),  # after the models' checks: a bad model leaves no directory
                            f"RESULTS_DIR (from {profile.sources.get('RESULTS_DIR', 'default')})")
        if examples:
            profile = example_profile(profile)
            err_console.print(f"no MODEL given: profiling the {len(models)} built-in examples in examples/models "
                              f"({', '.join(m.name for m in models)}; {sum(m.size_mib for m in models):.1f} MiB)",
                              highlight=False)
        plan = plan_session(profile, models, cpus_values, tuple(script_args(args)), new_session_id(), args.seed,
                            args.keep_samples)
        session = build_session(profile, plan, backend, reason, args)
    info = backend.describe()
    err_console.print(f"[bold]{profile.device_name}[/]: cpus={','.join(f'{c:g}' for c in plan.cpus_values)} "
                      f"memory={profile.memory_mib:.0f}MiB swap={profile.swap_bytes // 1024**2}MiB "
                      f"repeats={profile.repeats} · {reason} · isolation {info.get('isolation')} · "
                      f"seed {plan.seed} · session {plan.session_id}")
    for warning in profile.warnings:
        err_console.print(f"[yellow]warning[/]: {warning}")
    for note in plan.notes:
        err_console.print(f"[yellow]note[/]: {note}")
    refusals(models)
    return session, examples


def refusals(models: list[ModelInfo]) -> None:
    """One line per model its engine refused (a failed conversion): its runs are kept as errors, the others go on."""
    for model in models:
        if model.refused:
            err_console.print(f"[yellow]warning[/]: {escape(model.refused)} (its runs are recorded as errors)",
                              highlight=False)


@contextmanager
def closed_on_error(backend: Backend) -> Iterator[None]:
    """Until a session owns the backend (and closes it when it ends), a refusal closes it here: a cluster
    client left open would keep trying to reconnect long after the CLI has said why it stopped."""
    try:
        yield
    except BaseException:
        backend.close()
        raise


def pick_backend(profile: DeviceProfile, args: argparse.Namespace) -> tuple[Backend, str]:
    """This host's backend, or with --cluster the Dask cluster (each worker then picks its own)."""
    if not args.cluster:
        return select_backend(profile)
    from harness.run.cluster import cluster_backend

    return cluster_backend(args.cluster)


def build_session(profile: DeviceProfile, plan: Plan, backend: Backend, reason: str,
                  args: argparse.Namespace) -> Session:
    """A serial Session; with --parallel a ParallelSession over this host's slots (its notes join the plan's);
    with --cluster a ClusterSession over the cluster's nodes."""
    from harness.run.slots import parse_parallel, plan_slots, run_needs

    parallel = parse_parallel(args.parallel) if args.parallel else 1
    if args.cluster:
        from harness.run.cluster import ClusterSession

        return ClusterSession(profile, plan, backend, reason, parallel=parallel,
                              allow_mixed_hosts=args.allow_mixed_hosts)
    if not args.parallel:
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


def finish(session: Session, args: argparse.Namespace) -> int:
    pending = len(session.plan.specs) - len(session.runs)
    known_notes = len(session.plan.notes)
    with run_progress(pending) as (on_start, on_done):
        summary = session.run(on_start, on_done)
    for note in session.plan.notes[known_notes:]:  # what happened during the session (a cluster node lost)
        err_console.print(f"[yellow]note[/]: {note}")
    not_run = getattr(session, "not_run", {})
    if not_run:
        err_console.print(f"[yellow]warning[/]: {len(not_run)} runs not run ({next(iter(not_run.values()))}); "
                          f"finish them with `{session.resume_command()}`")
    if args.json:
        sys.stdout.write(json.dumps(summary, indent=2, default=str) + "\n")
    else:
        print_summary(summary)
    return 0


def run_profile(args: argparse.Namespace) -> int:
    if args.resume:
        return resume(args)
    session, examples = start_session(profile_from_args(args), args, None)
    code = finish(session, args)
    if examples:
        report = write_session_report(session)
        err_console.print(f"\n[bold]Next[/]: open the report: {report}", highlight=False)
        for line in NEXT_STEPS:
            err_console.print(f"  {line}", highlight=False)
    return code


def write_session_report(session: Session) -> Path:
    """The session's report (report.html and its files); imported here since it loads matplotlib and scipy."""
    from harness.report.document import REPORT_DIR, build_report, write_report

    out = session.store.path / REPORT_DIR
    write_report(build_report(session.store.path.parent, session.store.path), out)
    return out / "report.html"


def user_script(specs: list[RunSpec], model_name: str) -> Path | None:
    """The --script a model's planned runs use, or None where that is the harness's own bench script: the model is
    then resolved as the session first resolved it (its kind picks the script, RUNTIME its engine), so the runs made
    after a resume carry the same conditions as those made before."""
    script = next((Path(spec.script) for spec in specs if spec.model_name == model_name), None)
    return None if script is None or script.resolve().parent == BENCH_SCRIPTS_DIR else script


def resume(args: argparse.Namespace) -> int:
    """Rebuild the interrupted session's profile and plan from its session.json and run what is missing."""
    base = load_profile(args.env, {"RESULTS_DIR": args.results_dir} if args.results_dir else None)
    session_dir = resolve_session(Path(base.results_dir), args.resume)
    info, specs = load_plan(session_dir)
    profile = load_profile(None, {**info["profile"], "RESULTS_DIR": str(session_dir.parent)})
    backend, reason = pick_backend(profile, args)
    with closed_on_error(backend):
        models = [resolve_script(Path(m["model_path"]), m["model_name"]) if m["model_kind"] == SCRIPT_KIND else
                  replace(resolve_model(m["model_path"], user_script(specs, m["model_name"]),
                                        check_runtime=backend.name == "local",
                                        runtime=profile.runtime), name=m["model_name"]) for m in info["models"]]
        plan = Plan(info["session_id"], info["seed"], specs, models, info["cpus_values"], info.get("notes", []))
        session = build_session(profile, plan, backend, reason, args)
    err_console.print(f"resuming {plan.session_id}: {len(specs)} planned runs · {reason}")
    refusals(models)
    for note in plan.notes[len(info.get("notes", [])):]:
        err_console.print(f"[yellow]note[/]: {note}")
    return finish(session, args)
