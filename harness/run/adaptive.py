"""Adaptive repeats: after the planned REPEATS rounds, one more round at a time for the models whose median latency is
not yet known to PRECISION, until it is, or MAX_REPEATS rounds, or ADAPTIVE_BUDGET_S seconds of extra rounds.

The rule is criterion's and pyperf's idea (measure until the estimate is tight enough, within a time budget) on the
harness's own statistic: the distribution-free 95% CI of the median over fresh processes (harness.analysis.stats).
Only models still too wide run again, so a session costs what its noisiest models need; their extra rounds are
shuffled like the planned ones. Everything it decides is derived from the stored runs, so a resumed session
continues where the last stopped.
"""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass, replace

from harness.analysis.stats import median_ci, metric_value
from harness.core import metric_registry
from harness.core.config import DeviceProfile
from harness.core.records import RunRecord
from harness.measure.spec import RunSpec

MIN_RUNS_FOR_CI = 6
"""The fewest runs with a distribution-free 95% CI of the median (harness.analysis.stats.median_ci)."""
Group = tuple[str, float]
"""(model name, CPUS): the unit a round runs once."""


@dataclass(frozen=True)
class Width:
    """A group's 95% CI of the median latency, as a half-width relative to the median, over `runs` ok runs; None
    below 6 runs, where no such CI exists: REPEATS below 6 asks for a quick look, and gets exactly REPEATS rounds.
    `runtime_s`: its runs' mean runtime, what one more round of it is expected to take."""

    group: Group
    runs: int
    half_width: float | None
    runtime_s: float

    def too_wide(self, precision: float) -> bool:
        return self.half_width is not None and self.half_width > precision


def adapts(profile: DeviceProfile) -> bool:
    """Whether a session of this profile may run extra rounds: PRECISION on, room above REPEATS, and REPEATS of 6 or
    more (below, no 95% CI of the median exists to narrow)."""
    return profile.precision_pct > 0 and profile.max_repeats > profile.repeats >= MIN_RUNS_FOR_CI


def widths(runs: list[RunRecord], groups: list[Group]) -> list[Width]:
    """Each group's current width; a group with a failed run (oom, timeout, error) is left out: more rounds would
    fail again."""
    by_group: dict[Group, list[RunRecord]] = {group: [] for group in groups}
    for run in runs:
        by_group.setdefault((run.model_name, float(run.cpus)), []).append(run)
    out = []
    for group in groups:
        members = by_group[group]
        values = [v for run in members if run.ok and (v := metric_value(run, metric_registry.LATENCY)) is not None]
        if not values or len(values) < len(members):
            continue
        ci, middle = median_ci(values), statistics.median(values)
        out.append(Width(group, len(values), None if ci is None or middle <= 0 else (ci[1] - ci[0]) / 2 / middle,
                         statistics.fmean(run.result.runtime_s or 0.0 for run in members)))
    return out


def extra_seconds(runs: list[RunRecord], planned_rounds: int) -> float:
    """What the extra rounds have taken so far: the runtimes of the runs beyond the planned rounds."""
    return sum(run.result.runtime_s or 0.0 for run in runs if run.round >= planned_rounds)


def next_round(profile: DeviceProfile, specs: list[RunSpec], runs: list[RunRecord], seed: int) -> list[RunSpec]:
    """The next extra round's runs (empty when none is due): one per group still too wide, with fewer than
    MAX_REPEATS runs, whose expected time (its mean runtime so far) still fits the budget, in a shuffled order."""
    if not adapts(profile) or not specs:
        return []
    precision = profile.precision_pct / 100
    last: dict[Group, RunSpec] = {}
    for spec in specs:
        last[(spec.model_name, spec.cpu.cpus)] = spec
    left = profile.adaptive_budget_s - extra_seconds(runs, profile.repeats)
    chosen = []
    for width in widths(runs, list(last)):
        if width.too_wide(precision) and width.runs < profile.max_repeats and width.runtime_s <= left:
            chosen.append(last[width.group])
            left -= width.runtime_s
    round_index = max(spec.round for spec in specs) + 1
    random.Random(seed + round_index).shuffle(chosen)
    session_id = specs[0].session_id
    return [replace(spec, run_id=f"{session_id}-r{round_index:03d}-{len(specs) + i:04d}", round=round_index,
                    repeat=round_index) for i, spec in enumerate(chosen)]


def unmet_notes(profile: DeviceProfile, runs: list[RunRecord], groups: list[Group]) -> list[str]:
    """One line per group whose median is still wider than PRECISION after the session's rounds."""
    if not adapts(profile):
        return []
    return [f"precision: {name} cpus={cpus:g}: the 95% CI of its median latency is "
            f"±{w.half_width or 0:.1%} after {w.runs} runs, wider than "
            f"PRECISION={profile.precision_pct:g}% (MAX_REPEATS={profile.max_repeats}, "
            f"ADAPTIVE_BUDGET_S={profile.adaptive_budget_s:g}); a noisy machine or a model whose runs vary: quiet the "
            "machine, or raise MAX_REPEATS or ITERATIONS"
            for w in widths(runs, groups) if w.too_wide(profile.precision_pct / 100) for name, cpus in [w.group]]
