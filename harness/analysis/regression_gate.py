"""The regression gate: is each model of a session slower, bigger or failing where the same model name in a
baseline session was not? The model's content may differ between the two: that is what the gate is for.

One check per model and CPUS value, each a verdict (pass, fail or skip) with a one-line reason:

- **slower** (the --metric, latency_ms by default): the ranking's unpaired test and minimum factor
  (harness.analysis.pair_tests, harness.analysis.ranking), asked one-sided, since two sessions share no rounds.
  Mann–Whitney U on the per-run values, alternative `greater` (the session's runs tend to be the slower),
  Holm-corrected over the models whose repeat counts can reach ALPHA.
  It fails when the adjusted p reaches ALPHA (p <= ALPHA), the medians are MIN_RELATIVE_GAP apart or more (the
  noise between identical models stays under it) and the median grew by more than max_slowdown.
  One-sided, because the gate asks one question fixed before the data, "slower?", and a speed-up never fails it:
  the test spends all of ALPHA on that side. So 3 + 3 repeats can fail it (fully separated, p = 1/20 = ALPHA;
  a two-sided test's smallest p there is 1/10), and nothing else at 3 + 3 can: a model that the test cannot
  call slower passes, with the reason and the repeats per model that would let the test reach ALPHA.
  Holm over the models keeps the chance that a gate of unchanged models fails at ALPHA or less, however many it
  checks; the price is repeats: with m models the first step needs p <= ALPHA/m (4 repeats each for 3 models).
- **peak memory** (peak_memory_mib): fails when the median grew by more than max_memory_growth. No test: the
  kernel's high-water mark moves by about 1.5% between identical models (benchmarks/noise_floor.py), so a
  growth past a threshold of a few percent is the model's, and at 3 repeats no test could say more.
- **runs**: fails when a run of the model failed (oom, timeout, error) in the session: the model does not run
  under the profile's limits, and its ok runs, its lightest, would flatter the other checks (which are skipped).

A model only the session has is skipped (nothing to compare); one only the baseline has is listed as missing.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.analysis.pair_tests import (
    GREATER,
    holm,
    mannwhitney_effect,
    mannwhitney_p,
    reaches,
    repeats_needed,
    repeats_to_reach,
    smallest_mannwhitney_p,
)
from harness.analysis.ranking import ALPHA, MIN_RELATIVE_GAP, material
from harness.analysis.stats import metric_value
from harness.core import conditions, metric_registry
from harness.core.errors import DataError
from harness.core.records import RunRecord

PASS, FAIL, SKIP = "pass", "fail", "skip"
MEMORY = metric_registry.PEAK_MEMORY
RUNS = "runs"
NO_BASELINE = "baseline"


@dataclass(frozen=True)
class Check:
    """One check of one model at one CPUS value: the medians it compared, the test's p-values, the verdict."""

    model: str
    cpus: float
    check: str  # the metric compared, `runs`, or `baseline` for a model the baseline lacks
    verdict: str
    message: str
    baseline: float | None = None  # the baseline's median
    value: float | None = None  # the session's median
    change: float | None = None  # value / baseline - 1
    threshold: float | None = None
    p_value: float | None = None
    p_adjusted: float | None = None
    repeats: tuple[int, int] | None = None  # session, baseline
    repeats_needed: int | None = None


@dataclass
class GateResult:
    baseline: str
    session: str
    metric: str
    max_slowdown: float
    max_memory_growth: float
    alpha: float
    checks: list[Check]
    missing: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def failed(self) -> list[Check]:
        return [check for check in self.checks if check.verdict == FAIL]

    def to_json(self) -> dict[str, Any]:
        return {"baseline": self.baseline, "session": self.session, "passed": not self.failed, "metric": self.metric,
                "alpha": self.alpha, "min_factor": MIN_RELATIVE_GAP, "max_slowdown": self.max_slowdown,
                "max_memory_growth": self.max_memory_growth, "checks": [asdict(c) for c in self.checks],
                "missing": self.missing, "notes": self.notes}


Key = tuple[str, float]


def _by_model(runs: list[RunRecord]) -> dict[Key, list[RunRecord]]:
    groups: dict[Key, list[RunRecord]] = {}
    for run in runs:
        groups.setdefault((run.model_name, float(run.cpus)), []).append(run)
    return groups


def _values(runs: list[RunRecord], metric: str) -> list[float]:
    return [v for run in runs if run.ok and (v := metric_value(run, metric)) is not None]


