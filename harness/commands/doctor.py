"""`harness doctor`: what this machine can enforce, and what to do where it can't."""

from __future__ import annotations

import argparse
import os

from rich.table import Table

from harness.backends.local import probe_isolation
from harness.commands import COMMANDS
from harness.core.config import load_profile
from harness.measure import cgroups, leases
from harness.report.console import out_console


def checks(image: str) -> list[tuple[str, bool, str]]:
    """(what, ok, detail or advice) for each capability the harness relies on."""
    from harness.backends.docker import engine_status  # the docker SDK loads only when asked

    own = cgroups.discover()
    isolation = probe_isolation(own)
    cgroup_ok = isolation.mode != "rlimit"
    docker_ok, docker_why = engine_status(image)
    allowed = len(os.sched_getaffinity(0))
    rows = [
        ("cgroup version", own.version > 0,
         f"v{own.version}" if own.version else "no memory controller visible: memory limits fall back to RLIMIT_AS"),
        ("local backend isolation", cgroup_ok,
         isolation.reason if cgroup_ok else f"{isolation.reason}; fallback: sched_setaffinity + RLIMIT_AS (crude)"),
        ("swap capped", isolation.swap_capped,
         "memory+swap limit available" if isolation.swap_capped
         else "no run cgroup to cap swap in" if not cgroup_ok
         else "no memsw/swap.max file: boot with swapaccount=1 (v1) so SWAP=0 is enforced"),
        ("kernel memory peak", isolation.kernel_peak,
         "exact high-water mark readable" if isolation.kernel_peak
         else "no run cgroup: peak from sampling only" if not cgroup_ok
         else "no memory.peak (kernel before 5.19): peak from sampling, results say peak_source: sampled"),
        ("CPU pinning", allowed > 1, f"{allowed} cores allowed: whole CPUS up to {allowed} pinned to dedicated cores"),
        ("docker backend", docker_ok, docker_why),
        ("leftover cgroups", True, leftovers(isolation.parent)),
    ]
    return rows


def leftovers(parent: cgroups.OwnCgroup | None) -> str:
    """Remove the cgroups of sessions whose harness was killed outright (harness.measure.leases) and say whose (a
    session id, or the pid of a harness killed as it probed)."""
    folders = sorted(set(parent.dirs.values())) if parent is not None else []
    removed = leases.sweep(folders)
    if not removed:
        return "none: no dead session left a cgroup"
    count = sum(len(paths) for paths in removed.values())
    return f"removed {count} cgroups that killed harnesses left: {', '.join(sorted(removed))}"


def run(args: argparse.Namespace) -> int:
    if args.target:  # the board's checks, as `harness target check` prints them
        from harness.commands.shared import print_board_check
        from harness.core.targets import target_addresses

        for address in target_addresses(args.target, "doctor --target"):
            print_board_check(address)
        return 0
    profile = load_profile(args.env)
    table = Table(title="What this machine can enforce")
    for column in ("check", "status", "detail"):
        table.add_column(column)
    for what, ok, detail in checks(profile.image):
        table.add_row(what, "[green]ok[/]" if ok else "[yellow]no[/]", detail)
    out_console.print(table)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("doctor", help=COMMANDS["doctor"], description=__doc__)
    parser.add_argument("--env", default=os.environ.get("HARNESS_ENV_FILE") or None, help="device profile env file")
    parser.add_argument("--target", metavar="ssh://USER@HOST[:PORT]",
                        help="check a board instead of this machine (as `harness target check`)")
    parser.set_defaults(func=run)
