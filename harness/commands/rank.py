"""`harness rank [--metric M]`: the models' ranking under the session's profile, ties where not significant."""

from __future__ import annotations

import argparse

from rich.table import Table

from harness.commands._analysis import add_metric_option, add_results_options, fmt, print_json, stdout, warn
from harness.ranking import ALPHA, rank_runs, ranking_rows
from harness.run_values import resolve_results_dir, select_runs
from harness.stats import UNSTABLE_RULE


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "rank", help="rank the session's models; not-significant differences share a rank",
        description=f"Rank models (lower is better). Mann–Whitney U at alpha={ALPHA} or bootstrap CIs decide ties.",
    )
    add_metric_option(parser, "latency_ms", "the metric to rank by (default: latency_ms)")
    add_results_options(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    results_dir = resolve_results_dir(args.results_dir)
    runs, session = select_runs(results_dir, args.session)
    rankings = rank_runs(runs, args.metric)
    for cpus, entries in rankings.items():
        for entry in entries:
            if entry.unstable:
                warn(f"{entry.model} at cpus={cpus:g}: {args.metric} varies ({UNSTABLE_RULE}); "
                     "raise REPEATS or quiet the machine")
    fallbacks = sum(e.method != "mann-whitney" for entries in rankings.values() for e in entries if e.compared_with)
    if fallbacks:
        warn(f"{fallbacks} comparisons could not use Mann–Whitney (too few repeats to reach p < {ALPHA}; "
             "it needs 4 per model): they used bootstrap CIs or tied; set REPEATS=5 for a real test")
    if args.json:
        print_json({"session": session, "metric": args.metric, "alpha": ALPHA,
                    "ranking": ranking_rows(rankings, args.metric)})
        return 0
    for cpus, entries in rankings.items():
        table = Table(title=f"{args.metric} ranking · session {session} · cpus={cpus:g}", title_justify="left")
        for column in ("rank", "model", "median", "95% CI", "n", "vs", "p", "stability", "positions"):
            table.add_column(column)
        for e in entries:
            table.add_row(
                str(e.rank), e.model, fmt(e.median), f"[{fmt(e.ci95_low)}, {fmt(e.ci95_high)}]", str(e.n),
                e.compared_with or "", fmt(e.p_value, 2) if e.p_value is not None else (e.method or ""),
                f"{e.stability:.0%}", f"{e.position_low}–{e.position_high}",
            )
        stdout.print(table)
    return 0