def _check_conditions(key: Key, baseline: list[RunRecord], session: list[RunRecord]) -> None:
    """The two sides must differ in nothing but the model's content: another MEMORY or host is another question."""
    differing = [k for k in conditions.differing_keys(run.line for run in baseline + session) if k != "model_sha256"]
    if differing:
        sides = "; ".join(f"{name}: {conditions.describe(runs[-1].conditions, differing)}"
                          for name, runs in (("baseline", baseline), ("session", session)))
        raise DataError(f"model {key[0]} at cpus={key[1]:g} was measured under other conditions in the baseline "
                        f"({sides}); profile the baseline and the session under one profile on one host")


def _failures(runs: list[RunRecord]) -> Counter[str]:
    return Counter(run.result.status for run in runs if not run.ok)


def _statuses(counts: Counter[str]) -> str:
    return ", ".join(f"{status}={count}" for status, count in sorted(counts.items()))


def _runs_check(key: Key, baseline: list[RunRecord], session: list[RunRecord]) -> Check:
    failed, before = _failures(session), _failures(baseline)
    history = f" (the baseline: {_statuses(before)})" if before else " (none in the baseline)"
    if failed:
        return Check(*key, RUNS, FAIL, f"{sum(failed.values())} of {len(session)} runs failed ({_statuses(failed)})"
                     f"{history}: the model does not run under the profile's limits")
    return Check(*key, RUNS, PASS, f"all {len(session)} runs ok" + (f"; the baseline had {_statuses(before)}"
                                                                     if before else ""))


def _medians(new: list[float], old: list[float]) -> tuple[float, float, float | None]:
    base, value = statistics.median(old), statistics.median(new)
    return base, value, (value / base - 1) if base > 0 else None


def _memory_check(key: Key, new: list[float], old: list[float], limit: float) -> Check:
    base, value, change = _medians(new, old)
    if change is None:
        return Check(*key, MEMORY, SKIP, "the baseline's peak memory is 0: no growth to measure")
    over = change > limit
    message = (f"peak memory median {base:.1f} → {value:.1f} MiB ({change:+.1%}), "
               f"{'over' if over else 'within'} --max-memory-growth {limit:.0%}")
    return Check(*key, MEMORY, FAIL if over else PASS, message, base, value, change, limit,
                 repeats=(len(new), len(old)))


@dataclass
class _Slowdown:
    """A slowdown comparison before Holm: what each model's test gave."""

    key: Key
    new: list[float]
    old: list[float]
    p_value: float | None  # None where these repeat counts cannot reach alpha

    @property
    def effect(self) -> float:
        """The share of run pairs in which the session's run is the slower one (the AUC)."""
        return mannwhitney_effect(self.old, self.new)


def _slowdown_check(item: _Slowdown, p_adjusted: float | None, tested: int, compared: int, metric: str,
                    limit: float, alpha: float) -> Check:
    base, value, change = _medians(item.new, item.old)
    unit = metric_registry.get(metric).unit
    n_new, n_old = len(item.new), len(item.old)
    if change is None:
        return Check(*item.key, metric, SKIP, f"the baseline's {metric} is 0: no change to measure")
    moved = f"median {base:.4g} → {value:.4g} {unit} ({change:+.1%})"

    def check(verdict: str, message: str, repeats_needed: int | None = None) -> Check:
        return Check(*item.key, metric, verdict, message, baseline=base, value=value, change=change, threshold=limit,
                     p_value=item.p_value, p_adjusted=p_adjusted, repeats=(n_new, n_old), repeats_needed=repeats_needed)

    strictest = alpha / max(compared, 1)  # Holm's first step, once every model's repeats can reach alpha
    if item.p_value is None:
        reach = repeats_to_reach(strictest, alternative=GREATER)
        reason = (f"with {n_new} + {n_old} repeats the one-sided test cannot reach p ≤ {alpha:g} (its smallest p is "
                  f"{smallest_mannwhitney_p(n_new, n_old, GREATER):.2g}), so no slowdown can fail this check; "
                  f"{reach} repeats per model can")
        return check(PASS, f"{moved}; {reason}", reach)
    test = f"one-sided Mann–Whitney p = {item.p_value:.2g}"
    test += f", Holm-adjusted over {tested} models {p_adjusted:.2g}" if tested > 1 else ""
    if not (material(base, value) and change > limit):
        why = (f"within --max-slowdown {limit:.0%}" if change <= limit else
               f"over --max-slowdown {limit:.0%} but under the {MIN_RELATIVE_GAP:.0%} minimum factor, the noise "
               "between identical models")
        return check(PASS, f"{moved}, {why}")
    if reaches(p_adjusted, alpha):
        return check(FAIL, f"{value / base:.2f}× slower: {moved}, {test} ≤ {alpha:g}")
    needed = repeats_needed(item.effect, strictest, alternative=GREATER)
    tell = f"; about {needed} repeats per model would tell" if needed else "; the runs overlap too much to tell"
    return check(PASS, f"{moved}, but not shown slower: {test} > {alpha:g}{tell}", needed)


