"""cgroup v2 for real, inside the test VM (tests/vm/run): the local backend as root and as a non-root user
with a delegated subtree, the runner inside a cgroup namespace, and `harness doctor`'s verdicts.

The harness runs as its own process (tests/vm/scenarios.py), placed in a scope of its own the way systemd
places a login shell: a cgroup that holds processes, so the "no internal processes" rule applies. For the
delegated user the scope is chown'd as systemd does for Delegate=yes. These tests change the VM's cgroup
tree: they are collected only inside the VM (HARNESS_IN_VM=1, set by tests/vm/guest.sh).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness.core.records import RunnerInput
from harness.measure.cgroups import SUPERVISOR_LEAF, discover
from tests.vm.scenarios import SPIKE_MIB, SPIKE_MS, WORKLOADS

pytestmark = pytest.mark.skipif(discover().version != 2, reason="the VM did not mount cgroup v2")

CGROUP_ROOT = Path("/sys/fs/cgroup")
SCENARIOS = Path(__file__).with_name("scenarios.py")
DELEGATE_UID = 1000  # the user tests/vm/guest.Dockerfile creates
DELEGATED_FILES = ("cgroup.procs", "cgroup.subtree_control", "cgroup.threads")  # what systemd chowns
ENABLE = "+memory +cpu +cpuset"
MIB = 1024 * 1024


@dataclass
class Scope:
    """A cgroup holding a command's processes, like a systemd scope; `uid` runs the command."""

    path: Path
    uid: int

    def run(self, *argv: str, cwd: Path) -> None:
        """Run `argv` in `cwd` (not the checkout, whose env.template would become the profile)."""
        procs = self.path / "cgroup.procs"

        def enter() -> None:  # as systemd-run does: join the scope first, then drop to the user
            procs.write_text(str(os.getpid()))
            if self.uid:
                os.setgroups([])
                os.setgid(self.uid)
                os.setuid(self.uid)

        done = subprocess.run(list(argv), preexec_fn=enter, env={**os.environ, "HOME": "/tmp"},  # noqa: PLW1509
                              cwd=cwd, check=False, timeout=900)
        assert done.returncode == 0, f"{argv} exited with {done.returncode}; its stderr is above"

    def run_cgroups_left(self) -> list[str]:
        return sorted(p.name for p in self.path.iterdir() if p.is_dir() and p.name != SUPERVISOR_LEAF)


def make_scope(path: Path, uid: int) -> Scope:
    """Create `path` below cgroups that enable the controllers; chown it to `uid` as Delegate=yes does."""
    for parent in [p for p in reversed(path.parents) if CGROUP_ROOT in p.parents]:
        parent.mkdir(exist_ok=True)
        (parent / "cgroup.subtree_control").write_text(ENABLE)
    path.mkdir()
    if uid:
        for target in (path, *(path / name for name in DELEGATED_FILES)):
            os.chown(target, uid, uid)
    return Scope(path, uid)


def run_scenarios(scope: Scope, model: Path, *flags: str) -> dict[str, Any]:
    """tests/vm/scenarios.py as the scope's user, in a directory of that user's (pytest's are root's only)."""
    tmp = Path(tempfile.mkdtemp(prefix=f"harness-vm-{scope.path.name}-"))
    shutil.copy(model, tmp / model.name)
    for path in (tmp, tmp / model.name):
        os.chown(path, scope.uid, scope.uid)
    tmp.chmod(0o755)
    out = tmp / "scenarios.json"
    scope.run(sys.executable, str(SCENARIOS), str(tmp / model.name), str(out), *flags, cwd=tmp)
    return json.loads(out.read_text())


@dataclass
class Outcome:
    scope: Scope
    found: dict[str, Any]
    left: list[str]  # run cgroups still there after the harness ended

    def doctor(self, check: str) -> tuple[bool, str]:
        (row,) = [(ok, detail) for what, ok, detail in self.found["doctor"] if what == check]
        return row


