"""Desktop → device calibration per metric and group: which fit maps the harness's numbers to the device's,
how far off its predictions are for models the device never ran, and their prediction intervals.

A handful of models measured on the real device teaches the fit; the fit then predicts the device's numbers
for models only the harness has run. The candidate fits (`ols`, `relative`, `loglog`, `features`) live in
harness.calibration.fits, the held-out figures and the automatic choice in harness.calibration.choice, the
paired points in harness.calibration.points. Beside them, the OLS line (harness.calibration.line) is kept as the
reference the published experiments use, with its diagnostics, and Spearman ρ and Kendall τ.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property, partial
from typing import Any

import numpy as np
import pandas as pd

from harness.analysis.correlation import rank_correlations
from harness.analysis.run_values import check_metric, harness_values
from harness.calibration.choice import (
    AUTO,
    CHOICE_BAND,
    CONFIDENCE,
    Candidates,
    HeldOut,
    available_fits,
    choose,
    error_stats,
    leave_one_out,
    nested_leave_one_out,
    tied_with_best,
)
from harness.calibration.fits import (
    FACT_NAMES,
    FIT_FACTS,
    FIT_NAMES,
    OP_SPLIT,
    WORK_FACTS,
    Design,
    FittedModel,
    fit_spec,
)
from harness.calibration.least_squares import KERNEL_FACT, LIBRARY_PREFIX
from harness.calibration.line import MIN_POINTS, LineFit, cooks_distance, cooks_threshold, discordant_pairs, fit_line
from harness.calibration.points import (
    counts_note,
    model_facts_table,
    no_match_reason,
    paired_points,
    repeats_note,
    threads_note,
)
from harness.calibration.prediction import (
    KERNEL_FIGURE,
    Intervals,
    Prediction,
    float_or_none,
    missing_facts_note,
    unbounded_note,
)
from harness.calibration.reach import Reach, widen
from harness.calibration.transfer import Library
from harness.core import metric_registry
from harness.core.errors import ConfigError, DataError
from harness.core.records import RunRecord
from harness.device.data import DeviceData
from harness.device.library import METRIC as LIBRARY_METRIC
from harness.kernels.evidence import kernel_evidence
from harness.models.families import model_family
from harness.models.identity import graph_twins


def group_label(group: dict[str, Any]) -> str:
    """`cpus=2, family=mobilenet_v1`: numbers without a trailing `.0`."""
    parts = [f"{key}={value:g}" if isinstance(value, float) else f"{key}={value}" for key, value in group.items()]
    return ", ".join(parts) or "all groups"


AUTO_CANDIDATES = Candidates()
"""The fits `auto` chooses among: every fit, and below FEW_MODELS models only FEW_MODEL_FITS, as the
leave-one-table-out benchmark chose (benchmarks/calibration_tables.py)."""


class NothingToFit(DataError):
    """No metric and group of a device has MIN_POINTS models measured on both sides."""


ACROSS_FAMILIES = "across families"
"""The row of Calibration.by_family over every model."""
BEYOND_REACH = "beyond the calibration models' reach (leverage above 3p/n)"
"""How `regress` and `predict` name a model that a within-reach-only fit (FittedModel.beyond_reach) leaves to
another fit."""


@dataclass
class Calibration:
    """One fitted metric × group: the points, the chosen fit, every candidate's held-out figures, and the OLS
    reference line with its diagnostics."""

    metric: str
    group: dict[str, Any]
    reference_line: LineFit
    """The OLS line of the published experiments, with its diagnostics (harness.calibration.line): a reference beside
    the chosen fit, never what predicts."""
    model: FittedModel
    """The chosen fit (or the one forced with --fit): what predicts."""
    fact_names: tuple[str, ...]
    points: pd.DataFrame
    stats: dict[str, float]
    comparison: list[dict[str, Any]]
    choice: dict[str, Any]
    flipped_pairs: list[tuple[str, str]]
    threads: str = ""
    harness_value: str = ""  # how each model's repeats became its harness value (repeats_note)
    beyond: FittedModel | None = None
    """The fit for models beyond the chosen fit's reach, when that one is used within reach only."""
    held_out: HeldOut | None = None
    """The held-out predictions reported (nested for `auto`), in the order of `points`."""
    twins: dict[str, str] = field(default_factory=dict)
    """Harness model → the zoo model whose graph it is (harness.models.identity.graph_twins): its family."""
    evidence: pd.DataFrame | None = None
    """The device library's latencies of every profiled model at this group (harness.calibration.transfer), by harness
    model: the `library` fit's facts for models to predict."""
    kernel_table: str = ""
    """The device's kernel table, whose predictions the `kernels` fit reads (empty without one)."""

    @property
    def label(self) -> str:
        return group_label(self.group)

    def facts_for(self, facts: pd.DataFrame) -> pd.DataFrame:
        """The models' facts (by harness model) with this group's library evidence beside them."""
        return facts if self.evidence is None else facts.join(self.evidence, how="outer")

    def design(self, harness: Any, facts: pd.DataFrame | None = None, models: Any = ()) -> Design:
        """The fits' input for other models: harness values and, by harness model, the same facts (NaN where a
        model lacks one) and the models' families (when their names are given)."""
        harness = np.asarray(harness, dtype=float).reshape(-1)
        families = tuple(model_family(self.twins.get(str(name), str(name))) for name in models)
        if not self.fact_names or facts is None:
            return Design(harness, families=families)
        return Design(harness, facts.reindex(columns=list(self.fact_names)).to_numpy(float), self.fact_names, families)

    @cached_property  # asked by every predictions() call, and a search loop makes thousands
    def reach(self) -> Reach:
        """What the calibration models span: harness values, op mix, families."""
        return Reach.of(points_design(self.points))

    def intervals(self, design: Design) -> Intervals:
        """Per model: the fit that predicts it (the chosen one, or `beyond` for a model beyond its reach), the
        prediction, its 95% interval (widened outside the calibration models' reach) and why it is outside; as
        arrays, for a search loop's thousands of models."""
        fits = np.full(len(design), self.model.name, dtype=object)
        yhat, low, high = self.model.interval(design, CONFIDENCE)
        if self.beyond is not None:
            far = np.flatnonzero(self.model.beyond_reach(design))
            fits[far] = self.beyond.name
            yhat[far], low[far], high[far] = self.beyond.interval(design.take(far), CONFIDENCE)
        reasons, spreads = self.reach.spreads(design)
        low, high = widen(yhat, low, high, spreads)
        return Intervals(fits, yhat, low, high, reasons)

    def predict(self, design: Design, models: Sequence[str]) -> list[Prediction]:
        """The predictions for the models of `design`, named `models` (harness model names). A model without a fact
        the chosen fit reads (static facts, the per-op split) gets none, and a note saying so."""
        found = self.intervals(design)
        used = self.model.fact_names
        known = np.isfinite(design.select(used)).all(axis=1) if used else np.ones(len(design), dtype=bool)
        names = self.points["harness_model" if "harness_model" in self.points else "model"]
        on_device = dict(zip(names, self.points["device"], strict=True))
        carried = tuple(d["device"] for d in self.library_devices())
        span = (float(self.reference_line.x_min), float(self.reference_line.x_max))
        out = []
        for i, name in enumerate(models):
            fit, value = str(found.fits[i]), float(design.harness[i])
            unpredicted = Prediction(
                model=str(name), metric=self.metric, group=self.group, fit=self.model.name, harness=value,
                harness_figure=self.harness_value, predicted=None, pi_low=None, pi_high=None,
                measured_on_device=float_or_none(on_device.get(name)), out_of_range=not span[0] <= value <= span[1],
                calibrated_range=span, note=missing_facts_note(self.model))
            yhat, low, high = float(found.predicted[i]), float(found.low[i]), float(found.high[i])
            if not known[i] or (why := unbounded_note(fit, len(self.points), yhat, low, high)):
                out.append(unpredicted if not known[i] else replace(unpredicted, fit=fit, note=why))
                continue
            if fit == "kernels":  # the value that fit reads: the kernel table's, not the harness's
                unpredicted = replace(unpredicted, harness=float(design.select((KERNEL_FACT,))[i, 0]),
                                      harness_figure=KERNEL_FIGURE, kernel_table=self.kernel_table)
            out.append(replace(
                unpredicted, fit=fit, predicted=yhat, pi_low=low, pi_high=high, outside=tuple(found.outside[i]),
                library_devices=carried if fit == "library" else (),
                note="" if fit == self.model.name else f"{BEYOND_REACH}: predicted by {fit}, not by "
                f"{self.model.name}, which was tuned among them"))
        return out

    def by_family(self) -> list[dict[str, Any]]:
        """The held-out figures (nested for `auto`) per family, then across families: within ±10% and ±20%, and
        the share inside the 95% interval. Empty without held-out predictions."""
        if "loo_predicted" not in self.points or "family" not in self.points:
            return []
        subsets = [(str(family), self.points[self.points["family"] == family])
                   for family in sorted(set(self.points["family"]))]
        rows = []
        for family, subset in [*subsets, (ACROSS_FAMILIES, self.points)]:
            y = subset["device"].to_numpy(float)
            figures = error_stats(y, subset["loo_predicted"].to_numpy(float))
            inside = (subset["loo_low"] <= subset["device"]) & (subset["device"] <= subset["loo_high"])
            rows.append({"family": family, "n": len(subset), "within_10pct": figures["within_10pct"],
                         "within_20pct": figures["within_20pct"], "coverage": float(inside.mean())})
        return rows

    def library_devices(self) -> list[dict[str, Any]]:
        """The library devices the chosen fit reads, most weight first: each one's exponent, how alike it is to the
        device on the calibration models (Pearson r of the log latencies)."""
        if self.model.name != "library" or not self.model.fact_names:
            return []
        log_device = np.log(self.points["device"].to_numpy(float))
        rows = []
        for name, exponent in zip(self.model.fact_names, self.model.exponents, strict=True):
            log_library = np.log(self.points[name].to_numpy(float))
            rows.append({"device": name.removeprefix(LIBRARY_PREFIX), "exponent": float(exponent),
                         "r": float(np.corrcoef(log_device, log_library)[0, 1])})
        return sorted(rows, key=lambda row: -abs(row["exponent"]))


