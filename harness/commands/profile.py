"""`harness profile MODEL...`: measure models under the device profile's limits, REPEATS times each."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from dataclasses import replace
from pathlib import Path

from harness.backends import select_backend
from harness.config import DeviceProfile, load_profile
from harness.console import err_console, print_summary, run_progress
from harness.errors import ConfigError
from harness.models import resolve_model
from harness.session import Plan, Session, load_plan, plan_session
from harness.store import new_session_id, resolve_session

# CLI flag (argparse dest) -> env.template variable it overrides
FLAG_VARIABLES = {
    "device_name": "DEVICE_NAME", "cpus": "CPUS", "cpu_pinning": "CPU_PINNING", "memory": "MEMORY", "swap": "SWAP",
    "repeats": "REPEATS", "iterations": "ITERATIONS", "warmup": "WARMUP", "batch_size": "BATCH_SIZE",
    "sample_interval_ms": "SAMPLE_INTERVAL_MS", "timeout": "TIMEOUT_S", "backend": "BACKEND", "image": "IMAGE",
    "results_dir": "RESULTS_DIR",
}


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
    parser.add_argument("--backend", default=os.environ.get("HARNESS_BACKEND") or None, help="auto, docker or local")
    parser.add_argument("--script", type=Path, help="your own bench script (arguments for it go after --)")
    parser.add_argument("--seed", type=int, help="seed of the run order shuffle (default: random, recorded)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON on stdout, nothing else")
    parser.add_argument("--keep-samples", action="store_true",
                        help="store each run's memory time series (memory_samples) in runs.jsonl")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("profile", help="measure models under the device profile's limits",
                                   description=__doc__)
    add_profile_options(parser, "CPUS, e.g. 2 or 0.5")
    parser.add_argument("--resume", metavar="SESSION", help="finish the runs an interrupted session did not do")
    parser.set_defaults(func=run_profile)


def profile_from_args(args: argparse.Namespace, skip: tuple[str, ...] = ()) -> DeviceProfile:
    overrides = {var: getattr(args, dest) for dest, var in FLAG_VARIABLES.items() if dest not in skip}
    return load_profile(args.env, overrides)


def model_args(args: argparse.Namespace) -> list[str]:
    models = list(args.models) or shlex.split(os.environ.get("HARNESS_MODEL", ""))
    if not models:
        raise ConfigError("no model given: run `harness profile path/to/model.onnx` or `make profile MODEL=...`")
    return models


def start_session(profile: DeviceProfile, args: argparse.Namespace, cpus_values: list[float] | None) -> Session:
    """Pick the backend, resolve and check every model, plan all runs, and say what is about to happen."""
    backend, reason = select_backend(profile)
    models = [resolve_model(m, args.script, check_runtime=backend.name == "local") for m in model_args(args)]
    plan = plan_session(profile, models, cpus_values, tuple(args.extra_args), new_session_id(), args.seed,
                        args.keep_samples)
    session = Session(profile, plan, backend, reason)
    info = backend.describe()
    err_console.print(f"[bold]{profile.device_name}[/]: cpus={','.join(f'{c:g}' for c in plan.cpus_values)} "
                      f"memory={profile.memory_mib:.0f}MiB swap={profile.swap_bytes // 1024**2}MiB "
                      f"repeats={profile.repeats} · {reason} · isolation {info.get('isolation')} · "
                      f"seed {plan.seed} · session {plan.session_id}")
    for warning in profile.warnings:
        err_console.print(f"[yellow]warning[/]: {warning}")
    for note in plan.notes:
        err_console.print(f"[yellow]note[/]: {note}")
    return session


def finish(session: Session, args: argparse.Namespace) -> int:
    pending = len(session.plan.specs) - len(session.runs)
    with run_progress(pending) as (on_start, on_done):
        summary = session.run(on_start, on_done)
    if args.json:
        sys.stdout.write(json.dumps(summary, indent=2, default=str) + "\n")
    else:
        print_summary(summary)
    return 0


def run_profile(args: argparse.Namespace) -> int:
    if args.resume:
        return resume(args)
    return finish(start_session(profile_from_args(args), args, None), args)


def resume(args: argparse.Namespace) -> int:
    """Rebuild the interrupted session's profile and plan from its session.json and run what is missing."""
    base = load_profile(args.env, {"RESULTS_DIR": args.results_dir} if args.results_dir else None)
    session_dir = resolve_session(Path(base.results_dir), args.resume)
    info, specs = load_plan(session_dir)
    profile = load_profile(None, {**info["profile"], "RESULTS_DIR": str(session_dir.parent)})
    backend, reason = select_backend(profile)
    script = Path(specs[0].script) if info["models"] and info["models"][0]["model_kind"] == "custom" else None
    models = [replace(resolve_model(m["model_path"], script, check_runtime=backend.name == "local"),
                      name=m["model_name"]) for m in info["models"]]
    plan = Plan(info["session_id"], info["seed"], specs, models, info["cpus_values"], info.get("notes", []))
    err_console.print(f"resuming {plan.session_id}: {len(specs)} planned runs · {reason}")
    return finish(Session(profile, plan, backend, reason), args)
