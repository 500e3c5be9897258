"""Session reports. One result structure (sections of tables and figures) feeds every output:
report.md, a self-contained report.html (figures embedded as base64 PNG), figures/*.png and
tables/*.csv + tables/*.json, all under RESULTS_DIR/<session>/report/ unless told otherwise."""

from __future__ import annotations

import base64
import html
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from harness.calibrate import CalibrationSet, calibrate_runs, group_label, predict_models
from harness.device_data import list_devices, load_device
from harness.errors import DataError
from harness.ranking import ALPHA, MIN_RELATIVE_GAP, rank_runs, ranking_rows
from harness.report_figures import (
    calibration_residuals,
    calibration_scatter,
    equation,
    ranking_chart,
    scaling_chart,
)
from harness.stats import UNSTABLE_RULE, summarize_runs
from harness.store import atomic_write_text, load_runs, load_session_info

REPORT_DIR = "report"
RANKED_METRICS = ("latency_ms", "runtime_s", "peak_memory_mib")
SCALING_COLUMNS = ("latency_p50_ms_median", "peak_memory_mib_median")
"""Plotted against CPUS when a session (a sweep) has several CPU counts."""
SUMMARY_COLUMNS = ("latency_p50_ms", "runtime_s", "load_s", "peak_memory_mib", "peak_rss_mib", "avg_memory_mib")
DIGITS = 4


@dataclass
class ReportTable:
    name: str
    title: str
    frame: pd.DataFrame


@dataclass
class ReportFigure:
    name: str
    title: str
    png: bytes


@dataclass
class Section:
    title: str
    paragraphs: list[str] = field(default_factory=list)
    tables: list[ReportTable] = field(default_factory=list)
    figures: list[ReportFigure] = field(default_factory=list)


@dataclass
class Report:
    session_id: str
    sections: list[Section]

    @property
    def title(self) -> str:
        return f"Profiling report: session {self.session_id}"


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]+", "_", text).strip("_").lower()


def session_section(info: dict[str, Any], runs: list[dict[str, Any]]) -> Section:
    profile = info.get("profile") or {}
    statuses = pd.Series([run.get("status", "error") for run in runs]).value_counts().to_dict()
    frame = pd.DataFrame([{"setting": key, "value": str(value)} for key, value in profile.items()])
    return Section(
        "Session",
        [f"{len(runs)} runs ({', '.join(f'{n} {s}' for s, n in sorted(statuses.items())) or 'none'}) of "
         f"{len(info.get('models') or [])} models at CPUS {info.get('cpus_values')}, seed {info.get('seed')}."],
        [ReportTable("profile", "Device profile", frame)],
    )


def summary_section(runs: list[dict[str, Any]]) -> Section:
    rows = []
    for entry in summarize_runs(runs):
        row: dict[str, Any] = {"model": entry["model_name"], "cpus": entry["cpus"],
                               "ok_runs": f"{entry['n_ok']}/{entry['n_runs']}"}
        for name in SUMMARY_COLUMNS:
            summary = entry["metrics"].get(name, {})
            row[f"{name}_median"] = summary.get("median")
            if name == "latency_p50_ms":
                row.update({f"{name}_ci95_low": summary.get("ci95_low"), f"{name}_ci95_high": summary.get("ci95_high")})
        row["unstable_metrics"] = ", ".join(entry["unstable_metrics"])
        rows.append(row)
    frame = pd.DataFrame(rows).sort_values(["cpus", "model"]) if rows else pd.DataFrame()
    section = Section("Summary", ["Medians over the ok repeats of each model; latency is the per-run p50, with the "
                                  "95% CI of its median (order statistics; none below 6 repeats). Unstable metrics "
                                  f"have {UNSTABLE_RULE}."],
                      [ReportTable("summary", "Per-model summary", frame)])
    if rows and frame["cpus"].nunique() > 1:
        for column in SCALING_COLUMNS:
            title = f"{column} against CPUS"
            section.figures.append(ReportFigure(f"scaling_{column}", title, scaling_chart(frame, column, title)))
    return section


