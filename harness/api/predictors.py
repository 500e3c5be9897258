"""Predictor objects: `harness.load_predictor(device, **keywords)` returns the one that fits the device, and
`harness.predict` is a short convenience over it.

Each kind is one class in PREDICTORS, asked in order whether it serves a device: NAS-Bench-201 cells calibrated from
static facts (CellsPredictor), an imported device calibrated against the harness's runs (DevicePredictor), a probed
device's kernel table, which predicts a graph with no run (KernelPredictor), a shipped library table with no data of
the user's (ZeroShotPredictor). Another kind is one more class added there. Each takes only its own keywords
(KEYWORDS) and gives `.predict(models)`, `.explain()` and `.heldout()`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from harness.analysis.run_values import select_runs
from harness.api.preparing import prepare
from harness.api.session import Session, session_folder
from harness.calibration.calibrate import CalibrationSet, calibrate_runs, group_label
from harness.calibration.nas import CellPredictor, cell_index
from harness.calibration.prediction import Prediction, float_or_none
from harness.calibration.transfer import Library, device_library
from harness.core.config import resolve_results_dir
from harness.core.errors import ConfigError, DataError
from harness.device.data import list_devices, load_device
from harness.device.library import METRIC, NB201_PREFIX, all_tables, catalog_path, find_table, shipped_tables
from harness.kernels.evidence import PRECISION_SUFFIX
from harness.kernels.predictor import UNMEASURED_FACTORS, fitted_model, predict_graph
from harness.kernels.table import KernelTable, find_kernel_table
from harness.models.resolve import resolve_model
from harness.report.carried import carried_note
from harness.run.zero_shot import device_data
from harness.zoo.registry import NB201_REFERENCE

AUTO = "auto"
KERNELS = "kernels"
"""The fit a kernel table's predictions name."""
KERNEL_SUM = "sum of its kernels' predicted ms, read from its graph (no run)"
Cell = int | str


def is_cell(model: object) -> bool:
    """A NAS-Bench-201 architecture: an index, `nb201_<i>` or a cell string (|op~0|+|...|)."""
    text = str(model)
    return isinstance(model, int) or text.startswith("|") or (text.startswith(NB201_PREFIX) and
                                                                text.removeprefix(NB201_PREFIX).isdigit())


@lru_cache(maxsize=32)
def reference_cells(device: str, catalog: Path) -> tuple[tuple[int, float], ...] | None:
    """HELP's budget on a shipped NAS-Bench-201 table named `device`: its latency of the ten reference
    architectures, as a user would measure them on the device; None when `device` names no such table. Read once
    per catalog: a search loop asks for every batch."""
    table = find_table(device, shipped_tables(catalog))
    if table is None or not table.column:
        return None
    values = table.values
    return tuple((index, float(values[f"{NB201_PREFIX}{index}"])) for index in NB201_REFERENCE)


def calibration_notes(cset: CalibrationSet) -> list[str]:
    """The library devices that carried each calibration, and how alike they are."""
    return [f"{c.metric} {group_label(c.group)}: {note}" for c in cset.calibrations if (note := carried_note(c))]


def _session_folder(session: Any) -> Path | None:
    return session.path if isinstance(session, Session) else session_folder(session)


def _directory(keywords: Mapping[str, Any]) -> Path:
    """The results directory the keywords name: a session's (a Session or its folder), else results_dir's (else the
    configured one)."""
    folder = _session_folder(keywords.get("session"))
    if folder is not None:
        return folder.parent
    results_dir = keywords.get("results_dir")
    return resolve_results_dir(None if results_dir is None else str(results_dir))


@lru_cache(maxsize=32)
def _cells(device: str, pairs: tuple[tuple[int, float], ...], fit: str, library: bool,
           directory: Path) -> CellPredictor:
    """Fitted once per device, measured cells and keywords: a search loop asks again and again."""
    return CellPredictor.fit(dict(pairs), device=device, fit=fit, library=library, tables=all_tables(directory))


