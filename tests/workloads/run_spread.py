"""Report latencies that differ between runs by a set spread, through the bench loop's report: a model file whose
name starts with `steady` reports 2.0 ms in every run, any other 2.0 ms times a factor drawn per run from
[1, 1 + SPREAD] (seeded by the process id, so every run differs).

Usage: run_spread.py MODEL SPREAD"""

import os
import random
import sys
from array import array

from harness import report_latencies

factor = 1.0 if os.path.basename(sys.argv[1]).startswith("steady") else 1 + float(sys.argv[2]) * random.Random(
    os.getpid()).random()
report_latencies(array("d", [2.0 * factor] * 20))
