"""The report's per-op sections (one per model profiled with PER_OP=1) and the run timeline figure.

Each section: the coverage line per CPUS value, the top-N nodes by time (table and bar chart) and the time by
op type (table and bar chart), pooled over the model's profiled inferences as `harness ops` shows them.
"""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from harness.analysis.per_op import RAW_DIR, PerOp, load_raw, pooled, run_dir
from harness.core import metric_registry
from harness.core.errors import DataError
from harness.core.records import RunRecord
from harness.report.sections import ReportFigure, ReportTable, Section, slug

TOP_N = 15
DPI = 110
BAR_COLOR = "#1f77b4"
GAP_COLOR = "#bbbbbb"
TOP_COLUMNS = ("node_index", "node", "op_type", "output_shapes", "macs", "mean_ms", "median_ms", "share")
PHASE_COLORS = {"load": "#9467bd", "warmup": "#ff7f0e", "steady": "#2ca02c", "profile": "#d62728"}


def _png(figure: Figure) -> bytes:
    FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight")
    return buffer.getvalue()


def bar_chart(labels: list[str], values: list[float], colors: list[str], title: str) -> bytes:
    """Horizontal bars, largest on top: mean ms per inference."""
    figure = Figure(figsize=(8, 0.3 * len(labels) + 1.2))
    axes = figure.add_subplot()
    positions = range(len(labels))
    axes.barh(list(positions), values, color=colors)
    axes.set_yticks(list(positions), labels, fontsize=8)
    axes.invert_yaxis()
    axes.set_xlabel("mean ms per inference (under the profiler)")
    axes.set_title(title, fontsize=10)
    axes.grid(axis="x", alpha=0.3)
    return _png(figure)


def _colors(frame: pd.DataFrame) -> list[str]:
    return [GAP_COLOR if str(t).startswith("(") else BAR_COLOR for t in frame["op_type"]]


def model_section(model: str, tables: dict[float, PerOp]) -> Section:
    section = Section(f"Per-op profile: {model}", [
        "Per-operator times from the framework's own profiler, in a phase after the timed one (the headline "
        "latency never runs under it). Rows in parentheses are not operators: the gaps between ops and the "
        "Python call around the framework's run."])
    for cpus, per_op in tables.items():
        tag = f"{slug(model)}_cpus{cpus:g}"
        section.paragraphs.append(f"CPUS={cpus:g}, {per_op.framework}, {per_op.iterations} profiled inferences: "
                                  f"{per_op.coverage['line']}")
        top = per_op.table.sort_values("mean_ms", ascending=False).head(TOP_N)
        section.tables.append(ReportTable(f"ops_top_{tag}", f"Top {TOP_N} nodes by time, CPUS={cpus:g}",
                                          top[list(TOP_COLUMNS)].reset_index(drop=True)))
        section.tables.append(ReportTable(f"ops_by_type_{tag}", f"Time by op type, CPUS={cpus:g}", per_op.by_type))
        labels = [f"{row.node} ({row.op_type})" if row.node != row.op_type else row.node
                  for row in top.itertuples()]
        section.figures.append(ReportFigure(f"ops_top_{tag}", f"Top {TOP_N} nodes by time, CPUS={cpus:g}",
                                            bar_chart(labels, list(top["mean_ms"]), _colors(top),
                                                      f"{model}: top {TOP_N} nodes, CPUS={cpus:g}")))
        by_type = per_op.by_type
        section.figures.append(ReportFigure(f"ops_by_type_{tag}", f"Time by op type, CPUS={cpus:g}",
                                            bar_chart(list(by_type["op_type"]), list(by_type["mean_ms"]),
                                                      _colors(by_type), f"{model}: time by op type, CPUS={cpus:g}")))
    return section


def ops_sections(session_dir: Path, runs: list[RunRecord]) -> list[Section]:
    """One section per model with per-op runs; none when the session ran without PER_OP."""
    profiled = [r for r in runs if r.ok and r.get(metric_registry.OP_TIME)]
    sections = []
    for model in sorted({r.model_name for r in profiled}):
        mine = [r for r in profiled if r.model_name == model]
        tables = {}
        for cpus in sorted({float(r.cpus) for r in mine}):
            try:
                tables[cpus] = pooled(session_dir, [r for r in mine if float(r.cpus) == cpus])
            except DataError:
                continue
        if tables:
            sections.append(model_section(model, tables))
    return sections


def timeline_png(session_dir: Path, run: RunRecord) -> bytes:
    """One run on its own clock: the phases on top, then one profiled inference's operators (the median one)
    coloured by op type; the same spans the session's Chrome trace holds, drawn without a trace viewer."""
    _, profile = load_raw(run_dir(session_dir, run.run_id) / RAW_DIR)
    if profile is None:
        raise DataError(f"run {run.run_id} has no operator profile to draw")
    figure = Figure(figsize=(11, 4.2))
    top, bottom = figure.subplots(2, 1, gridspec_kw={"height_ratios": [1, 2.2]})
    marks = [("startup", 0.0), *[(str(n), float(t)) for n, t in run.result.phases_s or []]]
    end = metric_registry.get(metric_registry.RUNTIME).value(run.line) or marks[-1][1]
    for index, (name, start) in enumerate(marks):
        stop = marks[index + 1][1] if index + 1 < len(marks) else end
        top.broken_barh([(start, stop - start)], (0, 1), color=PHASE_COLORS.get(name, "#cccccc"), edgecolor="white")
        if stop - start > end * 0.04:
            top.text(start + (stop - start) / 2, 0.5, name, ha="center", va="center", fontsize=8)
    top.set_yticks([])
    top.set_xlim(0, end)
    top.set_xlabel("seconds since the bench script's spawn")
    top.set_title(f"run {run.run_id} · {run.model_name} · CPUS={float(run.cpus):g}", fontsize=10)
    durations = sorted(range(len(profile.runs)), key=lambda i: profile.runs[i][1])
    chosen = durations[len(durations) // 2]
    start_us, span_us = profile.runs[chosen]
    events = [e for e in profile.events if e.iteration == chosen]
    types = sorted({e.op_type for e in events})
    palette = [f"C{i % 10}" for i in range(len(types))]
    color_of = dict(zip(types, palette, strict=True))
    for e in events:
        bottom.broken_barh([((e.ts_us - start_us) / 1000, e.dur_us / 1000)], (0, 1), color=color_of[e.op_type],
                           edgecolor="white", linewidth=0.3)
    bottom.set_xlim(0, span_us / 1000)
    bottom.set_yticks([])
    bottom.set_xlabel(f"ms into profiled inference {chosen} (the median of {len(profile.runs)}); "
                      "white gaps are time between ops")
    bottom.set_ylim(0, 1)
    handles = [Patch(color=color_of[t], label=t) for t in types]
    bottom.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.35), ncol=min(len(types), 6),
                  fontsize=8, frameon=False)
    figure.tight_layout()
    return _png(figure)