class Predictor(ABC):
    """What predicts a device's values for models: `predict`, `explain`, `heldout`, from its own keywords only."""

    KEYWORDS: ClassVar[tuple[str, ...]]
    """The keywords load_predictor passes it; any other is refused (check_keywords)."""
    WHY_NOT: ClassVar[dict[str, str]] = {}
    """Why it refuses a keyword another kind takes, where a user would expect it to count."""
    device: str
    notes: list[str]
    session: str

    @classmethod
    @abstractmethod
    def serves(cls, device: str, keywords: Mapping[str, Any]) -> bool:
        """Whether this kind predicts for `device` given these keywords."""

    @classmethod
    @abstractmethod
    def load(cls, device: str, **keywords: Any) -> Predictor:
        """The predictor of `device`, calibrated."""

    @classmethod
    def check_keywords(cls, device: str, keywords: Mapping[str, Any]) -> None:
        unknown = [name for name in keywords if name not in cls.KEYWORDS]
        if unknown:
            why = "; ".join(dict.fromkeys(cls.WHY_NOT[name] for name in unknown if name in cls.WHY_NOT))
            raise ConfigError(f"{', '.join(unknown)}=...: {cls.__name__} (device {device!r}) takes none of them; it "
                              f"takes: {', '.join(cls.KEYWORDS)}" + (f" ({why})" if why else ""))

    @abstractmethod
    def predict(self, models: Iterable[Any]) -> list[Prediction]:
        """One Prediction per model, metric and calibrated group."""

    def explain(self) -> str:
        """Which fit predicts, why it was chosen, and which library devices carried it."""
        return "\n".join(f"{c.metric} {group_label(c.group)}: the {c.model.name} fit ({c.model.equation}), chosen: "
                         f"{c.choice.get('reason', '')}" + (f"; {note}" if (note := carried_note(c)) else "")
                         for c in self.calibrations.calibrations)

    def heldout(self) -> list[dict[str, Any]]:
        """Its own held-out error per metric and group: each calibration model predicted from the others (the fit
        chosen again in each fold for `auto`)."""
        return [{"metric": c.metric, "group": c.group, "models": len(c.points), "fit": c.model.name,
                 **{key.removeprefix("loo_"): value for key, value in c.stats.items() if key.startswith("loo_")}}
                for c in self.calibrations.calibrations]

    @property
    @abstractmethod
    def calibrations(self) -> CalibrationSet:
        """The calibration it predicts from."""


@dataclass
class CellsPredictor(Predictor):
    """NAS-Bench-201 cells (indices, `nb201_<i>`, cell strings) from their MACs and the library's NAS-Bench-201
    tables: `measured` (ms per cell on the device) calibrates it, else the device must be a NAS-Bench-201 table, whose
    reference cells stand for the measurements."""

    KEYWORDS: ClassVar[tuple[str, ...]] = ("measured", "fit", "library", "metric", "results_dir")
    device: str
    cells: CellPredictor
    notes: list[str] = field(default_factory=list)
    session: str = ""

    @classmethod
    def serves(cls, device: str, keywords: Mapping[str, Any]) -> bool:
        return keywords.get("measured") is not None or reference_cells(device, catalog_path()) is not None

    @classmethod
    def load(cls, device: str, **keywords: Any) -> CellsPredictor:
        cls.check_keywords(device, keywords)
        metric = keywords.get("metric")
        if metric not in (None, METRIC):
            raise ConfigError(f"metric={metric!r}: cells are predicted for {METRIC} only")
        measured = keywords.get("measured")
        pairs = reference_cells(device, catalog_path()) if measured is None else \
            tuple((cell_index(c), float(v)) for c, v in measured.items())
        if pairs is None:
            raise ConfigError(f"device={device!r}: cells need measured={{cell: ms}} of a few cells on it, or a "
                              "NAS-Bench-201 library table (harness devices) as the device")
        fitted = _cells(device, pairs, keywords.get("fit", AUTO), keywords.get("library", True),
                        _directory(keywords))
        return cls(device, fitted, [f"calibrated on {len(pairs)} measured cells"])

    @property
    def calibrations(self) -> CalibrationSet:
        return self.cells.cset

    def predict(self, models: Iterable[Cell]) -> list[Prediction]:
        return self.cells.predict(models)


