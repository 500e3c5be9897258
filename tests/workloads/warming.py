"""A call that warms up slowly, through the bench loop: call k sleeps 1 ms x (1 + 4 x 0.85^k), so two windows of
calls agree within 2% only after about 30 calls.

Usage: warming.py MODEL WARMUP"""

import sys
import time

from harness import timed_loop

calls = [0]


def infer() -> None:
    time.sleep(0.001 * (1 + 4 * 0.85 ** calls[0]))
    calls[0] += 1


timed_loop(infer, int(sys.argv[2]), 20)
