"""Repeats of one model on a device (rows of a CSV, or several logs) become one row: the median of each metric,
with their count as `n`. Logs of different tools for one run (perf_test's latency, tegrastats' memory) are one
row too, but not repeats: `n` counts the values of the metric measured most often.

The median, as the harness takes it over its own repeats: a device run disturbed by a background task (an app
update, thermal throttling) moves a mean by its whole excess and the median not at all, once three or more
repeats were measured.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from harness.core.errors import DataError
from harness.device.device_csv import FILE, LINE


def source_label(row: pd.Series) -> str:
    """`d.csv:3` for a CSV row, the file's name for a log."""
    line = row.get(LINE)
    return f"{row[FILE]}:{int(line)}" if line is not None and not pd.isna(line) else str(row[FILE])


def _where_first(first: pd.Series, other: pd.Series) -> str:
    return f"on line {int(first[LINE])}" if first[FILE] == other[FILE] and not pd.isna(first[LINE]) else (
        f"in {source_label(first)}")


def _carried_value(group: pd.DataFrame, column: str, model: str) -> str | None:
    """The one value a tag (or harness_model) has over a model's repeats; two different values are an error."""
    values = ["" if pd.isna(value) else str(value).strip() for value in group[column]]
    distinct = list(dict.fromkeys(value for value in values if value))  # in order of appearance
    if len(distinct) > 1:
        first, other = (group.iloc[values.index(value)] for value in distinct[:2])
        raise DataError(f"{source_label(other)}: {column} {distinct[1]!r} contradicts {distinct[0]!r} "
                        f"{_where_first(first, other)} for the same model {model}; make them agree")
    return distinct[0] if len(distinct) else None


def combine_repeats(frame: pd.DataFrame, metrics: list[str], tags: list[str]
                    ) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """One row per model (and thread count): each metric's median over its repeats, `n` how many there were;
    and, for each row, where its repeats came from (`n` and `sources`)."""
    keys = ["model", "cpus"] if "cpus" in frame and frame["cpus"].notna().any() else ["model"]
    carried = tags + (["harness_model"] if "harness_model" in frame else [])
    out, provenance = [], []
    for key, group in frame.groupby(keys, sort=True, dropna=False):
        row: dict[str, Any] = dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True))
        for column in carried:
            row[column] = _carried_value(group, column, row["model"])
        for metric in metrics:
            row[metric] = group[metric].median() if metric in group else float("nan")
        row["n"] = max([int(group[m].notna().sum()) for m in metrics if m in group] + [1])
        cpus = row.get("cpus")
        provenance.append({"model": row["model"], "cpus": None if cpus is None or pd.isna(cpus) else float(cpus),
                           "n": row["n"], "sources": [source_label(r) for _, r in group.iterrows()]})
        out.append(row)
    columns = keys + [c for c in carried if c not in keys] + metrics + ["n"]
    return pd.DataFrame(out, columns=columns), provenance
