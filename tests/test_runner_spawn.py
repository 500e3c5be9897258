"""The runner starts the script itself (fork and exec, no subprocess): the child is what Popen would have made, and
what stops it before its program runs is raised in the runner, as Popen raises it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from harness.measure.runner import parse_args, spawn

# A shell, not Python (which ignores SIGPIPE itself): its pid and session id, the signals it was started ignoring, its
# stdin, an environment variable, and a line on stdout that must go nowhere.
CHILD = ('set -- $(cat /proc/$$/stat); echo "$1 $6" >&2; grep SigIgn /proc/$$/status >&2; cat; echo "$PROBE" >&2; '
         "echo out")


def test_the_child_leads_its_session_with_default_signals_and_its_own_stderr(tmp_path: Path) -> None:
    stderr = tmp_path / "stderr.txt"
    marks = tmp_path / "prepared"
    pid = spawn(["/bin/sh", "-c", CHILD], {**os.environ, "PROBE": "env given"}, str(stderr),
                lambda: marks.write_text(str(os.getpid())))
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    ids, ignored, probe = stderr.read_text().splitlines()
    assert ids.split() == [str(pid), str(pid)]  # a session of its own
    assert not int(ignored.split()[1], 16) & (1 << (13 - 1))  # SIGPIPE not ignored, as the runner (Python) has it
    assert probe == "env given"
    assert marks.read_text() == str(pid)  # prepare ran in the child, before its program


def test_what_stops_the_child_before_its_program_is_raised_here(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no-such-program"):
        spawn([str(tmp_path / "no-such-program")], dict(os.environ), str(tmp_path / "err"), lambda: None)

    def refuse() -> None:
        raise PermissionError(13, "not allowed to join", "cgroup.procs")

    with pytest.raises(PermissionError, match="not allowed to join"):
        spawn([sys.executable, "-c", "pass"], dict(os.environ), str(tmp_path / "err"), refuse)


def test_the_runner_takes_its_two_options_and_refuses_anything_else() -> None:
    assert parse_args(["--spec", "s.json"]) == ("s.json", None)
    assert parse_args(["--out", "r.json", "--spec", "s.json"]) == ("s.json", "r.json")
    for argv in ([], ["--out", "r.json"], ["--spec"], ["--spec", "s.json", "--join-cgroup", "x"]):
        with pytest.raises(SystemExit, match="usage: python -m harness.measure.runner"):
            parse_args(argv)
