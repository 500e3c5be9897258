"""Report where and when it ran (its CPU affinity, wall-clock start and end), sleeping S seconds between.
Usage: placement.py MODEL S."""

import json
import os
import sys
import time

started = time.time()
time.sleep(float(sys.argv[2]))
with open(os.environ["HARNESS_METRICS"], "a") as out:
    out.write(json.dumps({"cores": ",".join(map(str, sorted(os.sched_getaffinity(0)))), "t_start": started,
                          "t_end": time.time()}) + "\n")