def _positive(points: pd.DataFrame, name: str) -> bool:
    """Whether every point has the fact `name`, finite and above zero (what a log of it needs)."""
    return name in points and bool(np.all(np.isfinite(points[name].to_numpy(float))) and (points[name] > 0).all())


def points_design(points: pd.DataFrame) -> Design:
    """Harness values plus the facts every point has: static facts, the kernel table's and the library's latencies
    (positive and finite), the per-op split (a share) and the work per operator kind (finite)."""
    names = tuple(name for name in FACT_NAMES if _positive(points, name))
    if OP_SPLIT in points and points[OP_SPLIT].between(0, 1).all():
        names += (OP_SPLIT,)
    if all(name in points for name in WORK_FACTS) and np.all(np.isfinite(points[list(WORK_FACTS)].to_numpy(float))):
        names += WORK_FACTS
    if _positive(points, KERNEL_FACT):
        names += (KERNEL_FACT,)
    names += tuple(name for name in points.columns if str(name).startswith(LIBRARY_PREFIX) and _positive(points, name))
    facts = points[list(names)].to_numpy(float) if names else np.empty((len(points), 0))
    families = tuple(points["family"]) if "family" in points else ()
    return Design(points["harness"].to_numpy(float), facts, names, families)


def _comparison(reasons: dict[str, str | None], held: dict[str, HeldOut | None], nested: HeldOut | None,
                chosen: str, y: np.ndarray) -> list[dict[str, Any]]:
    """One row per candidate (held-out figures, or why there are none), then the nested automatic choice."""
    rows = []
    for name in FIT_NAMES:
        h = held.get(name)
        note = reasons[name] or ("" if h is not None else "too few models for leave-one-out")
        rows.append({"fit": name, "what": fit_spec(name).what, **(h.figures(y) if h else {}), "chosen": name == chosen,
                     "note": note})
    if nested is not None:
        picks = ", ".join(f"{name} {count}" for name, count in Counter(nested.picks).most_common())
        rows.append({"fit": AUTO, "what": "the choice remade inside each fold (nested leave-one-out)",
                     **nested.figures(y), "chosen": False, "note": f"picked per fold: {picks}"})
    return rows


