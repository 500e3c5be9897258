"""`harness devices` and `harness devices show NAME`: the device library, every table with its provenance."""

from __future__ import annotations

import argparse

from rich.table import Table

from harness.commands import COMMANDS
from harness.commands.shared import fmt, print_json
from harness.core.config import resolve_results_dir
from harness.core.errors import ConfigError, DataError
from harness.device.library import METRIC, all_tables, find_table, imported_tables, set_member
from harness.kernels.table import KernelTable, find_kernel_table, kernel_tables
from harness.report.console import out_console

SHOWN_MODELS = 40
"""`devices show` lists a table's models up to this many (a NAS-Bench-201 table holds 15,625); --json gives all."""


KERNEL_COLUMNS = ("name", "device", "engine", "threads", "precision", "date", "models", "rows", "role", "source")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "devices", help=COMMANDS["devices"],
        description="The device library: the published device tables the harness ships (devices/library.csv) and "
                    "every device imported with import-device, each with its source, engine, threads, precision and "
                    "date. regress, predict and suggest learn from them (the `library` fit). Kernel tables, which "
                    "`harness probe` writes, are listed beside them (role `kernels`).")
    parser.add_argument("action", nargs="?", choices=("list", "show", "join", "leave"), default="list",
                        help="list the library, show a table, or have an imported device join or leave the library "
                             "(an import joins only with import-device --library)")
    parser.add_argument("name", nargs="?", help="with show: the table's name, as `harness devices` lists it; with "
                                                "join or leave: an imported device")
    parser.add_argument("--results-dir", help="results directory whose imported devices may join the library "
                                              "(default: RESULTS_DIR of the profile)")
    parser.add_argument("--json", action="store_true", help="print JSON only, on stdout")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    results_dir = resolve_results_dir(args.results_dir)
    if args.action in ("join", "leave"):
        if not args.name:
            raise ConfigError(f"devices {args.action}: name an imported device (`harness devices` lists them)")
        set_member(results_dir, args.name, args.action == "join", "harness devices join")
        out_console.print(f"{args.name} {'joined' if args.action == 'join' else 'left'} the device library",
                          highlight=False)
        return 0
    tables = all_tables(results_dir)
    if args.action == "show":
        if not args.name:
            raise ConfigError("devices show: name a table, e.g. `harness devices show ncnn-rpi4b-4t` "
                             "(`harness devices` lists them)")
        table = find_table(args.name, tables)
        probed = find_kernel_table(args.name, results_dir) if table is None else None
        if probed is not None:
            return show_kernels(probed, args.json)
        if table is None:
            names = [*(t.name for t in tables), *(k.name for k in kernel_tables(results_dir))]
            raise DataError(f"no library device or kernel table {args.name!r}; `harness devices` lists them "
                            f"({', '.join(names)})")
        values = table.values.sort_values()
        if args.json:
            print_json({**table.provenance(), METRIC: {str(k): float(v) for k, v in values.items()}})
            return 0
        for key, value in table.provenance().items():
            out_console.print(f"{key:>9}: {value if value not in (None, '') else '-'}", highlight=False)
        listing = Table(title=f"{table.name}: latency_ms, fastest first", title_justify="left")
        listing.add_column("model")
        listing.add_column("latency ms", justify="right")
        for model, value in values.head(SHOWN_MODELS).items():
            listing.add_row(str(model), fmt(value))
        out_console.print(listing)
        if len(values) > SHOWN_MODELS:
            out_console.print(f"... and {len(values) - SHOWN_MODELS} more (--json gives every model)")
        return 0
    outside = sorted({t.name for t in imported_tables(results_dir, members_only=False)} - {t.name for t in tables})
    kernels = [table.provenance() for table in kernel_tables(results_dir)]
    if args.json:
        print_json({"tables": [table.provenance() for table in tables], "kernel_tables": kernels,
                    "imported_outside_the_library": outside})
        return 0
    listing = Table(title="device library (harness devices show NAME)", title_justify="left")
    for column in ("name", "device", "engine", "threads", "precision", "date", "models", "role", "source"):
        listing.add_column(column)
    for table in tables:
        row = table.provenance()
        listing.add_row(*(str(row[key]) if row[key] not in (None, "") else "-" for key in
                          ("name", "device", "engine", "threads", "precision", "date", "models", "role", "source")))
    out_console.print(listing)
    if kernels:
        listing = Table(title=f"kernel tables in {results_dir} (harness probe; harness devices show NAME)",
                        title_justify="left")
        for column in KERNEL_COLUMNS:
            listing.add_column(column)
        for row in kernels:
            listing.add_row(*(str(row[key]) if row[key] not in (None, "") else "-" for key in KERNEL_COLUMNS))
        out_console.print(listing)
    if outside:
        out_console.print(f"imported, not in the library: {', '.join(outside)} (`harness devices join NAME` adds one)",
                          highlight=False)
    return 0


def show_kernels(table: KernelTable, as_json: bool) -> int:
    """A kernel table's provenance, and its rows per op type: how many rows, from how many models, designed or zoo."""
    rows = table.rows()
    kinds = (rows.groupby("op_type")
             .agg(rows=("model", "size"), models=("model", "nunique"),
                  designed=("source", lambda s: int((s == "designed").sum())), mean_ms=("mean_ms", "median"))
             .sort_values("rows", ascending=False))
    provenance = table.provenance()
    if as_json:
        print_json({**provenance, "kinds": {str(kind): {key: (int(value) if key != "mean_ms" else float(value))
                                                        for key, value in row.items()}
                                            for kind, row in kinds.iterrows()}})
        return 0
    for key, value in provenance.items():
        out_console.print(f"{key:>9}: {value if value not in (None, '', []) else '-'}", highlight=False)
    listing = Table(title=f"{table.name}: rows per op type", title_justify="left")
    for column in ("op type", "rows", "models", "designed rows", "median ms"):
        listing.add_column(column, justify="left" if column == "op type" else "right")
    for kind, row in kinds.iterrows():
        listing.add_row(str(kind), *(str(int(row[key])) for key in ("rows", "models", "designed")),
                        fmt(row["mean_ms"]))
    out_console.print(listing)
    return 0