@pytest.fixture(scope="module", params=["root", "delegated"])
def outcome(request: pytest.FixtureRequest, tiny_onnx: Path) -> Outcome:
    """Every scenario once per user: root in a scope of its own, and uid 1000 in a delegated scope."""
    uid = 0 if request.param == "root" else DELEGATE_UID
    slice_ = CGROUP_ROOT / ("system.slice" if uid == 0 else f"user.slice/user-{uid}.slice")
    scope = make_scope(slice_ / f"harness-{request.param}.scope", uid)
    found = run_scenarios(scope, tiny_onnx)
    return Outcome(scope, found, scope.run_cgroups_left())


def test_exact_peak_of_a_short_spike(outcome: Outcome) -> None:
    """A 30 ms spike of 300 MiB, sampled once a second: the kernel's memory.peak has it exactly. (Whether the
    sampler missed it depends on timing, which emulation distorts; test_local_limits checks that on v1.)"""
    (baseline,), (run,) = outcome.found["baseline"], outcome.found["spike"]
    assert run["status"] == "ok" and run["peak_source"] == "kernel" and run["cgroup_version"] == 2, run
    expected = baseline["peak_memory_mib"] + SPIKE_MIB
    assert abs(run["peak_memory_mib"] - expected) <= 0.03 * SPIKE_MIB, (baseline["peak_memory_mib"], run)


def started_ahead(runs: list[dict[str, Any]]) -> bool:
    """Whether the second run's runner was started before that run was asked of the backend, the first's not."""
    first, second = sorted(runs, key=lambda run: run["clock_s"]["backend_called"])
    return (first["clock_s"]["runner_spawned"] >= first["clock_s"]["backend_called"]
            and second["clock_s"]["runner_spawned"] < second["clock_s"]["backend_called"])


def test_oom_run_is_recorded_as_oom(outcome: Outcome) -> None:
    """Also when the run's runner was started ahead, before its memory limit was written."""
    runs = outcome.found["oom"]
    assert started_ahead(runs)
    for run in runs:
        assert run["status"] == "oom" and run["oom_kills"] >= 1, run
        assert run["peak_memory_mib"] <= 150.5


def test_limits_written_nested_and_cpu_throttled(outcome: Outcome) -> None:
    """Fractional CPUS becomes cpu.max (quota over period) and throttling is counted; memory.max and
    memory.swap.max hold MEMORY and SWAP=0; the run cgroup sits beside the leaf that holds the harness. The same for
    a run whose runner was started ahead, whose limits were written once it waited in that cgroup."""
    runs = outcome.found["limits"]
    assert started_ahead(runs)
    scope = "/" + str(outcome.scope.path.relative_to(CGROUP_ROOT))
    assert outcome.found["own_cgroup"] == f"{scope}/{SUPERVISOR_LEAF}"
    for run in runs:
        assert run["status"] == "ok", run
        seen = run["metrics"]
        assert Path(seen["cgroup"]).parent == Path(scope) and Path(seen["cgroup"]).name.startswith("harness-"), seen
        assert seen["cpu_max"] == "50000 100000" and run["limits_requested"]["cpu_mode"] == "quota", seen
        assert seen["memory_max"] == str(256 * MIB) and seen["memory_swap_max"] == "0", seen
        assert run["cpu_nr_throttled"] > 0 and run["cpu_throttled_s"] > 0, run


def test_no_run_cgroup_left_behind(outcome: Outcome) -> None:
    assert outcome.left == []
    assert (outcome.scope.path / "cgroup.procs").read_text() == ""  # every process went into the leaf


def test_doctor_tries_the_real_operation(outcome: Outcome) -> None:
    ok, detail = outcome.doctor("local backend isolation")
    assert ok and f"run cgroups created and limited under {outcome.scope.path}" in detail, detail
    assert outcome.doctor("kernel memory peak")[0] and outcome.doctor("swap capped")[0]


