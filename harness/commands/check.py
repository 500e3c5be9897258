"""`harness check --baseline SESSION`: the regression gate. Each model of the session (default: the newest) against
the same model name in the baseline session; exit 1 when a model is significantly slower by more than
--max-slowdown, its peak memory grew by more than --max-memory-growth, or its runs failed; 0 otherwise; 2 on bad
input. The rules are harness.analysis.regression_gate's (one-sided Mann–Whitney, Holm over the models, the
ranking's 10% minimum factor); a table, --json, and JUnit XML for CI (--junit FILE).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from rich.table import Table

from harness.analysis.ranking import ALPHA
from harness.analysis.regression_gate import FAIL, PASS, GateResult, check_sessions
from harness.analysis.run_values import ALL_SESSIONS, check_metric, select_runs
from harness.commands import COMMANDS
from harness.commands.shared import env_default, fmt, print_json, warn
from harness.core import conditions, metric_registry
from harness.core.config import resolve_results_dir
from harness.core.errors import ConfigError, DataError
from harness.core.records import RunRecord
from harness.report.console import out_console
from harness.store.results import (
    SESSION_FILE,
    atomic_write_text,
    ensure_writable_dir,
    list_sessions,
    load_runs,
    resolve_session,
)

GATED_UNITS = ("ms", "s", "mJ")
"""What the gate measures a slowdown in: a time, or the energy per inference (its growth, as a time's)."""
VERDICT_STYLE = {PASS: "green", FAIL: "bold red"}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "check", help=COMMANDS["check"],
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--baseline", required=True, metavar="SESSION",
                        help="the baseline: a session id or path, or a results directory (its newest session)")
    parser.add_argument("--session", default=env_default("HARNESS_SESSION"),
                        help="the session to check: id or path (default: the newest under --results-dir)")
    time_metrics = ", ".join(metric_registry.names(_is_time))
    parser.add_argument("--metric", default=env_default("HARNESS_METRIC") or metric_registry.LATENCY,
                        help=f"the time (or energy) a slowdown is measured in (default: latency_ms; one of: "
                             f"{time_metrics})")
    parser.add_argument("--max-slowdown", default="10%", metavar="PCT",
                        help="a slowdown of the median above this fails (5%%, or 0.05); default 10%%, the minimum "
                             "factor below which identical models differ")
    parser.add_argument("--max-memory-growth", default="5%", metavar="PCT",
                        help="a peak memory median grown by more than this fails (default 5%%)")
    parser.add_argument("--junit", type=Path, metavar="FILE", help="also write the verdicts as JUnit XML to FILE")
    parser.add_argument("--results-dir", help="results directory (default: RESULTS_DIR of the profile)")
    parser.add_argument("--json", action="store_true", help="print JSON only, on stdout")
    parser.set_defaults(func=run)


def _is_time(metric: metric_registry.Metric) -> bool:
    return metric.lower_is_better and metric.unit in GATED_UNITS


def threshold(flag: str, text: str) -> float:
    """`5%` or `0.05` as 0.05. A bare number from 1 up is refused: `5` may mean 5% or 500%."""
    value_text = text.strip()
    percent = value_text.endswith("%")
    try:
        value = float(value_text.removesuffix("%")) / (100 if percent else 1)
    except ValueError:
        raise ConfigError(f"{flag} {text}: not a percentage or a fraction; write e.g. {flag} 5% or {flag} 0.05"
                          ) from None
    if not math.isfinite(value) or value < 0:
        raise ConfigError(f"{flag} {text}: give a growth of 0 or more, e.g. {flag} 5%")
    if not percent and value >= 1:
        raise ConfigError(f"{flag} {text}: a bare number from 1 up is ambiguous; write {flag} {value_text}% "
                          f"(or {flag} {value / 100:g} as a fraction)")
    return value


def resolve_baseline(results_dir: Path, baseline: str) -> Path:
    """A session by id or path, else a results directory's newest session; one line naming both when neither."""
    path = Path(baseline)
    if (path / SESSION_FILE).exists() or (Path(results_dir) / baseline / SESSION_FILE).exists():
        return resolve_session(results_dir, baseline)
    sessions = list_sessions(path) if path.is_dir() else []
    if sessions:
        return sessions[-1]
    raise DataError(f"--baseline {baseline}: no session {baseline} under {results_dir} and no results directory "
                    f"with sessions at {path}; give a session id (see `ls {results_dir}`), a session path or a "
                    "results directory")


