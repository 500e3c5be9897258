"""Timed "inferences" of about 1 ms of pure CPU each, through the bench loop. Usage: short_inference.py MODEL N."""

import sys
import time

from harness import timed_loop


def busy_1ms() -> None:
    end = time.thread_time() + 0.001
    while time.thread_time() < end:
        pass


timed_loop(busy_1ms, 20, int(sys.argv[2]))