@dataclass
class DevicePredictor(Predictor):
    """An imported device (or a board's): a session's runs calibrated against its data, as `harness predict` does."""

    KEYWORDS: ClassVar[tuple[str, ...]] = ("session", "metric", "fit", "across_repeats", "library", "runtime",
                                           "results_dir")
    device: str
    cset: CalibrationSet
    runs_session: str
    measured: dict[str, pd.DataFrame]
    notes: list[str] = field(default_factory=list)
    session: str = ""

    @classmethod
    def serves(cls, device: str, keywords: Mapping[str, Any]) -> bool:
        return device in list_devices(_directory(keywords))

    @classmethod
    def load(cls, device: str, **keywords: Any) -> DevicePredictor:
        cls.check_keywords(device, keywords)
        session = keywords.get("session")
        directory = _directory(keywords)
        data = load_device(directory, device)
        folder = _session_folder(session)
        runs, name = select_runs(directory, folder.name if folder is not None else session, keywords.get("runtime"),
                                 data)
        learned = device_library(directory, data.name) if keywords.get("library", True) else None
        cset, measured = calibrate_runs(data, runs, keywords.get("metric"), fit=keywords.get("fit", AUTO),
                                        across=keywords.get("across_repeats"), library=learned)
        refused = [learned.refused_note(data.name)] if learned is not None and learned.refused else []
        return cls(data.name, cset, name, measured, refused + calibration_notes(cset), name)

    @property
    def calibrations(self) -> CalibrationSet:
        return self.cset

    def predict(self, models: Iterable[Any]) -> list[Prediction]:
        """Profiled models: names as `harness rank` lists them, or the model files harness.profile took."""
        names = [model_name(model) for model in models]
        profiled = {name for values in self.measured.values() for name in values["model_name"]}
        missing = [name for name in names if name not in profiled]
        if missing:
            raise DataError(f"no runs of {', '.join(missing)} in session {self.runs_session}; profile them first "
                            "(harness.profile) or predict from every session (session=\"all\")")
        return self.cset.predict(self.measured, names)


def uncorrected_note(table: str, models: int) -> str:
    """Why a table predicts with the UNMEASURED_FACTORS bound rather than a measured interval: no model of it ran end
    to end (a phone's exported and imported designed kernels, which ran slow timed apart from any model:
    docs/kernels.md), or too few of them, or of one family, for held-out residuals (interval_factors)."""
    low, high = UNMEASURED_FACTORS
    bound = f"its ×{low:g}–×{high:g} interval is a bound, not a measurement"
    fix = (f"time a few models end to end and import them as device {table.removesuffix(PRECISION_SUFFIX)} "
           "(harness import-device), whose calibration weighs this table against the model-level fits, or probe "
           "zoo models too (--models)")
    if not models:
        return (f"kernel table {table} holds no model measured end to end: its kernels, each timed apart from any "
                f"model, sum with nothing to correct them, and {bound} (such a table put 25 zoo models 35% slow, "
                f"median, in docs/kernels.md); {fix}")
    return (f"kernel table {table} holds {models} model(s) measured end to end; measuring its interval takes 3 "
            f"or more, of 2 families or more, each predicted with its family held out: {bound}; {fix}")


