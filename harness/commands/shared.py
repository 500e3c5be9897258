"""Options and output the commands share: results and analysis options, the device profile's flags of profile and
sweep, JSON and warnings on the consoles. Command modules import from here and never from one another.

User values from `make` arrive as HARNESS_* environment variables (never through a shell); an empty
variable means "not given".
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.table import Table

from harness.api.profiling import KEYWORD_OF, KEYWORDS, device_env, plan_profile, run_session
from harness.core import metric_registry
from harness.core.config import DeviceProfile
from harness.core.errors import ConfigError
from harness.core.targets import Address
from harness.models.resolve import ModelInfo
from harness.report.console import err_console, out_console, print_summary
from harness.run.adaptive import adapts
from harness.run.assemble import SessionRequest, SessionStart
from harness.run.session import BaseSession
from harness.store.results import ALL_SESSIONS, SCHEMA_VERSION

if TYPE_CHECKING:
    import pandas as pd

    from harness.calibration.transfer import Library


def env_default(name: str) -> str | None:
    return os.environ.get(name) or None


def add_results_options(parser: argparse.ArgumentParser, *, pooled: bool = False, json_flag: bool = True,
                        by_runtime: bool = False) -> None:
    parser.add_argument("--results-dir", help="results directory (default: RESULTS_DIR of the profile)")
    help_text = "session id or path (default: the newest)"
    if pooled:
        help_text += f"; `{ALL_SESSIONS}` pools every session"
    parser.add_argument("--session", default=env_default("HARNESS_SESSION"), help=help_text)
    if by_runtime:
        parser.add_argument("--runtime", default=env_default("HARNESS_SET_RUNTIME"),
                            help="only the runs of this engine (onnxruntime, ncnn or litert), e.g. the one the "
                                 "device data was measured with (default: the engine in the device data's runtime "
                                 "column, else every run; make: RUNTIME=...)")
    if json_flag:
        parser.add_argument("--json", action="store_true", help="print JSON only, on stdout")


def add_metric_option(parser: argparse.ArgumentParser, default: str | None, help_text: str,
                      accept: Callable[[metric_registry.Metric], bool]) -> None:
    choices = ", ".join(metric_registry.names(accept))
    parser.add_argument("--metric", default=env_default("HARNESS_METRIC") or default,
                        help=f"{help_text}; one of: {choices} (make: METRIC=...)")


def add_fit_option(parser: argparse.ArgumentParser, fit_names: tuple[str, ...]) -> None:
    parser.add_argument(
        "--fit", default=env_default("HARNESS_FIT") or "auto", choices=("auto", *fit_names),
        help="auto (default: the fit with the best held-out ±10%% share) or one fit forced (make regress: FIT=...)",
    )


def add_across_repeats_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--across-repeats", default=env_default("HARNESS_ACROSS_REPEATS"), choices=metric_registry.ACROSS_REPEATS,
        help="how a model's repeats become its harness value: fastest-inference (the default for latency_ms and "
             "latency_p50_ms: the fastest single inference of all repeats), fastest (the fastest repeat; the default "
             "for other times, which other load only lengthens) or median (the default for memory) "
             "(make: ACROSS_REPEATS=...)",
    )


def add_library_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-library", action="store_true", default=env_default("HARNESS_LIBRARY") == "0",
        help="learn nothing from the device library (harness devices): the harness's own profile alone, no "
             "`library` fit and no `kernels` fit (make: LIBRARY=0)")


def library_option(args: argparse.Namespace, results_dir: Path, device: str) -> Library | None:
    """The device library a calibration of `device` learns from (every table but the device's own), unless
    --no-library."""
    from harness.calibration.transfer import device_library  # pandas and scipy: only for the commands that calibrate

    if args.no_library:
        return None
    library = device_library(results_dir, device)
    if library.refused:
        warn(library.refused_note(device))
    return library


DEVICE_HELP = ("the device: on profile and sweep a preset (devices/NAME.env, e.g. raspberry-pi-4) or an env file, "
               "whose limits the runs get; on the commands that calibrate, a device whose measurements the harness "
               "holds (a name given to import-device, or a library table: `harness devices`)")
"""What --device means on every command that takes it, said in each one's --help."""


def add_device_option(parser: argparse.ArgumentParser, several: bool = False) -> None:
    """--device, from make's DEVICE when not given; `several`: repeatable (make: DEVICE="a b"), read by devices()."""
    if several:
        parser.add_argument("--device", action="append", required=env_default("HARNESS_DEVICE") is None,
                            help=f"{DEVICE_HELP}; repeat it for one table of several devices (make: DEVICE=\"a b\")")
        return
    parser.add_argument(
        "--device", default=env_default("HARNESS_DEVICE"), required=env_default("HARNESS_DEVICE") is None,
        help=f"{DEVICE_HELP} (make: DEVICE=...)",
    )


def devices(args: argparse.Namespace) -> list[str]:
    """The devices of a repeatable --device, else make's DEVICE split at spaces."""
    return list(args.device or shlex.split(os.environ.get("HARNESS_DEVICE", "")))


def print_json(obj: dict[str, Any]) -> None:
    """The command's result as one JSON document on stdout, versioned like the stored results."""
    json.dump({"schema_version": SCHEMA_VERSION, **obj}, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def text_table(frame: pd.DataFrame, title: str) -> Table:
    """A table already formatted as text (a column per heading) as a rich Table."""
    table = Table(title=title, title_justify="left")
    for column in frame.columns:
        table.add_column(str(column))
    for row in frame.itertuples(index=False):
        table.add_row(*(str(value) for value in row))
    return table


def warn(message: str) -> None:
    """`message` as it is (model names from a user's files may hold `[/x]`, which rich would read as markup)."""
    err_console.print(f"[yellow]warning:[/yellow] {escape(message)}", highlight=False, soft_wrap=True)


def fmt(value: Any, digits: int = 4) -> str:
    """Numbers to `digits` significant figures; missing as an em dash."""
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


FLAG_NAMES = {"timeout_s": "timeout", "dims": "dim"}
"""The flags of profile and sweep whose name is not their keyword's (harness.api.profiling.KEYWORDS, the one table:
a flag's dest is its keyword)."""


def add_profile_options(parser: argparse.ArgumentParser, cpus_help: str) -> None:
    """Flags shared by profile and sweep: each overrides one env.template variable."""
    parser.add_argument("models", nargs="*", metavar="MODEL", help="model files or zoo names (default: $MODEL)")
    parser.add_argument("--device", metavar="PRESET|FILE", help=f"{DEVICE_HELP}; here: its preset, as --env")
    parser.add_argument("--env", default=os.environ.get("HARNESS_ENV_FILE") or None,
                        help="device profile env file, e.g. devices/jetson-nano.env (default: $ENV)")
    parser.add_argument("--cpus", help=cpus_help)
    parser.add_argument("--memory", help="MEMORY, e.g. 512m or 2g")
    for keyword in ("device_name", "cpu_pinning", "swap", "repeats", "precision", "max_repeats", "adaptive_budget_s",
                    "latency_statistic", "iterations", "warmup", "batch_size", "sample_interval_ms", "timeout_s",
                    "image", "results_dir"):
        parser.add_argument(f"--{FLAG_NAMES.get(keyword, keyword).replace('_', '-')}", dest=keyword,
                            help=f"overrides {KEYWORDS[keyword]}")
    parser.add_argument("--backend", help="auto, docker or local")
    parser.add_argument("--runtime", help="RUNTIME: the engine for ONNX models, onnxruntime, ncnn or litert")
    parser.add_argument("--dim", dest="dims", action="append", metavar="NAME=SIZE",
                        help="size of a dynamic input dimension, e.g. --dim seq=128 (repeatable; overrides DIMS)")
    parser.add_argument("--inputs", metavar="FILE", help="INPUTS: an .npz of the models' inputs, fed instead of "
                                                        "random ones (see docs/inputs.md)")
    parser.add_argument("--target", metavar="ssh://USER@HOST[:PORT]",
                        help="TARGET: run on this board over SSH (or a Host alias: ssh://alias; several, space-"
                             "separated, for a farm); see docs/targets.md")
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
    add_answer_options(parser)


def start_from_args(args: argparse.Namespace, cpus: list[str] | None = None) -> SessionStart:
    """The session of profile and sweep (`cpus`: sweep's list), planned by the function harness.profile plans with."""
    return plan_profile(session_request(args), profile_env_file(args), flag_settings(args, cpus), source=flag_of)


def flag_settings(args: argparse.Namespace, cpus: list[str] | None = None) -> dict[str, Any]:
    """The flags of profile and sweep as harness.profile's keywords (a flag's dest is its keyword); --dim's repeats
    as DIMS writes them."""
    settings = {keyword: getattr(args, keyword) for keyword in KEYWORDS}
    if settings["dims"]:
        settings["dims"] = " ".join(settings["dims"])
    return settings if cpus is None else {**settings, "cpus": cpus}


def flag_of(variable: str) -> str:
    """The flag that sets `variable`, as an error names where a value came from."""
    keyword = KEYWORD_OF.get(variable, variable.lower())
    return f"--{FLAG_NAMES.get(keyword, keyword).replace('_', '-')}"


def profile_env_file(args: argparse.Namespace) -> str | Path | None:
    """The env file of profile and sweep: --device's preset (or file), else --env (make: ENV=...); both is an error."""
    if args.device is None:
        return args.env  # type: ignore[no-any-return]
    if args.env and args.env != os.environ.get("HARNESS_ENV_FILE"):
        raise ConfigError(f"--device {args.device} and --env {args.env}: give one of them")
    return device_env(args.device)


def session_request(args: argparse.Namespace) -> SessionRequest:
    """What profile and sweep ask of their session: MODELs, else $MODEL (make); --script, else $SCRIPT; the script's
    arguments after `--`, else $ARGS. Make's values are split like a shell would, but never run by one."""
    return SessionRequest(
        models=tuple(args.models) or tuple(shlex.split(os.environ.get("HARNESS_MODEL", ""))),
        scripts=tuple(args.script or ()) or tuple(Path(p) for p in shlex.split(os.environ.get("HARNESS_SCRIPT", ""))),
        name=args.name, script_args=tuple(args.extra_args) or tuple(shlex.split(os.environ.get("HARNESS_ARGS", ""))),
        seed=args.seed, keep_samples=args.keep_samples, parallel=args.parallel, cluster=args.cluster,
        allow_mixed_hosts=args.allow_mixed_hosts)


def announce(start: SessionStart) -> None:
    """What is about to happen: the built-in examples when no model was given, the device and its limits, the
    backend and why, the profile's warnings, the plan's notes, and each model its engine refused."""
    session = start.session
    profile, plan, models = session.profile, session.plan, session.plan.models
    if start.examples:
        err_console.print(f"no MODEL given: profiling the {len(models)} built-in examples in examples/models "
                          f"({', '.join(m.name for m in models)}; {sum(m.size_mib for m in models):.1f} MiB)",
                          highlight=False)
    err_console.print(f"[bold]{profile.device_name}[/]: cpus={','.join(f'{c:g}' for c in plan.cpus_values)} "
                      f"memory={profile.memory_mib:.0f}MiB swap={profile.swap_bytes // 1024**2}MiB "
                      f"repeats={profile.repeats}{adaptive_text(profile)} · {session.backend_reason} · isolation "
                      f"{session.backend_info.get('isolation')} · seed {plan.seed} · session {plan.session_id}")
    for warning in profile.warnings:
        err_console.print(f"[yellow]warning[/]: {warning}")
    print_notes(start.new_notes)
    print_refusals(models)


def adaptive_text(profile: DeviceProfile) -> str:
    """How far adaptive repeats may take a model, where they apply (harness.run.adaptive)."""
    if not adapts(profile):
        return ""
    return f" (up to {profile.max_repeats} until ±{profile.precision_pct:g}%)"


def print_notes(notes: list[str]) -> None:
    for note in notes:
        err_console.print(f"[yellow]note[/]: {note}")


def print_refusals(models: list[ModelInfo]) -> None:
    """One line per model its engine refused (a failed conversion): its runs are kept as errors, the others go on."""
    for model in models:
        if model.refused:
            err_console.print(f"[yellow]warning[/]: {escape(model.refused)} (its runs are recorded as errors)",
                              highlight=False)


def run_and_print(session: BaseSession, as_json: bool) -> int:
    """Run the session under a progress bar, then say what happened during it and print its summary."""
    known_notes = len(session.plan.notes)
    _, summary = run_session(session)
    print_notes(session.plan.notes[known_notes:])  # what happened during the session (a cluster node lost)
    if session.not_run:
        err_console.print(f"[yellow]warning[/]: {len(session.not_run)} runs not run "
                          f"({next(iter(session.not_run.values()))}); finish them with `{session.resume_command()}`")
    if as_json:
        sys.stdout.write(json.dumps(summary, indent=2, default=str) + "\n")
    else:
        print_summary(summary)
    return 0


def add_answer_options(parser: argparse.ArgumentParser) -> None:
    """What the report's answer weighs besides latency: accuracy and a latency budget (report, profile, sweep)."""
    parser.add_argument("--accuracy", type=Path, metavar="FILE", default=env_default("HARNESS_ACCURACY"),
                        help="a CSV of model and accuracy (or top1), in percent: the answer's accuracy against "
                             "latency (beside an imported device CSV's accuracy or top1 column and the published "
                             "top-1 of the shipped tables; make: ACCURACY=...)")
    parser.add_argument("--max-latency-ms", type=float, metavar="MS", default=env_default("HARNESS_MAX_LATENCY_MS"),
                        help="the latency budget: the answer names the most accurate model under it (on the "
                             "device the answer ranks by, else this host; make: MAX_LATENCY_MS=...)")


def write_session_report(session: BaseSession, args: argparse.Namespace) -> Path:
    """The session's report (report.html and its files), its answer weighing --accuracy and --max-latency-ms;
    imported here since it loads matplotlib and scipy."""
    from harness.report.document import REPORT_DIR, build_report, write_report

    out = session.store.path / REPORT_DIR
    write_report(build_report(session.store.path.parent, session.store.path, accuracy_file=args.accuracy,
                              max_latency_ms=args.max_latency_ms), out)
    return out / "report.html"


def board_rows(facts: dict[str, Any]) -> list[tuple[str, str]]:
    """What `target check` shows of a board, a row each."""
    cgroup = facts.get("cgroup") or {}
    engines = facts.get("engines") or {}
    limits = "writable: limits enforced" if cgroup.get("writable") else "read-only: rlimits only"
    return [
        ("board", f"{facts.get('hostname')} · {facts.get('board_model') or facts.get('system')} · {facts['machine']}"),
        ("CPU", f"{facts.get('cpu_model')} · {len(facts.get('cores') or [])} cores · "
                f"{facts.get('memory_mib') or 0:.0f} MiB"),
        ("Python", f"{facts['python']} ({facts['executable']}){' · harness venv' if facts.get('env') else ''}"),
        ("engines", ", ".join(f"{name} {version or '?'}" for name, version in sorted(engines.items())) or "none"),
        ("cgroups", f"v{cgroup.get('version')}, {limits}" if cgroup.get("version") else "none: rlimits only"),
        ("energy", ", ".join(facts.get("energy") or []) or "none"),
        ("disk free", f"{facts.get('disk_free_mib') or 0:.0f} MiB in {facts.get('home')}"),
    ]


def print_board_check(address: Address) -> None:
    """`harness target check` (and `doctor --target`): the board's facts as a table, then each thing it lacks."""
    from harness.backends.target import setup

    facts, lacks = setup.check(address)
    table = Table(title=f"{address.url}: what the board has")
    table.add_column("what")
    table.add_column("found")
    for what, found in board_rows(facts):
        table.add_row(what, escape(found))
    out_console.print(table)
    for line in lacks:
        out_console.print(f"[yellow]lacks:[/] {escape(line)}", highlight=False, soft_wrap=True)
