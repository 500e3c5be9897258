"""The per-model term of a kernel-sum prediction: what the sum of a model's kernels misses (the executor's work
between kernels, the call itself), fitted on the models a table measured end to end (harness.kernels.predictor)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy.optimize import nnls

LINE_MODELS = 4
"""Models measured end to end that a line in logs of latency on kernel sum needs (latency_term)."""


def model_term(sums: np.ndarray, measured: np.ndarray) -> np.ndarray:
    """(a, b) of measured ≈ a·Σ + b, least squares on relative errors (each model weighs 1/latency), neither negative:
    a time per call is never below zero, so a tiny model is never predicted at nothing."""
    if len(measured) < 4:
        return np.array([median_ratio(sums, measured)[0], 0.0])
    design = np.column_stack([sums, np.ones_like(sums)]) / measured[:, None]
    coef, _ = nnls(design, np.ones_like(measured))
    return np.asarray(coef, dtype=float)


def median_ratio(sums: np.ndarray, measured: np.ndarray) -> tuple[float, float, float]:
    """(c, 1, 0): the median of measured / Σ, latency in proportion to the kernel sum."""
    return float(np.median(measured / sums)), 1.0, 0.0


def log_line(sums: np.ndarray, measured: np.ndarray) -> tuple[float, float, float]:
    """(c, k, 0) of measured ≈ c·Σ^k, least squares in logs."""
    power, log_scale = np.polyfit(np.log(sums), np.log(measured), 1)
    return float(math.exp(log_scale)), float(power), 0.0


def line_and_call(sums: np.ndarray, measured: np.ndarray) -> tuple[float, float, float]:
    """(a, 1, b) of measured ≈ a·Σ + b (model_term): a time per call that a small model's kernels do not hold."""
    a, b = model_term(sums, measured)
    return float(a), 1.0, float(b)


TermForm = Callable[[np.ndarray, np.ndarray], tuple[float, float, float]]
"""A form of measured ≈ a·Σ^k + b, fitted: (a, k, b)."""


def left_out_residuals(sums: np.ndarray, measured: np.ndarray, form: TermForm = median_ratio) -> np.ndarray:
    """Each model's log residual against the term of `form` fitted on the others: how a model the term never saw
    errs."""
    others = [np.arange(len(sums)) != i for i in range(len(sums))]
    terms = [form(sums[mask], measured[mask]) for mask in others] if len(sums) > 1 else []
    return np.array([math.log(measured[i] / max(a * sums[i] ** k + b, 1e-9)) for i, (a, k, b) in enumerate(terms)])


def latency_term(sums: np.ndarray, measured: np.ndarray) -> TermForm:
    """The form of measured ≈ a·Σ^k + b for models whose rows give no whole per-op sum (by_latency): the median ratio
    (k = 1, b = 0), or, with LINE_MODELS models or more, a line in logs (b = 0) or a line with a time per call (k = 1),
    where each model, left out, errs less against it (its median absolute log residual). Which one follows from how
    the sum was made. On this host's ncnn, sums of
    designed kernels alone ran 1.9 times the latency of the largest of a probe's twelve models and 4.6 times the
    smallest's (a small convolution runs slower in a probe graph than in a model), and the line put 2 of the twelve
    within ±10% (median error 19%) where the ratio put none; with the models' convolutions joined to their rows
    (harness.kernels.ncnn_layers), the ratio put 6 (9.7%) and the line 4 (14.3%) (docs/kernels.md)."""
    if len(sums) < LINE_MODELS:
        return median_ratio
    return min((median_ratio, log_line, line_and_call),
               key=lambda form: float(np.median(np.abs(left_out_residuals(sums, measured, form)))))
