"""The README stays a short manual, the reference lives in docs/, and the generated tables never go stale."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness import docgen
from harness.commands import COMMANDS
from harness.core import metric_registry
from harness.core.config import VARIABLES
from harness.core.reference_docs import DOCS, GENERATED
from harness.docgen import PAGES, stale

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_generated_reference_tables_are_current() -> None:
    assert stale() == [], "run `python -m harness.docgen` and commit docs/"


def test_generated_tables_name_every_variable_and_metric() -> None:
    variables, metrics = (GENERATED[name]() for name in ("variables.md", "metrics.md"))
    assert all(f"| {name} |" in variables for name in VARIABLES)
    assert all(f"| `{metric.name}` |" in metrics for metric in metric_registry.METRICS)


def test_records_page_names_every_field_of_a_stored_line_with_a_meaning() -> None:
    page = PAGES["records.md"]()
    line = docgen.placeholder(docgen.records.RunRecord).to_dict()
    keys = [key for key, _ in docgen.line_fields(line)]
    assert {"model_name", "peak_memory_mib", "limits_applied.memory_bytes", "clock_s", "provenance"} <= set(keys)
    rows = [re.split(r"(?<!\\)\|", row)[1:-1] for row in page.split("\n## ")[0].splitlines() if row.startswith("| `")]
    assert [cells[0].strip(" `") for cells in rows] == keys
    assert all(cells[3].strip() for cells in rows), "a field without a meaning: document it in its record"
    assert "| `peak_memory_mib` | float \\| None | MiB (metric `peak_memory_mib`) |" in page


def test_commands_page_holds_every_command_and_its_flags() -> None:
    page = PAGES["commands.md"]()
    assert all(f"## harness {name}\n" in page for name in COMMANDS)
    assert "--results-dir RESULTS_DIR" in page and "--max-slowdown" in page


@pytest.mark.parametrize(("name", "edit"), [("metrics.md", ("| ms |", "| s |")),
                                            ("records.md", ("| MiB |", "| GiB |")),
                                            ("commands.md", ("--repeats REPEATS", "--repeat REPEATS"))])
def test_stale_finds_a_page_edited_by_hand(tmp_path: Path, name: str, edit: tuple[str, str]) -> None:
    for page, make in PAGES.items():
        (tmp_path / page).write_text(make())
    assert stale(tmp_path) == []
    text = PAGES[name]()
    assert edit[0] in text
    (tmp_path / name).write_text(text.replace(*edit, 1))
    assert stale(tmp_path) == [name]


def test_readme_is_short_and_starts_with_the_two_commands() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 300
    quick = text.split("## Quick start", 1)[1].split("```", 2)[1]
    commands = [line.split("#")[0].strip() for line in quick.splitlines()[1:] if line.strip()]
    assert commands == ["make profile", "make test"]


def test_every_relative_link_in_the_readme_and_docs_resolves() -> None:
    broken = []
    for page in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]:
        for target in LINK.findall(page.read_text()):
            if "://" not in target and not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert broken == []