@dataclass
class KernelPredictor(Predictor):
    """A probed device's kernel table (harness probe): a model's latency from its ONNX graph alone, no run: its kernels
    as the engine runs them, each predicted by its kind's regressor, the sum corrected by the per-model term the
    table's own models fitted (harness.kernels.predictor)."""

    KEYWORDS: ClassVar[tuple[str, ...]] = ("results_dir",)
    WHY_NOT: ClassVar[dict[str, str]] = {
        name: "a kernel table predicts from the graph alone, with no session and no fit to choose"
        for name in ("session", "fit", "metric", "across_repeats", "library", "runtime", "measured")}
    device: str
    table: KernelTable
    notes: list[str] = field(default_factory=list)
    session: str = ""

    @classmethod
    def serves(cls, device: str, keywords: Mapping[str, Any]) -> bool:
        return find_kernel_table(device, _directory(keywords)) is not None

    @classmethod
    def load(cls, device: str, **keywords: Any) -> KernelPredictor:
        cls.check_keywords(device, keywords)
        table = find_kernel_table(device, _directory(keywords))
        if table is None:
            raise DataError(f"device={device!r}: no kernel table of that name (harness devices)")
        meta = table.meta
        predictor = cls(table.name, table, [f"kernel table {table.name}: {meta.get('engine')} at "
                                            f"{meta.get('threads')} thread(s) on {meta.get('device')}, probed "
                                            f"{meta.get('created')}; predicted from each graph, none run"])
        model = fitted_model(table)
        if model.factors == UNMEASURED_FACTORS:
            predictor.notes.append(uncorrected_note(table.name, model.models))
        return predictor

    @property
    def calibrations(self) -> CalibrationSet:
        raise DataError(f"{self.device} is a kernel table: no model-level calibration; explain() says what carries it")

    def explain(self) -> str:
        model = fitted_model(self.table)
        regressors = ", ".join(sorted(model.regressors.per_kind)) or "none"
        return (f"kernel table {self.table.name}: a regressor per kernel kind ({regressors}; any other kind by the "
                f"pooled one), trained on rows less the profiler's {model.profiler_ms:.3g} ms a row, then latency = "
                f"({model.term[0]:.3g}·Σkernels{'' if model.power == 1 else f'^{model.power:.3g}'} + "
                f"{model.term[1]:.3g} ms)·exp({model.footprint_line[0]:.3g}·"
                f"(footprint − {model.footprint_line[1]:.3g})), fitted on {model.models} probed models (the footprint: "
                "log(1 + the graph's weight bytes), held inside theirs); the 95% interval is ×"
                f"{model.factors[0]:.2f}–×{model.factors[1]:.2f}, from their held-out residuals (the wider of their "
                "split-conformal ranks and a t prediction interval)")

    def heldout(self) -> list[dict[str, Any]]:
        model = fitted_model(self.table)
        return [{"metric": METRIC, "group": self.group, "models": model.models, "fit": KERNELS,
                 "interval_factors": list(model.factors)}]

    @property
    def group(self) -> dict[str, Any]:
        return {"cpus": float(self.table.meta.get("cpus") or self.table.meta.get("threads") or 1)}

    @cached_property  # read once: a search loop predicts again and again
    def measured(self) -> pd.Series:
        """The probed zoo models' end-to-end latency on the device, by model."""
        rows = self.table.rows()
        return rows[rows["source"].eq("zoo") & rows["model_latency_ms"].gt(0)].groupby("model")[
            "model_latency_ms"].first()

    def predict(self, models: Iterable[Any]) -> list[Prediction]:
        """ONNX files or zoo names (exported first), each predicted from its graph."""
        measured = self.measured
        out = []
        for model in models:
            resolved = resolve_model(str(model), check_runtime=False)
            if resolved.kind != "onnx":
                raise ConfigError(f"model {model}: a kernel table predicts ONNX graphs; give an .onnx file or a zoo "
                                  "name")
            found = predict_graph(self.table, resolved.path)
            pooled = found.detail.get("pooled_kinds") or []
            out.append(Prediction(
                model=resolved.name, metric=METRIC, group=self.group, fit=KERNELS,
                harness=found.detail["kernel_sum_ms"], harness_figure=KERNEL_SUM, predicted=found.ms,
                pi_low=found.low, pi_high=found.high, measured_on_device=float_or_none(measured.get(resolved.name)),
                kernel_table=self.table.name, device=self.table.name,
                note=f"kinds the table holds too few of, by the pooled regressor: {', '.join(pooled)}" if pooled
                else ""))
        return out


