"""Report the cgroup v2 limit files of the cgroup this script runs in, then keep one core busy for S seconds.
Usage: cgroup_limits.py MODEL S. Reported keys: cgroup (its path) and each file name with '.' as '_'."""

import sys
import time
from pathlib import Path

from harness.metrics import report

path = Path("/proc/self/cgroup").read_text().split("::", 1)[1].strip()  # v2 has one line: 0::/path
directory = Path("/sys/fs/cgroup") / path.lstrip("/")
files = ("memory.max", "memory.swap.max", "cpu.max", "cpuset.cpus")
report(cgroup=path, **{name.replace(".", "_"): (directory / name).read_text().strip() for name in files})
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    pass
