"""The cgroup writers take a run's limits record and the kernel holds what it says, read back from a real cgroup."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace

import pytest

from harness.core.records import Limits
from harness.measure import cgroups

pytestmark = pytest.mark.skipif(cgroups.discover().version != 1, reason="needs a writable cgroup v1 hierarchy")
MIB = 1024**2
V1_UNLIMITED_MEMORY = 2**63 - 4096  # what memory.limit_in_bytes reads after -1 on a 4 KiB-page kernel
LIMITS = Limits(cpus=0.5, cpu_mode="quota", cpuset=str(max(os.sched_getaffinity(0))), cpu_quota_us=50_000,
                cpu_period_us=100_000, memory_bytes=96 * MIB, memory_swap_bytes=128 * MIB)


@pytest.fixture
def run_cgroup() -> Iterator[cgroups.RunCgroup]:
    made = cgroups.make_run_cgroup(cgroups.run_parent(cgroups.discover()), f"harness-test-writers-{os.getpid()}")
    yield made
    made.remove()


def read(run: cgroups.RunCgroup, controller: str, name: str) -> str:
    return (run.dirs[controller] / name).read_text().strip()


def test_every_limit_of_the_record_is_written(run_cgroup: cgroups.RunCgroup) -> None:
    cgroups.limit_run_cgroup(run_cgroup, LIMITS)
    assert read(run_cgroup, "memory", "memory.limit_in_bytes") == str(96 * MIB)
    if (run_cgroup.dirs["memory"] / "memory.memsw.limit_in_bytes").exists():
        assert read(run_cgroup, "memory", "memory.memsw.limit_in_bytes") == str(128 * MIB)
    assert read(run_cgroup, "cpu", "cpu.cfs_quota_us") == "50000"
    assert read(run_cgroup, "cpu", "cpu.cfs_period_us") == "100000"
    assert read(run_cgroup, "cpuset", "cpuset.cpus") == LIMITS.cpuset


def test_a_limit_the_record_leaves_out_is_no_limit(run_cgroup: cgroups.RunCgroup) -> None:
    cgroups.limit_run_cgroup(run_cgroup, replace(LIMITS, cpu_quota_us=None, cpu_period_us=None, memory_bytes=None,
                                                 memory_swap_bytes=None))
    assert read(run_cgroup, "cpu", "cpu.cfs_quota_us") == "-1"  # pinned: cores, and no quota
    assert read(run_cgroup, "cpu", "cpu.cfs_period_us") == "100000"
    assert int(read(run_cgroup, "memory", "memory.limit_in_bytes")) >= V1_UNLIMITED_MEMORY


def test_a_refused_limit_removes_the_cgroup_it_was_made_for() -> None:
    parent = cgroups.run_parent(cgroups.discover())
    name = f"harness-test-refused-{os.getpid()}"
    with pytest.raises(OSError):
        cgroups.create_run_cgroup(parent, name, replace(LIMITS, cpuset="4096"))
    assert not any((directory / name).exists() for directory in parent.dirs.values())


def test_the_kernels_out_of_memory_notice_is_heard(run_cgroup: cgroups.RunCgroup) -> None:
    """The notice a SIGKILL at the limit is read by when the oom_kill count misses it: none for a process that fits,
    one after a process asked for twice its 32 MiB limit and was killed."""
    cgroups.limit_run_cgroup(run_cgroup, replace(LIMITS, memory_bytes=32 * MIB, memory_swap_bytes=32 * MIB))
    procs = run_cgroup.dirs["memory"] / "cgroup.procs"
    watch = cgroups.OomWatch(run_cgroup)
    try:
        for size_mib, returncode, met in ((4, 0, False), (64, -signal.SIGKILL, True)):
            ran = subprocess.run([sys.executable, "-c", f"b = bytearray({size_mib} * 2**20)"], check=False,
                                 preexec_fn=lambda: procs.write_text(str(os.getpid())))
            assert (ran.returncode, watch.met()) == (returncode, met), size_mib
    finally:
        watch.close()
