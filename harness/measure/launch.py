"""How the local backend starts a runner inside its run's cgroups, so that the run is charged from its first page.

A /bin/sh writes its own pid into each cgroup.procs file, then execs the runner's interpreter in its place: every
page that interpreter touches is the run's, as in a container, whose runner starts inside the container's cgroup.
The shell is the one process between the harness and the runner (a few kilobytes, one exec), and nothing runs
between fork and exec in the harness itself, where a preexec hook would be unsafe beside other threads (--parallel
slots, a cluster worker). It replaces a runner that joined the cgroup and then re-executed itself: one interpreter
start per run instead of two.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

RUNNER_MODULE = "harness.measure.runner"
PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the directory that holds this harness package
# "$@" is: the cgroup.procs files, "--", the command. A write that fails (permissions, a removed cgroup) ends the
# shell with 125 and the shell's one-line message on stderr, which the run's error then carries.
JOIN_THEN_EXEC = 'while [ "$1" != -- ]; do echo $$ >"$1" || exit 125; shift; done; shift; exec "$@"'


def runner_command(spec: Path, out: Path | None = None) -> list[str]:
    """This interpreter running the runner on a spec file, writing its RunResult to `out` (else to stdout).

    Isolated and without site (-I -S): the runner needs the standard library and this package alone, whose directory
    it is given. site-packages' .pth files (an editable install's import hook among them) would double the
    interpreter's start, and neither the working directory nor PYTHON* variables can put another module in its way.
    The script it runs starts as any program does, with the environment the harness was given."""
    boot = f"import sys; sys.path.append({str(PACKAGE_ROOT)!r}); from {RUNNER_MODULE} import entry; entry()"
    return [sys.executable, "-I", "-S", "-c", boot, "--spec", str(spec), *(["--out", str(out)] if out else [])]


def inside(procs_files: Sequence[Path | str], command: Sequence[str]) -> list[str]:
    """`command`, started as a member of every cgroup whose cgroup.procs file is given (none: as it is)."""
    if not procs_files:
        return list(command)
    return ["/bin/sh", "-c", JOIN_THEN_EXEC, "harness-join", *map(str, procs_files), "--", *command]