@dataclass
class ZeroShotPredictor(Predictor):
    """A shipped library table and no data of the user's: its zoo models and the user's profiled on this host by
    prepare() (once per set of conditions), the table calibrated as imported data, the other tables its library."""

    KEYWORDS: ClassVar[tuple[str, ...]] = ("fit", "across_repeats", "library", "runtime", "results_dir")
    WHY_NOT: ClassVar[dict[str, str]] = {
        "session": "a library table's prediction runs on a session of its own, profiled once per set of conditions "
                   "under RESULTS_DIR/zero-shot/: leave SESSION / --session unset, or import your device's "
                   "measurements (harness import-device) to predict from your session"}
    device: str
    keywords: dict[str, Any]
    cset: CalibrationSet | None = None
    """Made on first use: by predict, with the models to predict profiled beside the table's."""
    notes: list[str] = field(default_factory=list)
    session: str = ""

    @classmethod
    def serves(cls, device: str, keywords: Mapping[str, Any]) -> bool:
        return find_table(device, all_tables(_directory(keywords))) is not None

    @classmethod
    def load(cls, device: str, **keywords: Any) -> ZeroShotPredictor:
        cls.check_keywords(device, keywords)
        return cls(device, dict(keywords))

    @staticmethod
    def _calibrate(device: str, models: Sequence[str], keywords: Mapping[str, Any]) -> tuple[
            CalibrationSet, list[str], str, dict[str, pd.DataFrame], dict[str, str]]:
        directory = _directory(keywords)
        table = find_table(device, all_tables(directory))
        if table is None:
            raise DataError(f"device={device!r}: no library table of that name (harness devices)")
        prepared = prepare(table, models, results_dir=directory, runtime=keywords.get("runtime"))
        learned = Library.for_target(all_tables(directory), table.name) if keywords.get("library", True) else None
        cset, measured = calibrate_runs(device_data(table), prepared.runs, METRIC, fit=keywords.get("fit", AUTO),
                                        across=keywords.get("across_repeats"), library=learned)
        notes = [f"held out on {table.name} (each of its {len(c.points)} models predicted from the others, the fit "
                 f"chosen again each time): {c.stats['loo_within_10pct']:.0%} within ±10%, "
                 f"{c.stats['loo_within_20pct']:.0%} within ±20%, MAPE {c.stats['loo_mape_pct']:.1f}%"
                 for c in cset.calibrations]
        return cset, prepared.notes + notes + calibration_notes(cset), prepared.session, measured, prepared.names

    @property
    def calibrations(self) -> CalibrationSet:
        if self.cset is None:
            self.predict(())
        assert self.cset is not None  # predict made it
        return self.cset

    def predict(self, models: Iterable[Any]) -> list[Prediction]:
        """Model files or zoo names, profiled here first where this host's sessions lack them."""
        wanted = [str(model) for model in models]
        self.cset, self.notes, self.session, measured, names = self._calibrate(self.device, wanted, self.keywords)
        return self.cset.predict(measured, [names[model] for model in wanted])


PREDICTORS: tuple[type[Predictor], ...] = (CellsPredictor, DevicePredictor, KernelPredictor, ZeroShotPredictor)
"""The kinds of predictor, asked in this order which serves a device."""


def model_name(model: Any) -> str:
    """A model as the runs name it: a file harness.profile took is named as it named it."""
    text = str(model)
    return resolve_model(text, check_runtime=False).name if Path(text).suffix and Path(text).is_file() else text


def load_predictor(device: str, **keywords: Any) -> Predictor:
    """The predictor that fits `device`: measured NAS-Bench-201 cells or a NAS-Bench-201 table, an imported device,
    a probed device's kernel table, or a shipped library table (zero-shot). Keywords it does not take raise ConfigError
    naming them."""
    return predictor_kind(device, keywords).load(device, **keywords)


def predictor_kind(device: str, keywords: Mapping[str, Any]) -> type[Predictor]:
    """The first kind of PREDICTORS that serves `device`; DataError naming what a device can be when none does."""
    for kind in PREDICTORS:
        if kind.serves(device, keywords):
            return kind
    known = ", ".join(list_devices(_directory(keywords))) or "none imported"
    raise DataError(f"device={device!r}: neither an imported device ({known}) nor a library or kernel table "
                    "(harness devices); import its measurements with harness import-device, or probe it (harness "
                    "probe)")