def _add_novel(comparison: list[dict[str, Any]], design: Design, y: np.ndarray, models: list[str],
               novel: Callable[[str], pd.DataFrame] | None, candidates: Candidates) -> None:
    """`within_10pct_novel` on every row: a fit that reads no library evidence, or any fit where there is none, does
    not see whether the model is in a library table, so its figure is its own; with evidence, `library` and the
    nested choice are refitted with each held-out model removed from every table."""
    from harness.calibration.transfer import novel_held_out

    for row in comparison:
        name = row["fit"]
        if name not in ("library", AUTO) or novel is None or not design.library_names:
            row["within_10pct_novel"] = row.get("within_10pct")
            continue
        held = novel_held_out(design, y, models, novel, candidates, fit=None if name == AUTO else name)
        row["within_10pct_novel"] = None if held is None else held.figures(y)["within_10pct"]


def _choice_reason(held: dict[str, HeldOut | None], chosen: str | None, y: np.ndarray) -> str:
    """Why the automatic choice fell where it did: every fit's share, and the ties broken by MAPE."""
    figures = {name: h.figures(y) for name, h in held.items() if h}
    band = f"within_{round(CHOICE_BAND * 100)}pct"  # a share error_stats always gives
    shares = {name: share for name, f in figures.items() if (share := f[band]) is not None}
    best = max(shares.values())
    others = ", ".join(f"{name} {share:.0%}" for name, share in shares.items() if name != chosen)
    text = f"most held-out models within ±{CHOICE_BAND:.0%} ({best:.0%}; {others or 'no other fit'})"
    tied = tied_with_best({name: h.predicted for name, h in held.items() if h}, y)
    if len(tied) < 2 or chosen is None:  # two tied fits always give a choice
        return text
    if shares[chosen] < best:
        text = (f"{shares[chosen]:.0%} of held-out models within ±{CHOICE_BAND:.0%}, within one standard error of "
                f"the most ({others})")
    mapes = ", ".join(f"{name} {figures[name]['mape_pct']:.1f}%" for name in tied)
    return f"{text}; tied within one standard error, so the smallest held-out MAPE decides, then the simpler fit " \
        f"({mapes})"