def test_doctor_advises_delegation_to_a_user_without_it(tiny_onnx: Path) -> None:
    """A user in a scope it does not own: no cgroup isolation, and the advice names the way to get it."""
    scope = make_scope(CGROUP_ROOT / "user.slice" / "undelegated.scope", 0)
    scope.uid = DELEGATE_UID
    found = run_scenarios(scope, tiny_onnx, "--doctor-only")
    (ok, detail), = [(ok, detail) for what, ok, detail in found["doctor"] if what == "local backend isolation"]
    assert not ok and "systemd-run --user --scope -p Delegate=yes" in detail, detail
    assert scope.run_cgroups_left() == []


# As Docker mounts cgroup2 in a container: a cgroup namespace rooted at the container's cgroup, and a fresh
# cgroup2 mount that shows that cgroup as /sys/fs/cgroup. With HIDE_PEAK=1 the mount is overlaid by a
# view of the same files without memory.peak, which is what a kernel before 5.19 shows.
IN_NAMESPACE = r"""
set -e
umount -l /sys/fs/cgroup  # the kernel refuses the same file system again on the root of its own mount
mount -t cgroup2 cgroup2 /sys/fs/cgroup
if [ "$HIDE_PEAK" = 1 ]; then
  mount -t tmpfs tmpfs /mnt
  for file in /sys/fs/cgroup/*; do
    name=${file##*/}
    if [ -f "$file" ] && [ "$name" != memory.peak ]; then touch "/mnt/$name"; mount --bind "$file" "/mnt/$name"; fi
  done
  mount --rbind /mnt /sys/fs/cgroup
fi
exec "$@"
"""


def run_in_cgroup_namespace(container: Scope, tmp: Path, model: Path, script: str, args: list[str],
                            hide_peak: bool = False) -> dict[str, Any]:
    """The runner alone (as the Docker backend starts it), in a namespace rooted at `container`."""
    spec = RunnerInput(model=str(model), script=str(WORKLOADS / script), script_args=tuple(args), threads=1,
                       cpus=1.0, iterations=1, warmup=0, batch_size=1, sample_interval_ms=1000.0, timeout_s=300.0)
    spec_path, out = tmp / "spec.json", tmp / "result.json"
    spec_path.write_text(json.dumps(spec.to_dict()))  # every key, as a backend writes it: the runner takes no defaults
    out.unlink(missing_ok=True)
    os.environ["HIDE_PEAK"] = "1" if hide_peak else "0"
    container.run("unshare", "--cgroup", "--mount", "sh", "-c", IN_NAMESPACE, "sh",
                  sys.executable, "-m", "harness.measure.runner", "--spec", str(spec_path), "--out", str(out), cwd=tmp)
    return json.loads(out.read_text())


def test_runner_in_a_cgroup_namespace_reads_the_kernel_peak(tmp_path: Path, tiny_onnx: Path) -> None:
    """memory.peak only grows, so the baseline runs first; the spike run's peak is baseline + spike."""
    container = make_scope(CGROUP_ROOT / "system.slice" / "container-peak.scope", 0)
    baseline = run_in_cgroup_namespace(container, tmp_path, tiny_onnx, "spike.py", ["0", str(SPIKE_MS)])
    run = run_in_cgroup_namespace(container, tmp_path, tiny_onnx, "spike.py", [str(SPIKE_MIB), str(SPIKE_MS)])
    for result in (baseline, run):
        assert result["status"] == "ok" and result["peak_source"] == "kernel", result
        assert result["cgroup_version"] == 2
    assert abs(run["peak_memory_mib"] - baseline["peak_memory_mib"] - SPIKE_MIB) <= 0.03 * SPIKE_MIB, (baseline, run)


def test_runner_without_memory_peak_says_sampled(tmp_path: Path, tiny_onnx: Path) -> None:
    container = make_scope(CGROUP_ROOT / "system.slice" / "container-sampled.scope", 0)
    run = run_in_cgroup_namespace(container, tmp_path, tiny_onnx, "alloc.py", ["100", "1.5"], hide_peak=True)
    assert run["status"] == "ok" and run["peak_source"] == "sampled", run
    assert run["peak_memory_mib"] == run["sampled_peak_mib"] >= 100, run
