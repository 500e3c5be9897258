"""Idle, then a short spike of M MiB for SPIKE_MS, then idle again. Usage: spike.py MODEL M_MIB SPIKE_MS."""

import sys
import time

m_mib, spike_ms = int(sys.argv[2]), float(sys.argv[3])
time.sleep(0.15)
block = bytearray(m_mib * 1024 * 1024)
for offset in range(0, len(block), 4096):
    block[offset] = 1
time.sleep(spike_ms / 1000)
del block
time.sleep(0.15)
