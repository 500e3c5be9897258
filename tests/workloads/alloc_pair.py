"""Two processes each allocate and touch N MiB at once and hold it. Usage: alloc_pair.py MODEL N_MIB HOLD_S."""

import subprocess
import sys
from pathlib import Path

n_mib, hold_s = sys.argv[2], sys.argv[3]
alloc = str(Path(__file__).with_name("alloc.py"))
child = subprocess.Popen([sys.executable, alloc, sys.argv[1], n_mib, hold_s])
subprocess.run([sys.executable, alloc, sys.argv[1], n_mib, hold_s], check=True)
child.wait()
