"""The README stays a short manual, the reference lives in docs/, and the generated tables never go stale."""

from __future__ import annotations

import re
from pathlib import Path

from harness.core import metric_registry
from harness.core.config import VARIABLES
from harness.core.reference_docs import DOCS, GENERATED, stale

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_generated_reference_tables_are_current() -> None:
    assert stale() == [], "run `make docs` (python -m harness.core.reference_docs) and commit docs/"


def test_generated_tables_name_every_variable_and_metric() -> None:
    variables, metrics = (GENERATED[name]() for name in ("variables.md", "metrics.md"))
    assert all(f"| {name} |" in variables for name in VARIABLES)
    assert all(f"| `{metric.name}` |" in metrics for metric in metric_registry.METRICS)


def test_stale_finds_a_table_edited_by_hand(tmp_path: Path) -> None:
    for name, make in GENERATED.items():
        (tmp_path / name).write_text(make())
    assert stale(tmp_path) == []
    (tmp_path / "metrics.md").write_text(GENERATED["metrics.md"]().replace("| ms |", "| s |", 1))
    assert stale(tmp_path) == ["metrics.md"]


def test_readme_is_short_and_starts_with_the_two_commands() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) < 300
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
