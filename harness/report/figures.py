"""Report figures as PNG bytes. matplotlib's object API (Figure + Agg canvas): no pyplot global state, no
display needed, the same pixels in a terminal, CI or a container."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter
from matplotlib.transforms import Bbox

from harness.analysis.ranking import RankEntry
from harness.calibration.calibrate import Calibration
from harness.calibration.choice import CONFIDENCE
from harness.calibration.fits import Design

FIT_COLOR = "#d62728"
ROBUST_COLOR = "#7f7f7f"
POINT_COLOR = "#1f77b4"
INFLUENTIAL_COLOR = "#ff7f0e"
PARETO_COLOR = "#2ca02c"
"""The non-dominated models of the answer's Pareto chart; the screenshot test looks for this colour."""
DOMINATED_COLOR = "#9a9a9a"
LOG_SPAN = 10.0
"""An axis whose positive values span more than this factor is drawn on a log scale: on a linear one, one large
model squashes the others into a corner."""
DPI = 110
LINE_STYLES = ("-", "--", ":", "-.")
MAX_LABELS = 10
"""Every point is labelled with its model name up to this many points; beyond, labels would overlap, so only
influential points are (the tables name every point)."""


def _png(figure: Figure) -> bytes:
    FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight")
    return buffer.getvalue()


def log_if_wide(ax: Any, axis: str, values: Any) -> bool:
    """Switch `axis` ('x' or 'y') to a log scale when its values span more than LOG_SPAN; say whether it did."""
    finite = np.asarray([v for v in np.asarray(values, dtype=float).ravel() if np.isfinite(v)])
    wide = finite.size > 1 and finite.min() > 0 and finite.max() / finite.min() > LOG_SPAN
    if wide:
        target = ax.xaxis if axis == "x" else ax.yaxis
        (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
        target.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))  # 0.1, 1, 10 rather than 10⁰
    return bool(wide)


def _scaled(label: str, log: bool) -> str:
    return f"{label} (log scale)" if log else label


LABEL_OFFSETS = ((6, 5), (6, -11), (-6, 5), (-6, -11), (6, 14), (6, -20), (-6, 14), (-6, -20))
"""Where a point's name may go (points from the point), tried in order until it overlaps nothing placed."""


def _place_labels(renderer: RendererAgg, ax: Any, points: pd.DataFrame, taken: list[Any]) -> None:
    """Name the non-dominated models first, then the others while a free spot is left: a name that would overlap
    another name, the legend or a point is moved, and a dominated model's name is dropped if nowhere fits."""
    order = points.sort_values("non_dominated", ascending=False)
    for row in order.itertuples():
        if not row.non_dominated and len(points) > MAX_LABELS:
            continue
        style = {"fontsize": 8, "color": "black"} if row.non_dominated else {"fontsize": 7, "color": "#666666"}
        for index, (dx, dy) in enumerate(LABEL_OFFSETS):
            label = ax.annotate(str(row.model), (row.x, row.y), xytext=(dx, dy), textcoords="offset points",
                                ha="left" if dx > 0 else "right", **style)
            box = label.get_window_extent(renderer)
            inside = ax.get_window_extent(renderer).contains(box.x0, box.y0) and \
                ax.get_window_extent(renderer).contains(box.x1, box.y1)
            if inside and not any(box.overlaps(other) for other in taken):
                taken.append(box)
                break
            last = index == len(LABEL_OFFSETS) - 1
            if not (last and row.non_dominated):
                label.remove()


def pareto_chart(points: pd.DataFrame, x_label: str, y_label: str, title: str) -> bytes:
    """Latency (x) against peak memory (y), one point per model; `size_mib` (when known) sets the marker area.

    `points` has columns model, x, y, size_mib (may be NaN) and non_dominated (bool). Non-dominated models
    are green, named and joined by the frontier's steps; the others are grey, named where there is room.
    """
    figure = Figure(figsize=(6.4, 4.0))
    canvas = FigureCanvasAgg(figure)
    ax = figure.add_subplot()
    sizes = points["size_mib"].astype(float)
    known = sizes.notna().any()
    area = (30 + 250 * sizes / sizes.max()).fillna(40).to_numpy() if known else np.full(len(points), 40.0)
    best = points["non_dominated"].to_numpy(bool)
    dots = [ax.scatter(points["x"][~best], points["y"][~best], s=area[~best], color=DOMINATED_COLOR, alpha=0.6,
                       edgecolors="white", zorder=2, label="dominated"),
            ax.scatter(points["x"][best], points["y"][best], s=area[best], color=PARETO_COLOR, edgecolors="black",
                       linewidths=0.6, zorder=3, label="non-dominated")]
    frontier = points[best].sort_values("x")
    ax.step(frontier["x"], frontier["y"], where="post", color=PARETO_COLOR, linewidth=1.5, alpha=0.8, zorder=1)
    x_log = log_if_wide(ax, "x", points["x"])
    y_log = log_if_wide(ax, "y", points["y"])
    ax.margins(0.15)
    ax.set_xlabel(_scaled(x_label, x_log))
    ax.set_ylabel(_scaled(y_label, y_log))
    ax.set_title(title + ("\nmarker area: model size" if known else ""), fontsize=10)
    ax.grid(alpha=0.3, which="both")
    legend = ax.legend(fontsize=8, loc="upper left")
    canvas.draw()  # lays out limits and legend, so names can be placed around what is drawn
    renderer = canvas.get_renderer()
    taken = [legend.get_window_extent(renderer)]
    for dot in dots:  # each point's own square, so no name covers a point
        for x, y in np.asarray(dot.get_offsets()):
            cx, cy = ax.transData.transform((x, y))
            taken.append(Bbox.from_extents(cx - 4, cy - 4, cx + 4, cy + 4))
    _place_labels(renderer, ax, points, taken)
    return _png(figure)


