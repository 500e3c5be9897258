"""Transfer calibration: the device library's tables as evidence for a device the harness has not seen.

For a target device with k measured models, each library table (never one of the target's own device) gives every
model a latency: its measured value where the table has the model, and otherwise its own calibrated prediction from
the harness's profile (a power law of the table's latencies on the harness's, fitted on the models both have). These
become facts `library:<table>` of the calibration's design, which the `library` fit (harness.calibration.fits) reads:
the target's few measurements then choose, by leave-one-out, which library devices carry it and how far beside the
harness's own profile.

A *novel* model is one no library table holds: a user's own model. Its evidence is only the library devices'
predictions from the harness; `novel_held_out` scores the calibration for such models by removing the held-out model
from every library table too, in every fold.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from harness.calibration.choice import AUTO, Candidates, HeldOut, folds, held_out_interval, select
from harness.calibration.fits import Design, fit_spec
from harness.calibration.least_squares import LIBRARY_PREFIX
from harness.device.data import match_models
from harness.device.library import LibraryTable, all_tables, imported_tables, same_data
from harness.kernels.evidence import device_kernel_table
from harness.kernels.table import KernelTable

MIN_SHARED = 3
"""A library table predicts a model it lacks from a power law fitted on at least this many models it shares with the
harness; with fewer, it gives nothing for that model."""


def column(table: LibraryTable) -> str:
    return f"{LIBRARY_PREFIX}{table.name}"


@dataclass(frozen=True)
class Library:
    """The library tables a target may learn from, and their latencies keyed by harness model name."""

    tables: tuple[LibraryTable, ...]
    refused: tuple[str, ...] = ()
    """Tables left out because they hold the target's own data (the same latencies under another name)."""
    kernels: KernelTable | None = None
    """The target's own kernel table (harness probe), whose predictions the `kernels` fit reads."""

    @classmethod
    def for_target(cls, tables: list[LibraryTable], target: str, target_table: LibraryTable | None = None) -> Library:
        """Every table but the target's own device's (by table name or physical device, at any thread count) and
        any whose data is the target's (`target_table`, else the table named `target` among `tables`)."""
        own = {t.device for t in tables if t.name == target} | {target}
        kept = [t for t in tables if t.device not in own and t.name != target]
        mine = target_table or next((t for t in tables if t.name == target), None)
        same = [t for t in kept if mine is not None and same_data(t, mine)]
        return cls(tuple(t for t in kept if t not in same), tuple(t.name for t in same))

    def refused_note(self, target: str) -> str:
        """One line naming the tables refused as the target's own data; empty when none was."""
        if not self.refused:
            return ""
        return (f"not learned from: {', '.join(self.refused)}, whose latencies are {target}'s own (the same data "
                "under another name is no evidence for it)")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tables)

    def measured(self, harness_models: list[str], twins: Mapping[str, str] | None = None) -> pd.DataFrame:
        """harness model × `library:<table>`: each table's own latency of the model (NaN where it has none), a
        renamed copy of a zoo model (`twins`) given its twin's."""
        models, pairs = tuple(harness_models), tuple(sorted((twins or {}).items()))
        return pd.DataFrame({column(table): _by_harness(table, models, pairs) for table in self.tables},
                            index=pd.Index(harness_models, name="harness_model"))

    def evidence(self, harness: pd.Series, without: str | Collection[str] | None = None,
                 twins: Mapping[str, str] | None = None) -> pd.DataFrame:
        """harness model × `library:<table>`: measured where the table has the model (never the value of `without`,
        a model or several), else the table's power law of the harness value; a column no model could be given is
        dropped."""
        models = [str(name) for name in harness.index]
        frame = self.measured(models, twins)
        if without is not None:
            frame.loc[frame.index.isin([without] if isinstance(without, str) else list(without))] = np.nan
        x = np.log(harness.to_numpy(float))
        for name in list(frame.columns):
            values = frame[name].to_numpy(float, copy=True)
            shared = np.isfinite(values) & np.isfinite(x)
            missing = ~np.isfinite(values) & np.isfinite(x)
            if missing.any():
                if shared.sum() >= MIN_SHARED and np.ptp(x[shared]) > 0:
                    slope, intercept = np.polyfit(x[shared], np.log(values[shared]), 1)
                    values[missing] = np.exp(intercept + slope * x[missing])
                frame[name] = values
            if not np.isfinite(frame[name].to_numpy(float)).any():
                frame = frame.drop(columns=name)
        return frame


@lru_cache(maxsize=4096)  # a benchmark asks again for the same table and models in every fold
def _by_harness(table: LibraryTable, models: tuple[str, ...], twins: tuple[tuple[str, str], ...] = ()) -> np.ndarray:
    """The table's latency of each harness model (NaN where it has none), its names matched to the harness's."""
    values = table.values
    if table.column:  # NAS-Bench-201: its names are the harness's
        return values.reindex(list(models)).to_numpy(float)
    mapping = match_models(list(values.index), table.harness_names, list(models), dict(twins))
    by_harness = {harness: float(values[model]) for model, harness in mapping.items()}
    out = np.array([by_harness.get(name, np.nan) for name in models])
    out.flags.writeable = False
    return out


def device_library(results_dir: Path, device: str) -> Library:
    """What a calibration of `device` (an imported device, or a library table) learns from: every shipped table and
    imported one that joined, but the device's own and any holding the device's data; and the device's own kernel
    table, where it has one."""
    tables = all_tables(results_dir)
    target = next((t for t in [*tables, *imported_tables(results_dir, members_only=False)] if t.name == device), None)
    return replace(Library.for_target(tables, device, target), kernels=device_kernel_table(device, results_dir))


def with_evidence(design: Design, evidence: pd.DataFrame, models: list[str]) -> Design:
    """`design` with its library facts replaced by `evidence` (rows by harness model): a column with a gap among
    `models` is left out."""
    kept = [i for i, name in enumerate(design.fact_names) if not name.startswith(LIBRARY_PREFIX)]
    rows = evidence.reindex(models)
    usable = [name for name in rows.columns if np.all(np.isfinite(rows[name].to_numpy(float)))
              and (rows[name] > 0).all()]
    facts = np.column_stack([design.facts[:, kept], rows[usable].to_numpy(float)]) if usable else design.facts[:, kept]
    names = tuple(design.fact_names[i] for i in kept) + tuple(usable)
    return Design(design.harness, facts, names, design.families)


def novel_held_out(design: Design, y: np.ndarray, models: list[str], evidence_without: Callable[[str], pd.DataFrame],
                   candidates: Candidates, fit: str | None = None) -> HeldOut | None:
    """Leave-one-out where the held-out model is novel: removed from every library table before its fold is fitted
    and predicted. With `fit` that fit predicts every fold; otherwise the automatic choice among `candidates` is
    remade in each fold, as nested_leave_one_out does. None when a fold cannot be fitted."""
    n = len(y)
    predicted, low, high, outside, picks = np.empty(n), np.empty(n), np.empty(n), np.zeros(n), []
    for i, keep in folds(n):
        fold = with_evidence(design, evidence_without(models[i]), models)
        rest, left_out = fold.take(keep), fold.take(np.array([i]))
        chosen = fit if fit is not None else select(rest, y[keep], candidates, query=left_out)
        model = None if chosen is None else fit_spec(chosen).train(rest, y[keep])
        if model is None:
            return None
        picks.append(model.name)
        predicted[i], low[i], high[i], outside[i] = held_out_interval(model, rest, left_out)
    return HeldOut(fit or AUTO, predicted, low, high, outside, tuple(picks))