def not_a_candidate(name: str, candidates: Candidates, n: int) -> str:
    """Why the automatic choice does not take `name`."""
    if name in candidates.names:
        return f"not a candidate below {candidates.few_models} models (only {', '.join(candidates.among(n))})"
    return "not among the automatic choice's candidates"


def calibrate_points(metric: str, group: dict[str, Any], points: pd.DataFrame, fit: str = AUTO,
                     figures: bool = True, candidates: Candidates = AUTO_CANDIDATES,
                     novel: Callable[[str], pd.DataFrame] | None = None) -> Calibration:
    """Fit one group. `points` needs columns model, harness, device (and the FACT_NAMES the `features` fit
    uses, the `library:` evidence the `library` fit uses); the rest is carried along. `fit` is `auto` or a fit's
    name; `auto` chooses among `candidates`. `figures=False` skips the nested held-out figures of `auto`, every fit's
    held-out intervals and the rank statistics (the fit is chosen the same way), for callers that only predict.
    `novel(harness_model)` gives the library's evidence without that model in any table: with it, every fit's
    held-out figures gain `within_10pct_novel`, the share within ±10% when the held-out model is in no library table
    (harness.calibration.transfer.novel_held_out)."""
    points = points.sort_values("harness").reset_index(drop=True)
    x, y = points["harness"].to_numpy(float), points["device"].to_numpy(float)
    line = fit_line(x, y)
    design = points_design(points)
    among = candidates.among(len(y))
    reasons = {name: reason if fit != AUTO or name in among else not_a_candidate(name, candidates, len(y))
               for name, reason in available_fits(design, y).items()}
    if fit != AUTO and reasons[fit_spec(fit).name]:
        raise DataError(f"--fit {fit}: {metric} {group_label(group)}: {reasons[fit]}; choose another fit")
    held = {name: leave_one_out(fit_spec(name), design, y, intervals=figures)
            for name, reason in reasons.items() if reason is None}
    if all(h is None for h in held.values()):
        raise DataError("leaving one model out leaves identical harness values; profile more distinct models")
    if fit == AUTO:
        chosen = choose({name: h.predicted for name, h in held.items() if h is not None}, y)
        reported = nested_leave_one_out(design, y, candidates) if figures else None
        choice: dict[str, str | None] = {"mode": AUTO, "reason": _choice_reason(held, chosen, y)}
        if chosen and fit_spec(chosen).within_reach_only:
            beyond = choose({name: h.predicted for name, h in held.items()
                             if h is not None and not fit_spec(name).within_reach_only}, y)
            choice["beyond_reach"] = beyond
            choice["reason"] = (f"{choice['reason']}; a model {BEYOND_REACH} is predicted by {beyond}, the best of "
                                f"the others, since {chosen} was tuned among them")
    else:
        chosen, reported = fit, held.get(fit)
        choice = {"mode": "forced", "reason": f"forced with --fit {fit}"}
    if chosen is None or (model := fit_spec(chosen).train(design, y)) is None:
        raise DataError(f"--fit {fit}: {metric} {group_label(group)}: cannot be trained on these {len(y)} models "
                        "(identical harness values or collinear facts); choose another fit")
    fitted = model.predict(design)
    cooks = cooks_distance(line, x, y)
    columns = {"fitted": fitted, "error_pct": 100 * (fitted - y) / y}
    if reported is not None:
        columns.update(loo_predicted=reported.predicted, loo_low=reported.low, loo_high=reported.high,
                       loo_error_pct=100 * (reported.predicted - y) / y, loo_outside=reported.outside > 0)
    columns.update({f"loo_{name}": h.predicted for name, h in held.items() if h is not None})
    points = points.assign(**columns, cooks_d=cooks, influential=cooks > cooks_threshold(len(x)))
    fitted_stats = error_stats(y, fitted)
    summary = {
        "rmse": fitted_stats["rmse"],
        "mape_pct": fitted_stats["mape_pct"],
        **({f"loo_{key}": value for key, value in reported.figures(y).items()} if reported is not None else {}),
        **(rank_correlations(x, y) if figures else {}),
        "cooks_threshold": cooks_threshold(len(x)),
    }
    comparison = _comparison(reasons, held, reported if fit == AUTO else None, chosen, y)
    if figures:
        models = points["harness_model" if "harness_model" in points else "model"].astype(str).tolist()
        _add_novel(comparison, design, y, models, novel, candidates)
    names = points["model"].astype(str).tolist()
    beyond_name = choice.get("beyond_reach")
    return Calibration(metric, group, line, model, design.fact_names, points, summary, comparison,
                       {**choice, "chosen": chosen}, discordant_pairs(names, x, y),
                       beyond=fit_spec(beyond_name).train(design, y) if beyond_name else None, held_out=reported)


