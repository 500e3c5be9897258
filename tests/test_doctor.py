"""`harness doctor` reports what this machine can really enforce."""

from __future__ import annotations

from pathlib import Path

from harness.cli import main
from harness.measure.cgroups import discover


def test_doctor_names_cgroup_version_and_local_isolation(capsys, in_tmp_cwd: Path) -> None:
    capsys.readouterr()
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    own = discover()
    assert f"v{own.version}" in out if own.version else "no memory controller" in out
    assert "local backend isolation" in out and "docker backend" in out
