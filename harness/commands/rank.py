"""`harness rank [--metric M] [--device D]`: the models' ranking under the session's profile, ties where not
significant; with a device, by its predicted latency, ties where an interval overlaps the rank's first one."""

from __future__ import annotations

import argparse

from rich.table import Table

from harness.analysis.ranking import ALPHA, MIN_RELATIVE_GAP, RANKED, RankEntry, ranking_rows
from harness.analysis.stats import UNSTABLE_RULE
from harness.api.queries import rank, rank_on_device
from harness.commands import COMMANDS
from harness.commands.shared import (
    DEVICE_HELP,
    add_metric_option,
    add_results_options,
    fmt,
    print_json,
    text_table,
    warn,
)
from harness.core import metric_registry
from harness.core.config import resolve_results_dir
from harness.core.errors import ConfigError
from harness.report.answer import device_ranking_display, device_sentence
from harness.report.console import out_console


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "rank", help=COMMANDS["rank"],
        description=f"Rank models (lower is better). A model shares the rank of its neighbour above unless their "
                    f"test (Wilcoxon's signed-rank test on the per-round differences for models run side by side, "
                    f"else Mann–Whitney U), FDR-adjusted (Benjamini–Hochberg) over the neighbour pairs at "
                    f"alpha={ALPHA}, or a slower run in every round by itself, separates them and their medians "
                    f"differ by {MIN_RELATIVE_GAP:.0%} or more. With --device: the models by the device's "
                    f"predicted latency (as `harness predict` predicts it), a model sharing a rank where its 95% "
                    f"prediction interval overlaps that of the rank's first model.",
    )
    default = metric_registry.DEFAULT_METRIC
    add_metric_option(parser, default, f"the metric to rank by (default: {default})", lambda m: m.lower_is_better)
    parser.add_argument("--device", help=f"{DEVICE_HELP}, or a probed device's kernel table; here: rank by its "
                                         f"predicted {metric_registry.LATENCY} (default: the session's measurements)")
    add_results_options(parser, by_runtime=True)
    parser.set_defaults(func=run)


def ci_text(entry: RankEntry) -> str:
    if entry.ci95_level is None:
        return "— (n < 6)" if entry.n else "—"
    return f"[{fmt(entry.ci95_low)}, {fmt(entry.ci95_high)}] {entry.ci95_level:.1%}"


def explanations(entries: list[RankEntry]) -> list[str]:
    """Why each model shares the rank of the one above it (and the repeats that could separate them), and why
    the unranked ones are unranked."""
    lines, previous_rank = [], None
    for e in entries:
        if e.status != RANKED:
            lines.append(f"{e.model} ({e.status}): {e.reason}")
        elif e.rank == previous_rank:
            lines.append(f"{e.model} shares rank {e.rank}{f' with {e.compared_with}' if e.compared_with else ''}: "
                         f"{e.reason}")
        previous_rank = e.rank
    return lines


def run(args: argparse.Namespace) -> int:
    if args.device:
        return run_on_device(args)
    ranking = rank(args.session, args.metric, runtime=args.runtime, results_dir=resolve_results_dir(args.results_dir))
    rankings, session, args.metric = ranking.entries, ranking.session, ranking.metric
    for cpus, entries in rankings.items():
        for entry in entries:
            if entry.unstable and entry.status == RANKED:
                warn(f"{entry.model} at cpus={cpus:g}: {args.metric} varies ({UNSTABLE_RULE}); "
                     "raise REPEATS or quiet the machine")
        needs = [e.repeats_needed for e in entries if e.repeats_needed]
        if needs:
            warn(f"at cpus={cpus:g}, more repeats could separate {len(needs)} tie(s): REPEATS={min(needs)} to "
                 f"{max(needs)} (each tie's figure is below the table)")
    if args.json:
        print_json({"session": session, "metric": args.metric, "alpha": ALPHA,
                    "ranking": ranking_rows(rankings, args.metric)})
        return 0
    for cpus, entries in rankings.items():
        table = Table(title=f"{args.metric} ranking · session {session} · cpus={cpus:g}", title_justify="left")
        for column in ("rank", "model", "median", "95% CI of median", "n", "vs", "p (FDR)", "stability",
                       "positions"):
            table.add_column(column)
        for e in entries:
            ranked = e.status == RANKED
            table.add_row(
                str(e.rank) if ranked else e.status, e.model, fmt(e.median), ci_text(e), f"{e.n}/{e.runs}",
                e.compared_with or "", fmt(e.p_adjusted, 2) if e.p_adjusted is not None else "",
                f"{e.stability:.0%}" if ranked else "", f"{e.position_low}–{e.position_high}" if ranked else "",
            )
        out_console.print(table)
        for line in explanations(entries):
            out_console.print(f"  {line}", highlight=False, soft_wrap=True)
    return 0


def run_on_device(args: argparse.Namespace) -> int:
    """The session's models by the device's predicted latency."""
    if args.metric != metric_registry.LATENCY:
        raise ConfigError(f"--metric {args.metric}: with --device, models are ranked by the device's predicted "
                          f"{metric_registry.LATENCY}; leave --metric unset")
    ranking = rank_on_device(args.device, args.session, runtime=args.runtime,
                             results_dir=resolve_results_dir(args.results_dir))
    if args.json:
        print_json({"session": ranking.session, "device": ranking.device, "metric": metric_registry.LATENCY,
                    "notes": ranking.notes, "ranking": ranking.table.to_dict(orient="records")})
        return 0
    for line in ranking.notes:
        out_console.print(line, highlight=False, soft_wrap=True)
    shown = device_ranking_display(ranking.table).assign(**{"carried by": ranking.table["carried_by"]})
    out_console.print(text_table(shown, f"{metric_registry.LATENCY} on {ranking.device}, predicted · session "
                                        f"{ranking.session}"))
    out_console.print(device_sentence(ranking.device, ranking.table), highlight=False, soft_wrap=True)
    return 0