BAND_COLOR = "#2ca02c"


def equation(calibration: Calibration) -> str:
    share = calibration.stats.get("loo_within_10pct")
    held_out = "" if share is None else f", held-out within ±10%: {share:.0%}"
    return f"{calibration.model.name}: {calibration.model.equation}   (n = {calibration.reference_line.n}{held_out})"


def _grid(x: np.ndarray, log: bool) -> np.ndarray:
    if log:
        return np.geomspace(x.min() / 1.1, x.max() * 1.1, 200)
    span = x.max() - x.min()
    return np.linspace(x.min() - 0.05 * span, x.max() + 0.05 * span, 200)


def calibration_scatter(calibration: Calibration, device: str) -> bytes:
    """Device vs harness with the chosen fit, its 95% prediction band and a ±10% band around it (the OLS line
    dashed for reference). A `features` or `ops` fit depends on more than the harness value: its fitted values and
    intervals are drawn at each model instead of as a curve. Log axes when the values span more than 10×."""
    points, model = calibration.points, calibration.model
    x, y = points["harness"].to_numpy(float), points["device"].to_numpy(float)
    figure = Figure(figsize=(7, 5))
    ax = figure.add_subplot()
    both = np.concatenate([x, y])  # one scale for both axes, so that a power law is a straight line
    log = log_if_wide(ax, "x", both) and log_if_wide(ax, "y", both)
    grid = _grid(x, log)
    if not calibration.model.fact_names:
        yhat, low, high = model.interval(Design(grid), CONFIDENCE)
        ax.fill_between(grid, low, high, color=FIT_COLOR, alpha=0.10, linewidth=0, label="95% prediction interval")
        ax.fill_between(grid, 0.9 * yhat, 1.1 * yhat, color=BAND_COLOR, alpha=0.18, linewidth=0, label="fit ±10%")
        ax.plot(grid, yhat, color=FIT_COLOR, linewidth=2, label=f"{model.name} fit")
    else:
        design = calibration.design(x, points.set_index("harness_model")[list(calibration.fact_names)])
        yhat, low, high = model.interval(design, CONFIDENCE)
        ax.errorbar(x, yhat, yerr=[yhat - low, high - yhat], fmt="x", color=FIT_COLOR, capsize=2,
                    label=f"{model.name} fit, 95% prediction interval")
        ax.errorbar(x, yhat, yerr=[0.1 * yhat, 0.1 * yhat], fmt="none", color=BAND_COLOR, elinewidth=6, alpha=0.3,
                    label="fit ±10%")
    if model.name != "ols":
        ols = calibration.reference_line
        ax.plot(grid, ols.predict(grid), color=ROBUST_COLOR, linestyle="--", linewidth=1, label="OLS (reference)")
    influential = points["influential"].to_numpy(bool)
    ax.scatter(x[~influential], y[~influential], color=POINT_COLOR, zorder=3, label="models")
    if influential.any():
        ax.scatter(x[influential], y[influential], color=INFLUENTIAL_COLOR, zorder=3, marker="D",
                   label="influential on OLS (Cook's D > 4/n)")
    for row in points.itertuples():
        if len(points) <= MAX_LABELS or row.influential:
            ax.annotate(str(row.model), (row.harness, row.device), fontsize=6, xytext=(3, 3),
                        textcoords="offset points", alpha=0.8)
    if log:
        ax.set_ylim(y.min() / 1.5, y.max() * 1.5)
    ax.set_xlabel(_scaled(f"harness {calibration.metric} ({calibration.label})", log))
    ax.set_ylabel(_scaled(f"{device} {calibration.metric}", log))
    ax.set_title(f"{device}: {calibration.metric}, {calibration.label}\n{equation(calibration)}", fontsize=9)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="upper left")
    return _png(figure)


