"""A parallel CPU-bound workload: P processes each doing a fixed amount of work. Usage: cpu_burn.py MODEL P N."""

import multiprocessing
import sys


def burn(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


if __name__ == "__main__":
    processes, work = int(sys.argv[2]), int(sys.argv[3])
    with multiprocessing.Pool(processes) as pool:
        pool.map(burn, [work] * processes)