@dataclass
class CalibrationSet:
    """Every fitted group of one device, what could not be fitted and why, the unmatched models, and the
    harness models' static facts (for predictions by the `features` fit)."""

    device: str
    group_by: str
    calibrations: list[Calibration]
    skipped: list[dict[str, Any]] = field(default_factory=list)
    unmatched_device_models: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    facts: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(FIT_FACTS)))

    def predict(self, values_by_metric: dict[str, pd.DataFrame], models: list[str]) -> list[Prediction]:
        """Device predictions with 95% prediction intervals for `models` (harness values in `values_by_metric`, as
        calibrate_runs gives them), from every fitted group's chosen fit, each noting where its harness value is a
        minimum over another count of values than the calibration models' (points.counts_note)."""
        out = []
        for calibration in self.calibrations:
            measured = values_by_metric[calibration.metric]
            at_cpus = measured[(measured["cpus"] == calibration.group["cpus"]) & measured["model_name"].isin(models)]
            names = at_cpus["model_name"].tolist()
            design = calibration.design(at_cpus["value"], calibration.facts_for(self.facts).reindex(names), names)
            for prediction, over, across in zip(calibration.predict(design, names), at_cpus["over"],
                                                at_cpus["across"], strict=True):
                note = counts_note(over, calibration.points["harness_over"], across) or ""
                out.append(replace(prediction, device=self.device, counts_note=note))
        return out