def _slowdown_checks(pairs: list[tuple[Key, list[float], list[float]]], metric: str, limit: float,
                     alpha: float) -> list[Check]:
    """The slowdown check of every compared model, Holm-corrected over those whose repeats can reach alpha."""
    items = [_Slowdown(key, new, old, mannwhitney_p(new, old, GREATER)
                       if reaches(smallest_mannwhitney_p(len(new), len(old), GREATER), alpha) else None)
             for key, new, old in pairs]
    tested = [(item.key, item.p_value) for item in items if item.p_value is not None]
    adjusted = dict(zip((key for key, _ in tested), holm([p for _, p in tested]), strict=True))
    return [_slowdown_check(item, float(adjusted[item.key]) if item.key in adjusted else None, len(tested),
                            len(items), metric, limit, alpha) for item in items]


def reach_note(checks: list[Check], alpha: float) -> str | None:
    """When Holm's first step is out of every model's reach, no slowdown can fail the gate: say so, and how many
    repeats per model would change that."""
    tested = [c for c in checks if c.p_value is not None]
    compared = [c for c in checks if c.repeats is not None and c.check not in (MEMORY, RUNS)]
    if not compared:
        return None
    best = min((smallest_mannwhitney_p(c.repeats[0], c.repeats[1], GREATER) for c in tested if c.repeats),
               default=math.inf)
    if reaches(best * max(len(tested), 1), alpha):
        return None
    reach = repeats_to_reach(alpha / len(compared), alternative=GREATER)
    return (f"with these repeats no slowdown of the {len(compared)} models compared can fail the gate (Holm's first "
            f"step needs p ≤ {alpha:g}/{len(compared)}); profile {reach} repeats per model (REPEATS={reach})")


def check_sessions(baseline_runs: list[RunRecord], session_runs: list[RunRecord], *, baseline: str,
                   session: str, metric: str, max_slowdown: float, max_memory_growth: float,
                   alpha: float = ALPHA) -> GateResult:
    """Every model of the session against the same model name in the baseline (see the module docstring)."""
    old_groups, new_groups = _by_model(baseline_runs), _by_model(session_runs)
    checks: list[Check] = []
    slowdowns: list[tuple[Key, list[float], list[float]]] = []
    for key, new_runs in sorted(new_groups.items()):
        old_runs = old_groups.get(key)
        if old_runs is None:
            checks.append(Check(*key, NO_BASELINE, SKIP, f"not in the baseline {baseline} at cpus={key[1]:g}: "
                                                          "nothing to compare"))
            continue
        _check_conditions(key, old_runs, new_runs)
        runs = _runs_check(key, old_runs, new_runs)
        checks.append(runs)
        for name in (metric, MEMORY):
            new, old = _values(new_runs, name), _values(old_runs, name)
            if runs.verdict == FAIL:
                checks.append(Check(*key, name, SKIP, "not compared: failed runs (see `runs`)"))
            elif not new or not old:
                side, side_runs = ("the session", new_runs) if not new else ("the baseline", old_runs)
                why = metric_registry.get(name).absent_reason(side_runs)
                checks.append(Check(*key, name, SKIP, f"no ok run of {side} reported {name}{why}"))
            elif name == MEMORY:
                checks.append(_memory_check(key, new, old, max_memory_growth))
            else:
                slowdowns.append((key, new, old))
    slowdown_checks = iter(_slowdown_checks(slowdowns, metric, max_slowdown, alpha))
    by_key = {key: next(slowdown_checks) for key, _, _ in slowdowns}
    ordered = []
    for check in checks:
        ordered.append(check)
        if check.check == RUNS and (check.model, check.cpus) in by_key:
            ordered.append(by_key[check.model, check.cpus])
    notes = [note] if (note := reach_note(list(by_key.values()), alpha)) else []
    if max_slowdown < MIN_RELATIVE_GAP:
        notes.append(f"--max-slowdown {max_slowdown:.0%} is under the {MIN_RELATIVE_GAP:.0%} minimum factor: a "
                     f"slowdown fails the gate only from {MIN_RELATIVE_GAP:.0%}, the noise between identical models "
                     "stays under it")
    missing = sorted({f"{model} (cpus={cpus:g})" for model, cpus in old_groups if (model, cpus) not in new_groups})
    return GateResult(baseline, session, metric, max_slowdown, max_memory_growth, alpha, ordered, missing, notes)
