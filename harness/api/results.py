"""What harness.rank, harness.compare and harness.predict return: the analysis's own records, with a DataFrame of them
for a notebook and the HTML a notebook cell shows. The CLI prints the same records."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from harness.analysis.ranking import RankEntry
    from harness.calibration.prediction import Prediction

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
class DeviceRanking:
    """A session's models ranked by a device's predicted latency, fastest first: a model whose 95% prediction interval
    overlaps that of its rank's first model shares the rank."""

    device: str
    session: str
    table: pd.DataFrame
    """A row per model: rank, tied, model, group, predicted_ms, pi_low_ms, pi_high_ms, fit, carried_by."""
    notes: list[str] = field(default_factory=list)

    def best(self) -> list[str]:
        """The models that share rank 1."""
        return self.table.loc[self.table["rank"] == 1, "model"].tolist()

    def _repr_html_(self) -> str:
        return _html(f"latency_ms on {self.device}, predicted · session {self.session}", self.table)


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
    """Device values with their 95% prediction intervals, a Prediction per model and metric (and CPUS group)."""

    device: str
    rows: list[Prediction]
    notes: list[str] = field(default_factory=list)
    """What the calibration says of itself: the library devices that carried it, its held-out error."""
    session: str = ""
    """The session (or `all`) whose runs were calibrated; empty for cells, which are never run."""

    @property
    def table(self) -> pd.DataFrame:
        """A row per Prediction, a column per field (Prediction.to_dict)."""
        return _frame([p.to_dict() for p in self.rows])

    def to_dict(self) -> dict[str, Any]:
        """What `harness predict --json` prints."""
        return {"session": self.session, "device": self.device, "devices": self.devices,
                "predictions": [p.to_dict() for p in self.rows]}

    @classmethod
    def several(cls, parts: list[Predictions]) -> Predictions:
        """One device's predictions after another, each naming its device, each note too."""
        rows = [p for part in parts for p in part.rows]
        notes = [f"{part.device}: {note}" for part in parts for note in part.notes]
        return cls(", ".join(part.device for part in parts), rows, notes, parts[0].session if parts else "")

    @property
    def devices(self) -> list[str]:
        """The devices predicted, in the order asked."""
        return list(dict.fromkeys(p.device or self.device for p in self.rows)) or [self.device]

    @property
    def by_device(self) -> pd.DataFrame:
        """Models as rows, devices as columns: each predicted value with its 95% interval, as text
        ("12.3 [10.1, 15.0]"; "—" where a device has no prediction), per metric and CPUS group."""
        import pandas as pd

        rows = [{**p.to_dict(), "device": p.device or self.device} for p in self.rows if p.predicted is not None]
        if not rows:
            return pd.DataFrame(columns=["model", "metric", *self.devices])
        frame = pd.DataFrame(rows)
        frame["cell"] = [f"{p:.4g} [{lo:.4g}, {hi:.4g}]" for p, lo, hi in
                         zip(frame["predicted"], frame["pi_low"], frame["pi_high"], strict=True)]
        keys = ["model", "metric"] + (["group"] if "group" in frame else [])
        frame = frame.assign(**{key: frame[key].astype(str) for key in keys[2:]})
        wide = frame.pivot_table(index=keys, columns="device", values="cell", aggfunc="first")
        return wide.reindex(columns=self.devices).fillna("—").reset_index().rename_axis(columns=None)

    def _repr_html_(self) -> str:
        if len(self.devices) > 1:
            notes = "".join(f"<p>{html.escape(note)}</p>" for note in self.notes)
            return _html(f"predicted on {self.device} (95% prediction interval)", self.by_device) + notes
        shown = ["model", "metric", "fit", "harness", "predicted", "pi_low", "pi_high", "measured_on_device"]
        table = self.table
        notes = "".join(f"<p>{html.escape(note)}</p>" for note in self.notes)
        return _html(f"predicted on {self.device} (95% prediction interval)", table[[c for c in shown if c in table]]) \
            + notes