def calibration_residuals(calibration: Calibration, device: str) -> bytes:
    """Relative errors (%) of the chosen fit against the harness value, fitted on all models and held out
    (leave-one-out, nested for `--fit auto`), with the ±10% band: curvature or fanning shows here."""
    points = calibration.points
    x = points["harness"].to_numpy(float)
    figure = Figure(figsize=(7, 3.6))
    ax = figure.add_subplot()
    ax.axhspan(-10, 10, color=BAND_COLOR, alpha=0.15, linewidth=0, label="±10%")
    ax.axhline(0, color=FIT_COLOR, linewidth=1.5)
    ax.scatter(x, points["error_pct"], color=POINT_COLOR, zorder=3, label="fitted on all models")
    if "loo_error_pct" in points:
        nested = "nested " if calibration.choice["mode"] == "auto" else ""
        ax.scatter(x, points["loo_error_pct"], facecolors="none", edgecolors=INFLUENTIAL_COLOR, zorder=3,
                   label=f"held out ({nested}leave-one-out)")
    ax.set_xlabel(_scaled(f"harness {calibration.metric} ({calibration.label})", log_if_wide(ax, "x", x)))
    ax.set_ylabel("(predicted − measured) / measured, %")
    ax.set_title(f"relative errors of the {calibration.model.name} fit: {device} {calibration.metric}, "
                 f"{calibration.label}", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _png(figure)


def draw_learning_curve(ax: Any, curve: pd.DataFrame, title: str) -> None:
    """On `ax`: the share of the other models within ±10% (solid) and inside their 95% interval (dotted) against
    the k models measured, picked by `suggest` and at random (the random draws' 10th–90th percentiles shaded)."""
    for how, color in (("suggest", POINT_COLOR), ("random", ROBUST_COLOR)):
        part = curve[curve["how"] == how]
        ax.plot(part["k"], part["within_10pct"], "o-", color=color, label=f"within ±10%, {how}")
        ax.plot(part["k"], part["coverage"], "s:", color=color, alpha=0.7, label=f"95% coverage, {how}")
        if how == "random":
            ax.fill_between(part["k"], part["within_10pct_p10"], part["within_10pct_p90"], color=color, alpha=0.15)
    ax.set_title(title, fontsize=9)
    ax.set_xticks(sorted(curve["k"].unique()))
    ax.set_xlabel("models measured on the device (k)")
    ax.set_ylabel("share of the other models")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")


def learning_curve_chart(curve: pd.DataFrame, title: str) -> bytes:
    figure = Figure(figsize=(6.0, 4.0))
    draw_learning_curve(figure.add_subplot(), curve, title)
    return _png(figure)


def ranking_chart(entries: list[RankEntry], metric: str, title: str) -> bytes:
    """Medians with their 95% CIs, best at the top, rank in the label (a model without one says its status)."""
    shown = [(e, e.median) for e in entries if e.median is not None]
    entries = [e for e, _ in shown]
    figure = Figure(figsize=(7, 0.8 + 0.32 * len(entries)))
    ax = figure.add_subplot()
    positions = np.arange(len(entries))[::-1]
    medians = np.array([median for _, median in shown])
    low = np.array([median - e.ci95_low if e.ci95_low is not None else 0.0 for e, median in shown])
    high = np.array([e.ci95_high - median if e.ci95_high is not None else 0.0 for e, median in shown])
    ax.errorbar(medians, positions, xerr=[low, high], fmt="o", color=POINT_COLOR, ecolor=FIT_COLOR, capsize=3)
    ax.set_yticks(positions, [f"#{e.rank} {e.model}" if e.rank else f"({e.status}) {e.model}" for e in entries],
                  fontsize=8)
    log = log_if_wide(ax, "x", [*medians, *(medians - low), *(medians + high)])
    ax.set_xlabel(_scaled(f"{metric} (median, 95% CI)", log))
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3, axis="x")
    return _png(figure)


def scaling_chart(summary: pd.DataFrame, column: str, title: str) -> bytes:
    """One line per model: `column` (a median) against the CPU count, to see where more cores stop paying."""
    figure = Figure(figsize=(9, 4.5))
    ax = figure.add_subplot()
    for index, (model, rows) in enumerate(summary.dropna(subset=[column]).groupby("model")):
        rows = rows.sort_values("cpus")
        # matplotlib cycles 10 colours; the line style tells apart models that share one.
        ax.plot(rows["cpus"], rows[column], marker="o", linestyle=LINE_STYLES[index // 10 % len(LINE_STYLES)],
                label=str(model))
    ax.set_xticks(sorted(summary["cpus"].unique()))
    log = log_if_wide(ax, "y", summary[column].dropna())
    ax.set_xlabel("CPUS")
    ax.set_ylabel(_scaled(column, log))
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _png(figure)
