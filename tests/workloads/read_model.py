"""Read the model file once, 1 MiB at a time (page cache, almost no anonymous memory). Usage: read_model.py MODEL."""

import sys

buffer = bytearray(1024 * 1024)
with open(sys.argv[1], "rb", buffering=0) as handle:
    while handle.readinto(buffer):
        pass
