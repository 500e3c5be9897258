"""What harness.rank, harness.compare and harness.predict return: the analysis's own records, with a DataFrame of them
for a notebook and the HTML a notebook cell shows. The CLI prints the same records."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from harness.analysis.ranking import RankEntry

FLOAT_FORMAT = "{:.4g}".format


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """pandas, imported when a table is asked for."""
    import pandas as pd

    return pd.DataFrame(rows)


def _html(title: str, table: pd.DataFrame) -> str:
    return f"<p><b>{html.escape(title)}</b></p>" + table.to_html(index=False, float_format=FLOAT_FORMAT, na_rep="—")


@dataclass(frozen=True)
class Ranking:
    """The models ranked by `metric` at each CPUS value, ties where their difference is not significant."""

    session: str
    metric: str
    entries: dict[float, list[RankEntry]]
    """CPUS value -> its ranking, best first (unranked models last)."""

    @property
    def table(self) -> pd.DataFrame:
        """A row per model and CPUS value: rank (None when unranked), status, median, its CI, and the test."""
        from harness.analysis.ranking import ranking_rows

        return _frame(ranking_rows(self.entries, self.metric))

    def best(self, cpus: float | None = None) -> list[str]:
        """The models that share rank 1 (at `cpus`, default: the first CPUS value)."""
        from harness.analysis.ranking import RANKED

        entries = self.entries[next(iter(self.entries)) if cpus is None else float(cpus)]
        return [e.model for e in entries if e.status == RANKED and e.rank == 1]

    def _repr_html_(self) -> str:
        shown = ["cpus", "rank", "model", "median", "ci95_low", "ci95_high", "n", "status"]
        table = self.table
        return _html(f"{self.metric} ranking · session {self.session}", table[[c for c in shown if c in table]])


@dataclass(frozen=True)
class Comparison:
    """Model B against model A at each CPUS value both have: facts and measured medians, with B/A ratios."""

    model_a: str
    model_b: str
    comparisons: list[dict[str, Any]]
    """One per CPUS value: both sides (session, run counts, facts, summaries) and the rows."""

    @property
    def table(self) -> pd.DataFrame:
        """A row per fact and metric at each CPUS value: A's value, B's, and B/A."""
        return _frame([{"cpus": c["cpus"], "metric": row["metric"], "key": row["key"], "a": row["a"],
                              "b": row["b"], "ratio": row["ratio"]} for c in self.comparisons for row in c["rows"]])

    def _repr_html_(self) -> str:
        table = self.table.rename(columns={"a": self.model_a, "b": self.model_b, "ratio": "B/A"}).drop(columns="key")
        return _html(f"compare: A = {self.model_a}, B = {self.model_b}", table)


@dataclass(frozen=True)
class Predictions:
    """Device values with their 95% prediction intervals, a row per model and metric (and CPUS group)."""

    device: str
    rows: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)
    """What the calibration says of itself: the library devices that carried it, its held-out error."""
    session: str = ""
    """The session (or `all`) whose runs were calibrated; empty for cells, which are never run."""

    @property
    def table(self) -> pd.DataFrame:
        return _frame(self.rows)

    def _repr_html_(self) -> str:
        shown = ["model", "metric", "fit", "harness", "predicted", "pi_low", "pi_high", "measured_on_device"]
        table = self.table
        notes = "".join(f"<p>{html.escape(note)}</p>" for note in self.notes)
        return _html(f"predicted on {self.device} (95% prediction interval)", table[[c for c in shown if c in table]]) \
            + notes
