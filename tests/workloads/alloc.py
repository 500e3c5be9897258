"""Allocate and touch N MiB, hold it, exit. Usage: alloc.py MODEL N_MIB [HOLD_S]. Reports phases."""

import sys
import time

from harness import phase

n_mib = int(sys.argv[2])
hold_s = float(sys.argv[3]) if len(sys.argv) > 3 else 0.2
phase("steady")
block = bytearray(n_mib * 1024 * 1024)
for offset in range(0, len(block), 4096):  # touch every page so it is really resident
    block[offset] = 1
time.sleep(hold_s)
