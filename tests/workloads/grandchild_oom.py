"""A launcher whose worker process allocates N MiB; when the worker dies, the launcher exits with status 1.

Usage: grandchild_oom.py MODEL N_MIB. Under a smaller memory limit the OOM killer takes the worker (a grandchild of
the runner) and the script itself ends with an error of its own."""

import subprocess
import sys
from pathlib import Path

worker = subprocess.run([sys.executable, str(Path(__file__).with_name("alloc.py")), sys.argv[1], sys.argv[2]])
print(f"worker ended with {worker.returncode}", file=sys.stderr)
sys.exit(0 if worker.returncode == 0 else 1)
