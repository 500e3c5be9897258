"""`harness probe`: measure one engine's kernels on one device (this host through its backend, or TARGET's board) and
write its kernel table; `probe export` and `probe import` do the same for a device the harness cannot reach."""

from __future__ import annotations

import argparse
import os

from harness.api.profiling import KEYWORDS, device_profile
from harness.commands import COMMANDS
from harness.commands.shared import FLAG_NAMES, flag_of, print_json, profile_env_file
from harness.core.errors import ConfigError
from harness.report.console import err_console, out_console
from harness.run.probe import DEFAULT_MODELS, ProbeRequest, probe

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
                    "kernels' time is hardest to predict, until the budget is spent. See docs/kernels.md.")
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
    parser.add_argument("--budget-min", type=float, default=20.0,
                        help="minutes of probing, all phases together (default 20); the stratified designed round "
                             "runs whatever the budget")
    parser.add_argument("--designed", type=int, metavar="N", help="at most N designed kernels (default: as many as "
                                                                  "the budget allows)")
    parser.add_argument("--name", help="the kernel table's name (default: <device>-<engine>-<threads>t-fp32)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the designed kernels' sampling (default 0)")
    parser.add_argument("--json", action="store_true", help="print the table's provenance as JSON on stdout")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.budget_min <= 0:
        raise ConfigError(f"--budget-min {args.budget_min:g}: give a number of minutes above 0, e.g. 20")
    if args.designed is not None and args.designed < 1:
        raise ConfigError(f"--designed {args.designed}: give a whole number of kernels of 1 or more")
    if args.name is not None and (not args.name or "/" in args.name or args.name.startswith(".")):
        raise ConfigError(f"--name {args.name!r}: give a plain name, e.g. rpi4-ncnn-1t-fp32")
    settings = {keyword: getattr(args, keyword) for keyword in (*PROFILE_FLAGS, "cpus")}
    profile, _ = device_profile(profile_env_file(args), settings, source=flag_of)
    models = DEFAULT_MODELS if args.models is None else tuple(args.models)
    request = ProbeRequest(models=models, budget_s=args.budget_min * 60, name=args.name, seed=args.seed,
                           designed=args.designed)
    err_console.print(f"probing {profile.target or 'this host'} with {profile.runtime} at CPUS={profile.cpus:g}, "
                      f"budget {args.budget_min:g} min", highlight=False)
    table = probe(profile, request, lambda line: err_console.print(line, highlight=False))
    if args.json:
        print_json(table.provenance())
    else:
        out_console.print(f"{table.path}  (harness devices show {table.name})", highlight=False)
    return 0
