"""A job with no model, as a user's training or preprocessing script: job.py N allocates N x 16 MiB, works a
little, and reports how many chunks it made through the protocol."""

import sys
import time

from harness import phase, report_metrics

chunks = int(sys.argv[1])
phase("steady")
blocks = [bytearray(16 * 1024 * 1024) for _ in range(chunks)]
for block in blocks:
    for offset in range(0, len(block), 4096):  # touch every page so it is really resident
        block[offset] = 1
time.sleep(0.3)
report_metrics(chunks=len(blocks), args=" | ".join(sys.argv[1:]))
