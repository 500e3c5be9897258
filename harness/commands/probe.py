"""`harness probe`: measure one engine's kernels on one device (this host through its backend, or TARGET's board) and
write its kernel table; `probe export` and `probe import` do the same for a device the harness cannot reach."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from harness.api.profiling import KEYWORDS, device_profile
from harness.commands import COMMANDS
from harness.commands.shared import FLAG_NAMES, flag_of, print_json, profile_env_file
from harness.core.config import resolve_results_dir
from harness.core.errors import ConfigError
from harness.kernels.exchange import ENGINES, SCRIPT, export, import_table
from harness.kernels.table import KernelTable
from harness.report.console import err_console, out_console
from harness.run.probe import DEFAULT_MODELS, FIRST_ROUND, ProbeRequest, check_models, probe
from harness.store.results import ensure_writable_dir

EXPORT_COUNT = FIRST_ROUND
"""Kernels an export holds by default: the stratified round harness probe starts with."""

PROFILE_FLAGS = ("device_name", "cpu_pinning", "memory", "repeats", "max_repeats", "iterations", "warmup",
                 "timeout_s", "backend", "runtime", "target", "results_dir")
"""The device profile's variables a probe takes as flags (each overrides its variable, as on `harness profile`)."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "probe", help=COMMANDS["probe"],
        description="Measure the kernels one engine runs on one device, under the device profile's limits and with "
                    "the session's protocol, and write its kernel table (RESULTS_DIR/kernels/<device>-<engine>-"
                    "<threads>t-fp32), which `harness devices` lists: zoo models profiled with PER_OP=1, and "
                    "designed single-kernel graphs packed into probe graphs, stratified first, then where the "
                    "kernels' time is hardest to predict, until the budget is spent. `probe export DIR --engine "
                    "litert|ncnn` writes designed kernels and a script that times them with the engine's own tool "
                    "(benchmark_model over adb, benchncnn) on a device the harness cannot reach; `probe import "
                    "OUTPUT --engine ... --name NAME` reads that tool's output into a kernel table. See "
                    "docs/kernels.md.")
    parser.add_argument("action", nargs="?", choices=("run", "export", "import"), default="run",
                        help="run: probe this host or TARGET (default); export: designed kernels for an engine's "
                             "own tool; import: that tool's output as a kernel table")
    parser.add_argument("path", nargs="?", help="export: the folder to write; import: the tool's output (a file, or "
                                                "the folder of logs run_probe.sh wrote)")
    parser.add_argument("--device", metavar="PRESET|FILE", help="the device profile: a preset (devices/NAME.env) or "
                                                                "an env file, whose limits the runs get")
    parser.add_argument("--env", default=os.environ.get("HARNESS_ENV_FILE") or None,
                        help="device profile env file (default: $ENV)")
    parser.add_argument("--cpus", help="CPUS, e.g. 1 or 2 (the table's threads are its ceiling)")
    for keyword in PROFILE_FLAGS:
        parser.add_argument(f"--{FLAG_NAMES.get(keyword, keyword).replace('_', '-')}", dest=keyword,
                            help=f"overrides {KEYWORDS[keyword]}")
    parser.add_argument("--models", nargs="*", metavar="MODEL",
                        help=f"zoo models (or ONNX files) profiled with PER_OP=1, in order of preference while the "
                             f"budget lasts; none: designed kernels only (default: {' '.join(DEFAULT_MODELS)})")
    parser.add_argument("--for", dest="for_models", nargs="+", metavar="MODEL", default=[],
                        help="your own models (ONNX files or zoo names): their convolutions and fully connected "
                             "layers are probed at their own configurations, so that `harness predict` reads them "
                             "from kernels measured where they run")
    parser.add_argument("--budget-min", type=float, default=20.0,
                        help="minutes of probing, all phases together (default 20); the stratified designed round "
                             "runs whatever the budget")
    parser.add_argument("--designed", type=int, metavar="N", help="at most N designed kernels (default: as many as "
                                                                  "the budget allows)")
    parser.add_argument("--name", help="the kernel table's name (default: <device>-<engine>-<threads>t-fp32)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the designed kernels' sampling (default 0)")
    parser.add_argument("--engine", choices=ENGINES, help="export and import: the engine (litert or ncnn)")
    parser.add_argument("--count", type=int, default=EXPORT_COUNT,
                        help=f"export: how many designed kernels (default {EXPORT_COUNT}, every kind and every "
                             "convolution stratum)")
    parser.add_argument("--export-dir", help="import: the folder `probe export` wrote (default: the folder holding "
                                             "the output)")
    parser.add_argument("--threads", type=int, help="import: the thread count, where the output does not say it")
    parser.add_argument("--json", action="store_true", help="print the table's provenance as JSON on stdout")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.action != "run":
        return exchange(args)
    if args.budget_min <= 0:
        raise ConfigError(f"--budget-min {args.budget_min:g}: give a number of minutes above 0, e.g. 20")
    if args.designed is not None and args.designed < 1:
        raise ConfigError(f"--designed {args.designed}: give a whole number of kernels of 1 or more")
    if args.name is not None and (not args.name or "/" in args.name or args.name.startswith(".")):
        raise ConfigError(f"--name {args.name!r}: give a plain name, e.g. rpi4-ncnn-1t-fp32")
    settings = {keyword: getattr(args, keyword) for keyword in (*PROFILE_FLAGS, "cpus")}
    profile, _ = device_profile(profile_env_file(args), settings, source=flag_of)
    models = DEFAULT_MODELS if args.models is None else tuple(args.models)
    check_models(models)  # before the heading: a misspelt name is the one line the user sees
    check_models(args.for_models, "--for")
    request = ProbeRequest(models=models, budget_s=args.budget_min * 60, name=args.name, seed=args.seed,
                           designed=args.designed, for_models=tuple(args.for_models))
    err_console.print(f"probing {profile.target or 'this host'} with {profile.runtime} at CPUS={profile.cpus:g}, "
                      f"budget {args.budget_min:g} min", highlight=False)
    table = probe(profile, request, lambda line: err_console.print(line, highlight=False))
    return said(table, args.json)


