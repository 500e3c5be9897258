"""Every goal of the benchmarks in one table, met or missed with the reason, from results/bench/<name>.json, and
docs/accuracy.md: each benchmark's table and goals as measured, so the figures there are never copied by hand.

    .venv/bin/python benchmarks/goals.py sampling_overhead peak_fidelity overhead latency cpu_limits noise_floor
"""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path
from typing import Any

from _common import OUT_DIR, ROOT, print_table, write_json

from harness.store.results import atomic_write_text

ACCURACY = ROOT / "docs" / "accuracy.md"

VERDICTS = {True: "met", False: "MISSED", None: "info"}


def _cell(value: Any) -> str:
    text = f"{value:.4g}" if isinstance(value, float) else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return ["(no rows)"]
    columns = list(dict.fromkeys(key for row in rows for key in row))
    return ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns),
            *("| " + " | ".join(_cell(row.get(column, "")) for column in columns) + " |" for row in rows)]


def purpose(name: str) -> str:
    """The first paragraph of benchmarks/<name>.py's docstring: what the benchmark measures."""
    doc = ast.get_docstring(ast.parse((Path(__file__).parent / f"{name}.py").read_text())) or ""
    return doc.split("\n\n")[0].replace("\n", " ")


def accuracy_markdown(reports: list[dict[str, Any]], goals: list[dict[str, Any]]) -> str:
    lines = ["<!-- Written by `make bench` (benchmarks/goals.py) from results/bench/*.json; do not edit. -->",
             "# How exact is it?", "",
             "The figures of the latest `make bench` on this host, each benchmark with what it measures, its table "
             "and its goals. Ratios are measured within one run of the benchmark, so a loaded host shifts both sides.",
             "", "## Goals", "", *markdown_table(goals)]
    for report in reports:
        lines += ["", f"## {report['benchmark']} ({report['measured_at']})", "", purpose(report["benchmark"]), "",
                  *markdown_table(report["rows"])]
        for title, table in (report.get("tables") or {}).items():
            lines += ["", f"{title}:", "", *markdown_table(table)]
        lines += [f"- note: {note}" for note in report.get("notes") or []]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("benchmarks", nargs="+", help="names of the benchmarks whose JSON to read")
    args = parser.parse_args()
    rows, reports = [], []
    for name in args.benchmarks:
        path = OUT_DIR / f"{name}.json"
        if not path.exists():
            raise SystemExit(f"{path} does not exist: run benchmarks/{name}.py first")
        report = json.loads(path.read_text())
        reports.append(report)
        rows += [{"benchmark": name, "goal": goal["name"], "target": goal["target"], "measured": goal["measured"],
                  "verdict": VERDICTS[goal["met"]], "note": goal["note"]} for goal in report["goals"]]
    print_table("Goals", rows)
    write_json(OUT_DIR / "goals.json", rows)
    atomic_write_text(ACCURACY, accuracy_markdown(reports, rows))
    print(json.dumps({"written": [str(OUT_DIR / "goals.json"), str(ACCURACY)]}))


if __name__ == "__main__":
    main()