def ranking_section(runs: list[dict[str, Any]]) -> Section:
    section = Section("Ranking", [
        f"Lower is better. Two models rank apart only when Mann–Whitney U, Holm-corrected over every pair, separates "
        f"them at α = {ALPHA} and their medians differ by {MIN_RELATIVE_GAP:.0%} or more; a model that no cut "
        "can separate from the one above shares its rank (`reason` says why, `repeats_needed` how many repeats "
        "per model could separate them). Models with a failed run are listed without a rank. Stability is the "
        "share of bootstrap resamples that keep a model inside its rank's span of positions."
    ])
    for metric in RANKED_METRICS:
        try:
            rankings = rank_runs(runs, metric)
        except DataError:
            continue
        frame = pd.DataFrame(ranking_rows(rankings, metric)).drop(columns=["metric"])
        section.tables.append(ReportTable(f"ranking_{metric}", f"Ranking by {metric}", frame))
        for cpus, entries in rankings.items():
            if all(e.median is None for e in entries):
                continue  # every model failed at this CPU count: the table says so, a chart would be empty
            title = f"{metric} ranking at cpus={cpus:g}"
            section.figures.append(ReportFigure(f"ranking_{metric}_cpus{cpus:g}", title,
                                                ranking_chart(entries, metric, title)))
    if not section.tables:
        section.paragraphs.append("No ok runs to rank.")
    return section


def calibration_tables(cset: CalibrationSet) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One row per fitted group (every statistic), and every point with its held-out prediction."""
    fits, points = [], []
    for c in cset.calibrations:
        influential = c.points.loc[c.points["influential"], "model"].tolist()
        fits.append({
            "metric": c.metric, "group": c.label, **{f"fit_{k}": v for k, v in vars(c.fit).items()}, **c.stats,
            "flipped_pairs": "; ".join(f"{a} ↔ {b}" for a, b in c.flipped_pairs),
            "influential": ", ".join(influential),
        })
        points.append(c.points.assign(metric=c.metric, group=c.label))
    return pd.DataFrame(fits), pd.concat(points, ignore_index=True)


def calibration_section(results_dir: Path, device_name: str, runs: list[dict[str, Any]], group_by: str) -> Section:
    section = Section(f"Calibration: {device_name}")
    device = load_device(results_dir, device_name)
    source = "; ".join(device.info.get("comments") or []) or device.info.get("source_name", "")
    section.paragraphs.append(f"Device data: {source}")
    try:
        cset, medians = calibrate_runs(device, runs, group_by=group_by)
    except DataError as err:
        section.paragraphs.append(f"Not calibrated: {err}")
        return section
    fits, points = calibration_tables(cset)
    key = slug(device_name)
    section.tables += [ReportTable(f"calibration_{key}_fits", "Fits (OLS, Theil–Sen, LOO, rank agreement)", fits),
                       ReportTable(f"calibration_{key}_points", "Matched models", points)]
    profiled = sorted({run["model_name"] for run in runs if "model_name" in run})
    unmeasured = sorted(set(profiled) - set(points["harness_model"]))
    if unmeasured and group_by == "cpus":  # a tag group needs the tag, which only device rows have
        predictions = pd.DataFrame(predict_models(cset, medians, unmeasured))
        if not predictions.empty:
            predictions["group"] = predictions["group"].map(group_label)
            predictions = predictions.drop(columns=["calibrated_range", "measured_on_device"])
            section.tables.append(ReportTable(f"calibration_{key}_predictions",
                                              "Predictions for models not measured on the device", predictions))
    for c in cset.calibrations:
        name = f"calibration_{key}_{slug(c.metric + '_' + c.label)}"
        section.paragraphs.append(f"{c.metric}, {c.label}: {equation(c)}")
        section.figures += [
            ReportFigure(f"{name}_fit", f"{c.metric}, {c.label}: fit", calibration_scatter(c, device_name)),
            ReportFigure(f"{name}_residuals", f"{c.metric}, {c.label}: residuals",
                         calibration_residuals(c, device_name)),
        ]
    section.paragraphs += [f"Not fitted: {s['metric']} {group_label(s['group'])}: {s['reason']}" for s in cset.skipped]
    if cset.unmatched_device_models:
        section.paragraphs.append("Device models without harness runs: " + ", ".join(cset.unmatched_device_models))
    return section


def build_report(
    results_dir: Path, session_dir: Path, devices: list[str] | None = None, group_by: str = "cpus"
) -> Report:
    """Everything the report shows, computed once from the session's runs and the imported device data."""
    runs = load_runs(session_dir)
    if not runs:
        raise DataError(f"session {session_dir.name} has no runs yet; profile first (make profile MODEL=...)")
    info = load_session_info(session_dir)
    sections = [session_section(info, runs), summary_section(runs), ranking_section(runs)]
    for name in devices or list_devices(results_dir):
        sections.append(calibration_section(results_dir, name, runs, group_by))
    return Report(session_dir.name, sections)