def said(table: KernelTable, as_json: bool) -> int:
    if as_json:
        print_json(table.provenance())
    else:
        out_console.print(f"{table.path}  (harness devices show {table.name})", highlight=False)
    return 0


def exchange(args: argparse.Namespace) -> int:
    """`probe export DIR` and `probe import OUTPUT`."""
    if not args.engine:
        raise ConfigError(f"probe {args.action}: give --engine litert or --engine ncnn")
    if not args.path:
        raise ConfigError(f"probe {args.action}: give the folder to write" if args.action == "export" else
                          "probe import: give the tool's output (a file, or the folder of logs)")
    path = Path(args.path)
    if args.action == "export":
        if args.count < 1:
            raise ConfigError(f"--count {args.count}: give a whole number of kernels of 1 or more")
        done = export(ensure_writable_dir(path, "probe export's folder"), args.engine, args.count, args.seed)
        err_console.print(f"{len(done.kernels)} designed kernels for {args.engine} in {path}"
                          + (f"; the converter refused {len(done.refused)} (kernels.json says why)" if done.refused
                             else ""), highlight=False)
        out_console.print(f"run {path / SCRIPT} on the device, then `harness probe import ... --engine {args.engine} "
                          "--name NAME`", highlight=False)
        return 0
    if not args.name or "/" in args.name or args.name.startswith("."):
        raise ConfigError("probe import: give the table a plain --name, e.g. pixel7-litert-4t-fp32")
    if not path.exists():
        raise ConfigError(f"probe import: {path} does not exist; give the tool's output")
    export_dir = Path(args.export_dir) if args.export_dir else path.parent
    results_dir = resolve_results_dir(args.results_dir)
    table = import_table(path, args.engine, args.name, export_dir, results_dir, args.device_name, args.threads)
    return said(table, args.json)