def _baseline_runs(session_dir: Path) -> list[RunRecord]:
    runs = load_runs(session_dir)
    conflict = conditions.pooling_conflict(run.line for run in runs)
    if conflict:
        raise DataError(f"--baseline {session_dir.name}: {conflict}; give a baseline session profiled under one "
                        "profile")
    if not runs:
        raise DataError(f"--baseline {session_dir}: the session holds no runs; give a session that profiled models")
    return runs


def _table(result: GateResult) -> Table:
    table = Table(title=f"check · session {result.session} against baseline {result.baseline} · "
                        f"median over ok runs · α={result.alpha:g}", title_justify="left")
    for heading in ("model", "cpus", "check", "baseline", "session", "change", "limit", "p (Holm)", "verdict"):
        table.add_column(heading, justify="right" if heading in ("cpus", "baseline", "session", "change", "limit",
                                                                   "p (Holm)") else "left")
    for c in result.checks:
        p_value = c.p_adjusted if c.p_adjusted is not None else c.p_value
        table.add_row(c.model, f"{c.cpus:g}", c.check, fmt(c.baseline), fmt(c.value),
                      f"{c.change:+.1%}" if c.change is not None else "—",
                      f"{c.threshold:.0%}" if c.threshold is not None else "—",
                      fmt(p_value, 2) if p_value is not None else "—",
                      f"[{VERDICT_STYLE.get(c.verdict, 'yellow')}]{c.verdict}[/]")
    return table


def _print(result: GateResult) -> None:
    out_console.print(_table(result))
    for c in result.checks:
        out_console.print(f"  {c.verdict}: {c.model} cpus={c.cpus:g} {c.check}: {c.message}", highlight=False,
                     soft_wrap=True)
    if result.missing:
        out_console.print(f"  in the baseline, not in the session (not checked): {', '.join(result.missing)}",
                     highlight=False, soft_wrap=True)
    failed = result.failed
    verdict = (f"FAILED: {len(failed)} of {len(result.checks)} checks ({', '.join(sorted({c.model for c in failed}))})"
               if failed else f"passed: {len(result.checks)} checks")
    out_console.print(verdict, highlight=False)


def _check_junit_target(path: Path) -> None:
    """Before any work: the JUnit file's directory must be writable and the path not a directory."""
    if path.is_dir():
        raise ConfigError(f"--junit {path}: a directory; give a file path such as {path / 'report.xml'}")
    ensure_writable_dir(path.resolve().parent, "--junit directory")


def run(args: argparse.Namespace) -> int:
    max_slowdown = threshold("--max-slowdown", args.max_slowdown)
    max_memory_growth = threshold("--max-memory-growth", args.max_memory_growth)
    metric = check_metric(args.metric, _is_time)
    if args.session == ALL_SESSIONS:
        raise ConfigError(f"--session {ALL_SESSIONS}: the gate checks one session against the baseline; give its id")
    if args.junit:
        _check_junit_target(args.junit)
    results_dir = resolve_results_dir(args.results_dir)
    baseline_dir = resolve_baseline(results_dir, args.baseline)
    runs, session = select_runs(results_dir, args.session)
    if session == baseline_dir.name:
        raise DataError(f"--baseline {args.baseline} is the session being checked ({session}); profile the "
                        "candidate first, or name it with --session")
    result = check_sessions(_baseline_runs(baseline_dir), runs, baseline=baseline_dir.name, session=session,
                            metric=metric, max_slowdown=max_slowdown, max_memory_growth=max_memory_growth,
                            alpha=ALPHA)
    for note in result.notes:
        warn(note)
    if args.json:
        print_json(result.to_json())
    else:
        _print(result)
    if args.junit:
        from harness.report.junit import junit_xml

        atomic_write_text(args.junit, junit_xml(result))
    return 1 if result.failed else 0
