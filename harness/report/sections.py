"""The parts every report output is written from: tables, figures and sections, as harness.report.document
and harness.report.ops build them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pandas as pd

from harness.report.format import display_frame

FOLD_COLUMNS = 10
"""Tables wider than this are raw detail: folded (<details>) so they never push the reading order sideways."""


@dataclass
class ReportTable:
    """`frame` is written to CSV/JSON at full precision; `display` (when given) is what people read instead."""

    name: str
    title: str
    frame: pd.DataFrame
    display: pd.DataFrame | None = None

    @property
    def shown(self) -> pd.DataFrame:
        return self.display if self.display is not None else display_frame(self.frame)

    @property
    def folded(self) -> bool:
        return len(self.shown.columns) > FOLD_COLUMNS


@dataclass
class ReportFigure:
    name: str
    title: str
    png: bytes


@dataclass
class Section:
    title: str
    paragraphs: list[str] = field(default_factory=list)
    tables: list[ReportTable] = field(default_factory=list)
    figures: list[ReportFigure] = field(default_factory=list)
    figures_first: bool = False  # the answer: its chart beside its table, both on the first screen
    after: list[ReportTable | str] = field(default_factory=list)  # tables and notes below the figure row


@dataclass
class Report:
    session_id: str
    sections: list[Section]

    @property
    def title(self) -> str:
        return f"Profiling report: session {self.session_id}"


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]+", "_", text).strip("_").lower()
