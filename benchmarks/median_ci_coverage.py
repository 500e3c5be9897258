"""Coverage of the summary's 95% CI of the median: how often it holds the true median, against the level it claims.

    .venv/bin/python benchmarks/median_ci_coverage.py [--draws 20000]

For n = 3 to 10 repeats, DRAWS simulated sessions from run-time-like distributions with a known median:
the share whose harness.analysis.stats.median_ci interval holds it (and how often there is no interval), beside the
level it reports. For contrast, the percentile bootstrap of the median (2000 resamples; what the summary
used before) over the same sessions: it claims 95% at every n.
"""

from __future__ import annotations

import argparse

import numpy as np
from _common import Goal, print_table, write_report

from harness.analysis.stats import CONFIDENCE, median_ci

BOOTSTRAP_RESAMPLES = 2000
# name -> (sampler of a (draws, n) array, true median)
DISTRIBUTIONS = {
    "lognormal sigma 0.6": (lambda rng, shape: rng.lognormal(0.0, 0.6, shape), 1.0),
    "exponential + 1": (lambda rng, shape: 1.0 + rng.exponential(1.0, shape), 1.0 + np.log(2.0)),
    "normal": (lambda rng, shape: rng.normal(10.0, 1.0, shape), 10.0),
}


def bootstrap_coverage(samples: np.ndarray, truth: float, rng: np.random.Generator) -> float:
    """Share of sessions whose 95% percentile-bootstrap interval of the median holds `truth`."""
    draws, n = samples.shape
    covered = 0
    for start in range(0, draws, 500):
        block = samples[start:start + 500]
        picks = rng.integers(0, n, (block.shape[0], BOOTSTRAP_RESAMPLES, n))
        medians = np.median(np.take_along_axis(block[:, None, :], picks, axis=2), axis=2)
        low, high = np.percentile(medians, [2.5, 97.5], axis=1)
        covered += int(np.sum((low <= truth) & (truth <= high)))
    return covered / draws


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--draws", type=int, default=20_000)
    parser.add_argument("--bootstrap-draws", type=int, default=1_000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    for name, (sample, truth) in DISTRIBUTIONS.items():
        for n in range(3, 11):
            samples = sample(rng, (args.draws, n))
            interval = median_ci(np.arange(n))  # which order statistics it takes depends on n alone
            if interval is None:
                coverage, level = None, None
            else:
                ordered = np.sort(samples, axis=1)
                low, high, level = int(interval[0]), int(interval[1]), interval[2]
                coverage = float(np.mean((ordered[:, low] <= truth) & (truth <= ordered[:, high])))
            rows.append({"distribution": name, "n": n, "claimed_level": "none" if level is None else level,
                         "coverage": "no interval" if coverage is None else coverage,
                         "bootstrap_claims": CONFIDENCE,
                         "bootstrap_coverage": bootstrap_coverage(samples[:args.bootstrap_draws], truth, rng)})
    print_table(f"95% CI of the median: coverage over {args.draws} simulated sessions per n", rows)
    given = [row for row in rows if row["claimed_level"] != "none"]
    tolerance = 4 * np.sqrt(CONFIDENCE * (1 - CONFIDENCE) / args.draws)
    worst = min(given, key=lambda row: row["coverage"] - row["claimed_level"])
    short = min(rows, key=lambda row: row["bootstrap_coverage"])
    goals = [
        Goal("order-statistic CI: coverage against the level it reports (worst n)", f"within ±{tolerance:.3f}",
             f"{worst['coverage']:.4f} vs {worst['claimed_level']:.4f} (n={worst['n']}, {worst['distribution']})",
             bool(abs(worst["coverage"] - worst["claimed_level"]) <= tolerance)),
        Goal("no interval where even [min, max] covers less than 95%", "exactly n < 6",
             "none at n = " + ", ".join(sorted({str(row["n"]) for row in rows if row["claimed_level"] == "none"})),
             all((row["n"] < 6) == (row["claimed_level"] == "none") for row in rows)),
        Goal("percentile bootstrap (before): worst coverage of its claimed 95%", "information",
             f"{short['bootstrap_coverage']:.3f} at n={short['n']} ({short['distribution']})", None),
    ]
    write_report("median_ci_coverage", rows, goals)


if __name__ == "__main__":
    main()