def _display(frame: pd.DataFrame) -> pd.DataFrame:
    """Numbers to DIGITS significant figures for reading; CSV and JSON keep full precision."""
    def cell(value: Any) -> Any:
        if isinstance(value, float):
            return "—" if math.isnan(value) else f"{value:.{DIGITS}g}"
        return "—" if value is None else value
    return frame.map(cell)


def to_markdown(report: Report) -> str:
    lines = [f"# {report.title}", ""]
    for section in report.sections:
        lines += [f"## {section.title}", ""]
        for paragraph in section.paragraphs:
            lines += [paragraph, ""]
        for table in section.tables:
            lines += [f"### {table.title}", "", _display(table.frame).to_markdown(index=False), "",
                      f"(tables/{table.name}.csv, tables/{table.name}.json)", ""]
        for figure in section.figures:
            lines += [f"![{figure.title}](figures/{figure.name}.png)", ""]
    return "\n".join(lines)


STYLE = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
.scroll{overflow-x:auto;margin:0.5em 0 1.5em}table{border-collapse:collapse;font-size:13px}
th,td{border:1px solid #ccc;padding:3px 6px;white-space:nowrap}
th{background:#f2f2f2}img{max-width:100%;display:block;margin:0.5em 0 1.5em}h2{border-bottom:1px solid #ddd}"""


def to_html(report: Report) -> str:
    """One file, no external requests: figures are data: URIs, the style sheet is inline."""
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(report.title)}</title>"
             f"<style>{STYLE}</style></head><body><h1>{html.escape(report.title)}</h1>"]
    for section in report.sections:
        parts.append(f"<h2>{html.escape(section.title)}</h2>")
        parts += [f"<p>{html.escape(p)}</p>" for p in section.paragraphs]
        for table in section.tables:
            rendered = _display(table.frame).to_html(index=False, border=0, na_rep="—")
            parts.append(f"<h3>{html.escape(table.title)}</h3><div class='scroll'>{rendered}</div>")
        for figure in section.figures:
            data = base64.b64encode(figure.png).decode("ascii")
            parts.append(f"<figure><img alt='{html.escape(figure.title)}' src='data:image/png;base64,{data}'>"
                         f"<figcaption>{html.escape(figure.title)}</figcaption></figure>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(report: Report, out_dir: Path) -> list[Path]:
    """Write every output (text files atomically) and return their paths."""
    written = []
    for section in report.sections:
        for table in section.tables:
            as_json = table.frame.to_json(orient="records", indent=2, force_ascii=False, double_precision=15)
            for suffix, text in ((".csv", table.frame.to_csv(index=False, lineterminator="\n")), (".json", as_json)):
                path = out_dir / "tables" / f"{table.name}{suffix}"
                atomic_write_text(path, text)
                written.append(path)
        for figure in section.figures:
            path = out_dir / "figures" / f"{figure.name}.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(figure.png)
            written.append(path)
    for name, text in (("report.md", to_markdown(report)), ("report.html", to_html(report))):
        atomic_write_text(out_dir / name, text)
        written.append(out_dir / name)
    return written