def calibrate_device(
    device: DeviceData, values_by_metric: dict[str, pd.DataFrame], group_by: str = "cpus",
    facts: pd.DataFrame | None = None, fit: str = AUTO, library: Library | None = None,
    twins: dict[str, str] | None = None,
) -> CalibrationSet:
    """Fit every metric × group with at least MIN_POINTS matched models; raise when none has. With a `library`, the
    latency groups also read its tables' evidence (the `library` fit) and report novel-model figures. `twins`: the
    profiled models whose graph is a zoo model's, under that name in the device's and the library's tables."""
    twins = twins or {}
    if group_by != "cpus" and group_by not in device.tags:
        choices = ", ".join(["cpus", *device.tags]) or "cpus"
        raise ConfigError(f"--group-by {group_by}: device {device.name} has no such column; choose one of: {choices}")
    if fit != AUTO and fit not in FIT_NAMES:
        raise ConfigError(f"--fit {fit}: unknown fit; choose {AUTO} or one of: {', '.join(FIT_NAMES)}")
    facts = facts if facts is not None else pd.DataFrame(columns=list(FIT_FACTS), dtype=float)
    result = CalibrationSet(device.name, group_by, [], facts=facts)
    keys = ["cpus"] if group_by == "cpus" else ["cpus", group_by]
    matched: set[str] = set()
    for metric, measured in values_by_metric.items():
        points = paired_points(device, measured, metric, group_by, twins)
        if points.empty:
            result.skipped.append({"metric": metric, "group": {}, "n": 0, "reason": no_match_reason(device, measured)})
            continue
        points = points.join(facts, on="harness_model")
        matched.update(points["model"])
        for values, group_points in points.groupby(keys, sort=True):
            group = dict(zip(keys, values, strict=True))
            models = group_points["model"].tolist()
            evidence, novel = None, None
            if library is not None and library.tables and metric == LIBRARY_METRIC:
                harness = measured[measured["cpus"] == group["cpus"]].groupby("model_name")["value"].median()
                evidence = library.evidence(harness, twins=twins)
                group_points = group_points.join(evidence, on="harness_model")
                novel = partial(library.evidence, harness, twins=twins)
            try:
                calibration = calibrate_points(metric, group, group_points, fit, novel=novel)
                calibration.evidence, calibration.twins = evidence, twins
                calibration.kernel_table = library.kernels.name if library and library.kernels else ""
            except DataError as err:
                reason = f"{len(models)} matched models" if len(models) < MIN_POINTS else str(err)
                result.skipped.append({"metric": metric, "group": group, "n": len(models), "models": models,
                                       "reason": reason})
                continue
            calibration.threads = threads_note(device, group["cpus"])
            calibration.harness_value = repeats_note(measured, group_points["harness_n"])
            result.calibrations.append(calibration)
    result.unmatched_device_models = sorted(set(device.table["model"]) - matched)
    if not result.calibrations:
        detail = "; ".join(
            f"{s['metric']} {group_label(s['group'])}: {s['reason']}" for s in result.skipped
        ) or "no metric in common"
        few = any(s["n"] < MIN_POINTS for s in result.skipped)
        raise NothingToFit(
            f"device {device.name}: nothing to fit ({detail})" + (
                f"; calibration needs at least {MIN_POINTS} models measured both on the device and by the harness: "
                "profile more of the device's models, or map names with a harness_model column" if few else "")
        )
    return result


def calibrated_metrics(device: DeviceData, metric: str | None = None) -> list[str]:
    """The metrics both the device data and the harness have (or the one asked for, checked)."""
    allowed = metric_registry.calibrated()
    common = [m.name for m in allowed if m.name in device.metrics]
    if metric is not None:
        metric = check_metric(metric, lambda m: m.calibrated)
        if metric not in device.metrics:
            raise ConfigError(
                f"--metric {metric}: device {device.name} has no {metric} column (it has: {', '.join(device.metrics)})"
            )
        return [metric]
    if not common:
        raise DataError(
            f"device {device.name} has no column the harness measures ({', '.join(device.metrics)}); "
            f"name one of: {', '.join(m.name for m in allowed)}"
        )
    return common


def calibrate_runs(
    device: DeviceData, runs: list[RunRecord], metric: str | None = None, group_by: str = "cpus",
    fit: str = AUTO, across: str | None = None, library: Library | None = None,
) -> tuple[CalibrationSet, dict[str, pd.DataFrame]]:
    """Calibrate `device` against harness runs; also returns the per-model harness values used (for prediction):
    each model's repeats summarised as `across` says, by default as the metric's registry entry says. A device
    metric is paired with its registry entry's harness side (energy with latency)."""
    values = {name: harness_values(runs, metric_registry.get(name).harness_side, across)
              for name in calibrated_metrics(device, metric)}
    names = set(device.table["model"]) | {str(model) for table in (library.tables if library else ())
                                          if not table.column for model in table.values.index}
    paths = {run.model_name: run.model.get("model_path") for run in runs if run.model_name}
    twins = graph_twins(paths, names)
    facts = model_facts_table(runs)
    if library is not None and library.kernels is not None:
        families = {name: model_family(twins.get(name, name)) for name in paths}
        facts[KERNEL_FACT] = kernel_evidence(library.kernels, paths, families).reindex(facts.index)
    return calibrate_device(device, values, group_by, facts, fit, library, twins), values
