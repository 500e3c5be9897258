"""Held-out figures of every calibration fit, and the automatic choice between them.

Leave-one-out: each model is predicted, with its 95% prediction interval, by a fit trained on all the
others, which is the honest error for a model the device has never run. Every fit is retrained from scratch
in each fold, the `features` fit's ridge strength included.

The automatic choice takes the fit with the largest leave-one-out share within ±10%. A share within one standard
error of the best (paired, as McNemar's test pairs them) is a tie, since a count of 5 to 20 models moves by a
model or two on noise; ties go to the smallest leave-one-out MAPE, which weighs every error rather than which
side of 10% it fell, and then to the simpler fit, in the order of harness.calibration.fits.FITS.

The figures reported for that choice are *nested* (Varma & Simon 2006; Cawley & Talbot 2010): in each outer
fold the choice is made again from the inner leave-one-out of the remaining models only, and the chosen fit
then predicts the left-out model. Reporting the winner's own leave-one-out share instead would flatter it,
since it was picked for being high.

Every held-out interval is judged the way `predict` gives it: a held-out model outside the reach of its fold's
models (harness.calibration.reach: harness value, op mix, family) gets the widened interval.

A model beyond the reach of the calibration models (FittedModel.beyond_reach: a leverage above 3p/n in the
`features` fit) is not predicted by that fit: its ridge strength is chosen by leave-one-out among those models,
which tests interpolation only, and its fact exponents can be far off beyond them. The choice for such a model
is made among the other fits, inside each fold as well, from what is known of the model before its device
value is.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from harness.calibration.fits import (
    FIT_NAMES,
    FITS,
    Design,
    FitSpec,
    FittedModel,
    exact_loo,
    fit_spec,
    unavailable_reason,
)
from harness.calibration.reach import Reach, widen

AUTO = "auto"
CONFIDENCE = 0.95
FEW_MODELS = 10
"""Below this many calibration models, the automatic choice takes only FEW_MODEL_FITS: on a handful of models every
difference between fits is a tie or noise, and the fits with facts or per-op splits overfit them. Chosen by
leave-one-table-out on the learning curves (benchmarks/calibration_tables.py) of one session; a second session chose
0 (mean curve scores of 10 against 0: 77% and 70% on the first, 82% and 86% on the second; docs/calibration.md)."""
FEW_MODEL_FITS: tuple[str, ...] = ("relative", "loglog", "kernels", "library")
"""The fits that weigh every model by its relative error and read nothing but the harness value, or one number the
device's own kernel table predicts, or the harness value and the device library's latencies of the same models
(another device's measurements, not facts to learn a weight per kind from)."""
WITHIN_BANDS: tuple[float, ...] = (0.10, 0.20)
"""Held-out relative errors are reported as the share of models within ±10% and ±20% of the device."""
CHOICE_BAND = WITHIN_BANDS[0]
ROUNDING = 1e-12
"""Relative errors this close to a band's edge count as inside it (exact data predicted through rounding)."""


@dataclass(frozen=True)
class HeldOut:
    """Leave-one-out predictions and 95% intervals of one fit (or of the nested choice, with its per-fold picks).
    `fit_low` and `fit_high` are the fit's own interval; `outside` is the extra spread of each model that lay outside
    the reach of the models its fold was trained on (0 inside), by which `low` and `high` widen
    (harness.calibration.reach)."""

    name: str
    predicted: np.ndarray
    fit_low: np.ndarray
    fit_high: np.ndarray
    outside: np.ndarray
    picks: tuple[str, ...] = ()

    def interval(self, spread: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(low, high) with the models outside their fold's reach widened by their own spread, or all by `spread`."""
        spreads = self.outside if spread is None else np.where(self.outside > 0, spread, 0.0)
        return widen(self.predicted, self.fit_low, self.fit_high, spreads)

    @property
    def low(self) -> np.ndarray:
        return self.interval()[0]

    @property
    def high(self) -> np.ndarray:
        return self.interval()[1]

    def figures(self, y: np.ndarray) -> dict[str, float | None]:
        """Shares within each band, MAPE (%), RMSE, Kendall τ (held-out prediction vs device) and the share of
        models inside their interval (None when no fold could give one). A prediction at or below zero, which has no
        interval (FittedModel.interval), counts as outside its interval."""
        out: dict[str, float | None] = {**error_stats(y, self.predicted)}
        low, high = self.interval()
        finite = (np.isfinite(low) & np.isfinite(high)) | (self.predicted <= 0)
        inside = (low <= y) & (y <= high)
        out["coverage"] = float(np.mean(inside[finite])) if finite.any() else None
        tau = stats.kendalltau(self.predicted, y).statistic if len(y) > 1 else np.nan
        out["kendall_tau"] = float(tau)
        return out


def error_stats(actual: np.ndarray, predicted: np.ndarray) -> dict[str, float]:
    """RMSE, MAPE (%) and the share of predictions within each WITHIN_BANDS relative error."""
    actual = np.asarray(actual, dtype=float)
    predicted = np.asarray(predicted, dtype=float)
    relative = _relative_errors(predicted, actual)
    with np.errstate(over="ignore"):  # a wild fold's prediction past 1e154 ms: its RMSE is inf, and says so
        rmse = float(np.sqrt(np.mean((predicted - actual) ** 2)))
    out = {"rmse": rmse, "mape_pct": float(100 * np.mean(relative))}
    for band in WITHIN_BANDS:
        out[f"within_{round(band * 100)}pct"] = float(np.mean(_within(relative, band)))
    return out


def _relative_errors(predicted: np.ndarray, actual: np.ndarray) -> np.ndarray:
    """|predicted − actual| / |actual| per model (inf or nan where the device value is 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.abs(predicted - actual) / np.abs(actual)


def _within(relative: np.ndarray, band: float) -> np.ndarray:
    """Which relative errors fall within ±band, exact predictions that land on its edge through rounding included."""
    return relative <= band + ROUNDING


def available_fits(design: Design, y: np.ndarray) -> dict[str, str | None]:
    """Every fit's name → why it cannot be used on these models (None: it can)."""
    return {spec.name: unavailable_reason(spec, design, y) for spec in FITS}


def loo_predictions(spec: FitSpec, design: Design, y: np.ndarray) -> np.ndarray | None:
    """Leave-one-out point predictions only (what the choice needs): the exact shortcut for a plain least-squares
    fit, a retrain per fold for a tuned one."""
    if not spec.tuned:
        model = spec.train(design, y)
        return None if model is None else exact_loo(model, design, y)
    held = leave_one_out(spec, design, y, intervals=False)
    return None if held is None else held.predicted


def folds(n: int) -> Iterator[tuple[int, np.ndarray]]:
    """(i, mask of the others) for each of n models: the one place a held-out model is set apart."""
    for i in range(n):
        yield i, np.arange(n) != i


def leave_one_out(spec: FitSpec, design: Design, y: np.ndarray, intervals: bool = True) -> HeldOut | None:
    """`spec` retrained without each model in turn; None when some fold cannot be fitted (too few models,
    or the rest all share one harness value)."""
    n = len(y)
    predicted, low, high, outside = np.empty(n), np.empty(n), np.empty(n), np.zeros(n)
    for i, keep in folds(n):
        model = spec.train(design.take(keep), y[keep])
        if model is None:
            return None
        left_out = design.take(np.array([i]))
        if intervals:
            predicted[i], low[i], high[i], outside[i] = held_out_interval(model, design.take(keep), left_out)
        else:
            predicted[i], low[i], high[i] = model.predict(left_out)[0], np.nan, np.nan
    return HeldOut(spec.name, predicted, low, high, outside)


def held_out_interval(model: FittedModel, trained_on: Design, left_out: Design) -> tuple[float, float, float, float]:
    """One left-out model's prediction, the fit's own 95% interval, and the extra spread its interval takes outside
    the reach of the models the fit was trained on (0 inside)."""
    yhat, low, high = (v[0] for v in model.interval(left_out, CONFIDENCE))
    return yhat, low, high, float(Reach.of(trained_on).spreads(left_out)[1][0])


def _mape(predicted: np.ndarray, y: np.ndarray) -> float:
    """Held-out MAPE as a fraction, rounded so that fits exact to rounding tie (inf when a prediction is not finite)."""
    relative = _relative_errors(predicted, y)
    return round(float(np.mean(relative)), 9) if np.all(np.isfinite(relative)) else np.inf


def tied_with_best(predicted: dict[str, np.ndarray | None], y: np.ndarray,
                   order: Sequence[str] = FIT_NAMES) -> list[str]:
    """The candidates (in `order`, simpler first: FITS's order for fits) whose count within ±10% falls short of the
    best count by at most one standard error of the paired difference: b − c ≤ √(b + c), b and c the models only one
    of the two has within ±10% (McNemar's z ≤ 1). Counts of 5 to 20 models differ by a model or two on noise alone."""
    rank = {name: index for index, name in enumerate(order)}
    within = {name: _within(_relative_errors(p, y), CHOICE_BAND) for name, p in predicted.items() if p is not None}
    if not within:
        return []
    best = within[max(within, key=lambda name: (within[name].sum(), -rank[name]))]
    return [name for name in order if name in within
            and best.sum() - within[name].sum() <= np.sqrt(np.sum(best != within[name]))]


def choose(predicted: dict[str, np.ndarray | None], y: np.ndarray, order: Sequence[str] = FIT_NAMES) -> str | None:
    """Of the candidates tied with the best count within ±10% (tied_with_best), the one with the smallest held-out
    MAPE; equal MAPEs go to the earlier (simpler) one in `order`."""
    tied = tied_with_best(predicted, y, order)
    fitted = {name: p for name, p in predicted.items() if p is not None}  # tied_with_best picks among these
    return min(tied, key=lambda name: _mape(fitted[name], y)) if tied else None


def _usable(design: Design, y: np.ndarray, names: tuple[str, ...]) -> list[FitSpec]:
    reasons = available_fits(design, y)
    return [fit_spec(name) for name in names if reasons[name] is None]


def simplest_trainable(design: Design, y: np.ndarray, names: tuple[str, ...]) -> FittedModel | None:
    """The first fit in FITS order that trains: the choice when there are too few models to compare fits."""
    for spec in _usable(design, y, names):
        model = spec.train(design, y)
        if model is not None:
            return model
    return None


def _reaches(spec: FitSpec, design: Design, y: np.ndarray, query: Design | None) -> bool:
    """Whether `spec` may predict `query`: False only for a within-reach-only fit that, trained on `design`, finds
    `query` beyond its reach."""
    if query is None or not spec.within_reach_only:
        return True
    model = spec.train(design, y)
    return model is None or not model.beyond_reach(query).any()


@dataclass(frozen=True)
class Candidates:
    """The fits the automatic choice takes: `names`, and with fewer than `few_models` calibration models those of
    FEW_MODEL_FITS among them."""

    names: tuple[str, ...] = FIT_NAMES
    few_models: int = FEW_MODELS

    def among(self, n: int) -> tuple[str, ...]:
        """The candidates for a choice made on n models."""
        few = tuple(name for name in self.names if name in FEW_MODEL_FITS)
        return few if n < self.few_models and few else self.names


def candidate_predictions(design: Design, y: np.ndarray, candidates: Candidates,
                          query: Design | None = None) -> dict[str, np.ndarray | None]:
    """Each candidate fit usable on these models and allowed to predict `query` → its leave-one-out predictions
    (None where a fold cannot be fitted): what the automatic choice chooses from."""
    specs = [spec for spec in _usable(design, y, candidates.among(len(y))) if _reaches(spec, design, y, query)]
    return {spec.name: loo_predictions(spec, design, y) for spec in specs}


def select(design: Design, y: np.ndarray, candidates: Candidates, query: Design | None = None) -> str | None:
    """The automatic choice on these models (by their leave-one-out) for predicting `query`, or None when no fit
    trains."""
    predicted = candidate_predictions(design, y, candidates, query)
    chosen = choose(predicted, y)
    if chosen is None:
        fallback = simplest_trainable(design, y, tuple(predicted))
        chosen = None if fallback is None else fallback.name
    return chosen


def nested_leave_one_out(design: Design, y: np.ndarray, candidates: Candidates) -> HeldOut | None:
    """The automatic choice, remade without each model in turn and then predicting it."""
    n = len(y)
    predicted, low, high, outside, picks = np.empty(n), np.empty(n), np.empty(n), np.zeros(n), []
    for i, keep in folds(n):
        rest, rest_y, left_out = design.take(keep), y[keep], design.take(np.array([i]))
        chosen = select(rest, rest_y, candidates, query=left_out)
        if chosen is None:
            return None
        model = fit_spec(chosen).train(rest, rest_y)
        if model is None:
            return None
        picks.append(chosen)
        predicted[i], low[i], high[i], outside[i] = held_out_interval(model, rest, left_out)
    return HeldOut(AUTO, predicted, low, high, outside, tuple(picks))
