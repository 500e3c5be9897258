"""Session reports. One result structure (sections of tables and figures) feeds every output:
report.md, a self-contained report.html (figures embedded as base64 PNG), figures/*.png and
tables/*.csv + tables/*.json, all under RESULTS_DIR/<session>/report/ unless told otherwise."""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any

import pandas as pd

from harness.analysis.ranking import ALPHA, MIN_RELATIVE_GAP, rank_runs, ranking_rows
from harness.analysis.stats import NO_VALUES, UNSTABLE_RULE, summarize_runs
from harness.calibration.calibrate import CalibrationSet, calibrate_runs, group_label
from harness.calibration.few_shot import curve_table, learning_curve
from harness.calibration.transfer import device_library
from harness.core import metric_registry
from harness.core.errors import DataError, StorageError
from harness.core.records import RunRecord, SessionInfo
from harness.core.storage import write_bytes_atomically
from harness.device.data import list_devices, load_device
from harness.report.answer import answer_parts, device_energy_points
from harness.report.board import board_section
from harness.report.carried import carried_note
from harness.report.figures import (
    calibration_residuals,
    calibration_scatter,
    equation,
    learning_curve_chart,
    pareto_chart,
    ranking_chart,
    scaling_chart,
)
from harness.report.format import display_frame, mib, with_interval
from harness.report.ops import ops_sections
from harness.report.sections import Report, ReportFigure, ReportTable, Section, slug
from harness.store.results import load_runs, load_session_info

REPORT_DIR = "report"
ANSWER = "Answer"
BYTE_SETTINGS = ("MEMORY", "SWAP")
"""Profile settings stored in bytes; shown in MiB/GiB."""


def session_section(info: SessionInfo, runs: list[RunRecord]) -> Section:
    profile = info.profile
    statuses = pd.Series([run.result.status for run in runs]).value_counts().to_dict()
    frame = pd.DataFrame([{"setting": key, "value": mib(int(value)) if key in BYTE_SETTINGS and str(value).isdigit()
                           else str(value)} for key, value in profile.items()])
    return Section(
        "Session",
        [f"{len(runs)} runs ({', '.join(f'{n} {s}' for s, n in sorted(statuses.items())) or 'none'}) of "
         f"{len(info.models)} models at CPUS {info.get('cpus_values')}, seed {info.seed}."],
        [ReportTable("profile", "Device profile", frame)],
    )


def summary_section(runs: list[RunRecord]) -> Section:
    rows = []
    for entry in summarize_runs(runs):
        row: dict[str, Any] = {"model": entry.model_name, "cpus": entry.cpus, "ok_runs": f"{entry.n_ok}/{entry.n_runs}"}
        for name in metric_registry.REPORT_SUMMARY_METRICS:
            summary = entry.metrics.get(name, NO_VALUES)
            row[f"{name}_median"] = summary.median
            if name == metric_registry.REPORT_SUMMARY_METRICS[0]:
                row.update({f"{name}_ci95_low": summary.ci95_low, f"{name}_ci95_high": summary.ci95_high})
        row["unstable_metrics"] = ", ".join(entry.unstable_metrics)
        rows.append(row)
    frame = pd.DataFrame(rows).sort_values(["cpus", "model"]) if rows else pd.DataFrame()
    section = Section("Summary", ["Medians over the ok repeats of each model; latency is the per-run p50, with the "
                                  "95% CI of its median (order statistics; none below 6 repeats). Unstable metrics "
                                  f"have {UNSTABLE_RULE}."],
                      [ReportTable("summary", "Per-model summary", frame, summary_display(frame))])
    if rows and frame["cpus"].nunique() > 1:
        for column in (f"{name}_median" for name in metric_registry.SCALING_METRICS):
            title = f"{column} against CPUS"
            section.figures.append(ReportFigure(f"scaling_{column}", title, scaling_chart(frame, column, title)))
    return section


def summary_display(frame: pd.DataFrame) -> pd.DataFrame | None:
    """The summary as read: latency with its CI in one cell, the other medians beside it, units in the labels."""
    if frame.empty:
        return None
    shown = display_frame(frame[["model", "cpus", "ok_runs"]])
    first, *others = metric_registry.REPORT_SUMMARY_METRICS
    label = metric_registry.get(first).label_with_unit
    shown[f"{label} [95% CI]"] = [with_interval(*values) for values in zip(
        frame[f"{first}_median"], frame[f"{first}_ci95_low"], frame[f"{first}_ci95_high"], strict=True)]
    rest = display_frame(frame[[f"{name}_median" for name in others]])
    rest.columns = [c.replace(" median", "") for c in rest.columns]
    shown = pd.concat([shown.reset_index(drop=True), rest.reset_index(drop=True)], axis=1)
    shown["unstable"] = frame["unstable_metrics"].to_numpy()
    return shown


def answer_section(results_dir: Path, runs: list[RunRecord], info: SessionInfo, devices: list[str],
                   accuracy_file: Path | None = None, max_latency_ms: float | None = None) -> Section:
    """The answer first: ranking with ties marked, the Pareto chart, the predicted device numbers, and with known
    accuracies the accuracy-latency frontier and the pick under the latency budget."""
    try:
        parts = answer_parts(results_dir, runs, info, devices, accuracy_file, max_latency_ms)
    except DataError as err:
        return Section(ANSWER, [f"No answer yet: {err}"])
    cpus = parts.cpus
    section = Section(ANSWER, [parts.sentence], figures_first=True)
    word = metric_registry.get(parts.metric).label
    section.figures.append(ReportFigure(f"pareto_cpus{cpus:g}", f"Pareto chart: {word} against peak memory; "
                                        "non-dominated models in green and named", parts.chart))
    if parts.device is not None and parts.device_ranking is not None and parts.device_ranking_shown is not None:
        section.tables.append(ReportTable(
            f"answer_device_ranking_{slug(parts.device)}", f"Ranking on {parts.device} by predicted latency (1= : "
            "tied, the 95% prediction intervals overlap)", parts.device_ranking, parts.device_ranking_shown))
    if parts.by_devices is not None:
        section.tables.append(ReportTable("answer_devices", "Predicted latency (ms) by device, 95% prediction interval",
                                          parts.by_devices, parts.by_devices))
    if parts.accuracy is not None and parts.accuracy_shown is not None:
        section.tables.append(ReportTable("answer_accuracy", "Accuracy against latency (✓ : non-dominated on "
                                          "accuracy, latency and peak memory)", parts.accuracy, parts.accuracy_shown))
    title = f"Ranking by {word} on this host (1= : tied, no significant difference; ✓ : non-dominated)"
    section.tables.append(ReportTable("answer_ranking", title, parts.ranking, parts.ranking_shown))
    for device, predicted in parts.devices.items():
        if isinstance(predicted, str):
            section.after.append(predicted)
            continue
        section.after.append(ReportTable(f"answer_predictions_{slug(device)}", f"{device}: predicted device numbers "
                                         "(95% prediction interval; see its calibration section)", *predicted))
    return section


def ranking_section(runs: list[RunRecord]) -> Section:
    section = Section("Ranking", [
        f"Lower is better. A model ranks below its neighbour above only when their test (Wilcoxon's signed-rank test "
        f"on the per-round differences for models run side by side, else Mann–Whitney U), FDR-adjusted over the "
        f"neighbour pairs or slower in every round by itself, separates them at α = {ALPHA} and their medians differ "
        f"by {MIN_RELATIVE_GAP:.0%} or more; a model not separated from the one above shares its rank (`reason` "
        "says why, `repeats_needed` how many repeats per model could separate them). Models with a failed run are "
        "listed without a rank. Stability is the share of bootstrap resamples that keep a model inside its rank's "
        "span of positions."
    ])
    for metric in (m.name for m in metric_registry.ranked()):
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


def calibration_tables(cset: CalibrationSet) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Every candidate fit's held-out figures per group; one row per group (chosen fit, OLS reference, every
    statistic); and every point with its held-out prediction."""
    comparison, fits, points = [], [], []
    for c in cset.calibrations:
        comparison += [{"metric": c.metric, "group": c.label, **row} for row in c.comparison]
        influential = c.points.loc[c.points["influential"], "model"].tolist()
        fits.append({
            "metric": c.metric, "group": c.label, "threads": c.threads, "harness_value": c.harness_value,
            "fit": c.model.name,
            "equation": c.model.equation, "why": c.choice["reason"],
            **{f"ols_{k}": v for k, v in vars(c.reference_line).items()}, **c.stats,
            "flipped_pairs": "; ".join(f"{a} ↔ {b}" for a, b in c.flipped_pairs),
            "influential": ", ".join(influential),
        })
        points.append(c.points.assign(metric=c.metric, group=c.label))
    return pd.DataFrame(comparison), pd.DataFrame(fits), pd.concat(points, ignore_index=True)


def calibration_section(results_dir: Path, device_name: str, runs: list[RunRecord], group_by: str) -> Section:
    section = Section(f"Calibration: {device_name}")
    device = load_device(results_dir, device_name)
    source = "; ".join(device.info.get("comments") or []) or device.info.get("source_name", "")
    section.paragraphs.append(f"Device data: {source}")
    energy = device_energy_points(device)
    key = slug(device_name)
    if energy is not None:
        latency, joules = metric_registry.get(metric_registry.LATENCY), metric_registry.get(metric_registry.ENERGY)
        title = f"{device_name}: {latency.label} against {joules.label} per inference, as measured there"
        section.figures.append(ReportFigure(f"calibration_{key}_energy_pareto", title + "; non-dominated in green",
                                            pareto_chart(energy, latency.label_with_unit, joules.label_with_unit,
                                                         title)))
        section.tables.append(ReportTable(f"calibration_{key}_energy_pareto", title, energy.rename(
            columns={"x": latency.name, "y": joules.name}).drop(columns="size_mib")))
    try:
        cset, measured = calibrate_runs(device, runs, group_by=group_by,
                                        library=device_library(results_dir, device_name))
    except DataError as err:
        section.paragraphs.append(f"Not calibrated: {err}")
        return section
    comparison, fits, points = calibration_tables(cset)
    section.tables += [
        ReportTable(f"calibration_{key}_comparison",
                    "Fit comparison: held-out (leave-one-out) figures; `auto` is the nested choice", comparison),
        ReportTable(f"calibration_{key}_fits", "Chosen fits, the OLS reference, rank agreement", fits),
        ReportTable(f"calibration_{key}_points", "Matched models", points),
    ]
    profiled = sorted({run.model_name for run in runs if run.model_name})
    unmeasured = sorted(set(profiled) - set(points["harness_model"]))
    if unmeasured and group_by == "cpus":  # a tag group needs the tag, which only device rows have
        predictions = pd.DataFrame([p.to_dict() for p in cset.predict(measured, unmeasured)])
        if not predictions.empty:
            predictions["group"] = predictions["group"].map(group_label)
            predictions = predictions.drop(columns=["calibrated_range", "measured_on_device"])
            section.tables.append(ReportTable(f"calibration_{key}_predictions",
                                              "Predictions for models not measured on the device", predictions))
    for c in cset.calibrations:
        name = f"calibration_{key}_{slug(c.metric + '_' + c.label)}"
        section.paragraphs.append(f"{c.metric}, {c.label}: {equation(c)}")
        if carried := carried_note(c):
            section.paragraphs.append(f"{c.metric}, {c.label}: {carried}")
        section.figures += [
            ReportFigure(f"{name}_fit", f"{c.metric}, {c.label}: fit", calibration_scatter(c, device_name)),
            ReportFigure(f"{name}_residuals", f"{c.metric}, {c.label}: residuals",
                         calibration_residuals(c, device_name)),
        ]
        curve = curve_table(learning_curve(c.points))
        if not curve.empty:
            title = f"{c.metric}, {c.label}: from k of the {c.reference_line.n} models, the others predicted"
            section.figures.append(ReportFigure(f"{name}_learning", title, learning_curve_chart(curve, title)))
            section.tables.append(ReportTable(f"{name}_learning", f"{c.metric}, {c.label}: learning curve (how "
                                              "many models to measure on the device)", curve))
    section.paragraphs += [f"Not fitted: {s['metric']} {group_label(s['group'])}: {s['reason']}" for s in cset.skipped]
    if cset.unmatched_device_models:
        section.paragraphs.append("Device models without harness runs: " + ", ".join(cset.unmatched_device_models))
    return section


def build_report(
    results_dir: Path, session_dir: Path, devices: list[str] | None = None, group_by: str = "cpus",
    accuracy_file: Path | None = None, max_latency_ms: float | None = None,
) -> Report:
    """Everything the report shows, computed once from the session's runs and the imported device data."""
    runs = load_runs(session_dir)
    if not runs:
        raise DataError(f"session {session_dir.name} has no runs yet; profile first (make profile MODEL=...)")
    info = load_session_info(session_dir)
    devices = devices or list_devices(results_dir)
    sections = [answer_section(results_dir, runs, info, devices, accuracy_file, max_latency_ms),
                session_section(info, runs), summary_section(runs), ranking_section(runs)]
    beside = board_section(results_dir, runs)
    if beside is not None:
        sections.append(beside)
    for name in devices:
        sections.append(calibration_section(results_dir, name, runs, group_by))
    sections += ops_sections(session_dir, runs)
    return Report(session_dir.name, sections)


def _markdown_table(table: ReportTable, files: bool = True) -> list[str]:
    body = [table.shown.to_markdown(index=False, disable_numparse=True), "",
            *([f"(full precision: tables/{table.name}.csv, .json)"] if files else [])]
    if table.folded:  # GitHub and most viewers render <details> in Markdown too
        return [f"<details><summary>{table.title} ({len(table.shown.columns)} columns)</summary>", "", *body, "",
                "</details>", ""]
    return [f"### {table.title}", "", *body, ""]


def to_markdown(report: Report, files: bool = True) -> str:
    """report.md; without `files`, for a terminal: no links to the figures and tables written beside it."""
    lines = [f"# {report.title}", ""]
    for section in report.sections:
        lines += [f"## {section.title}", ""]
        for paragraph in section.paragraphs:
            lines += [paragraph, ""]
        figures = [f"![{figure.title}](figures/{figure.name}.png)\n" for figure in section.figures if files]
        tables = [line for table in section.tables for line in _markdown_table(table, files)]
        lines += [*figures, *tables] if section.figures_first else [*tables, *figures]
        for item in section.after:
            lines += [item, ""] if isinstance(item, str) else _markdown_table(item, files)
    return "\n".join(lines)


STYLE = """body{font-family:system-ui,sans-serif;margin:1em auto;max-width:1180px;padding:0 1em;color:#222}
h1{font-size:1.35em;margin:0.2em 0}h2{border-bottom:1px solid #ddd;margin-top:1.4em}h3{font-size:1em}
table{border-collapse:collapse;font-size:13px;max-width:100%;margin:0.3em 0 1.2em}
th,td{border:1px solid #ccc;padding:3px 6px;vertical-align:top;text-align:left}th{background:#f2f2f2}
details td,details th{overflow-wrap:anywhere}img{max-width:100%;display:block;margin:0.3em 0}
figure{margin:0 0 1em}figcaption{font-size:12px;color:#555}details{margin:0.5em 0 1em}
summary{cursor:pointer;font-weight:600}.row{display:flex;flex-wrap:wrap;gap:1.5em;align-items:flex-start}
.row>figure{flex:0 1 520px}.row>div{flex:1 1 400px;min-width:0}#answer>p{font-size:15px}"""


def _html_table(table: ReportTable) -> str:
    rendered = table.shown.to_html(index=False, border=0, na_rep="—")
    if table.folded:
        return (f"<details><summary>{html.escape(table.title)} ({len(table.shown.columns)} columns; full precision "
                f"in tables/{table.name}.csv)</summary>{rendered}</details>")
    return f"<h3>{html.escape(table.title)}</h3>{rendered}"


def _html_figure(figure: ReportFigure) -> str:
    data = base64.b64encode(figure.png).decode("ascii")
    return (f"<figure id='{slug(figure.name)}'><img alt='{html.escape(figure.title)}' "
            f"src='data:image/png;base64,{data}'><figcaption>{html.escape(figure.title)}</figcaption></figure>")


def to_html(report: Report) -> str:
    """One file, no external requests: figures are data: URIs, the style sheet is inline. Tables wrap rather than
    scroll; wide raw ones are folded. The answer section puts its chart beside its table."""
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(report.title)}</title>"
             f"<style>{STYLE}</style></head><body><h1>{html.escape(report.title)}</h1>"]
    for section in report.sections:
        parts.append(f"<section id='{slug(section.title)}'><h2>{html.escape(section.title)}</h2>")
        parts += [f"<p>{html.escape(p)}</p>" for p in section.paragraphs]
        tables = "".join(_html_table(table) for table in section.tables)
        figures = "".join(_html_figure(figure) for figure in section.figures)
        if section.figures_first:
            parts.append(f"<div class='row'>{figures}<div>{tables}</div></div>")
        else:
            parts += [tables, figures]
        parts += [_html_table(item) if isinstance(item, ReportTable) else f"<p>{html.escape(item)}</p>"
                  for item in section.after]
        parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts)


def report_files(report: Report) -> list[tuple[Path, bytes]]:
    """Every output as (path under the report folder, content): tables and figures first, report.md and report.html
    last, so the documents that link them are never newer than what they link."""
    files: list[tuple[Path, bytes]] = []
    for section in report.sections:
        for table in section.tables + [item for item in section.after if isinstance(item, ReportTable)]:
            as_json = table.frame.to_json(orient="records", indent=2, force_ascii=False, double_precision=15)
            for suffix, text in ((".csv", table.frame.to_csv(index=False, lineterminator="\n")), (".json", as_json)):
                files.append((Path("tables") / f"{table.name}{suffix}", text.encode("utf-8")))
        files += [(Path("figures") / f"{figure.name}.png", figure.png) for figure in section.figures]
    return files + [(Path(name), text.encode("utf-8"))
                    for name, text in (("report.md", to_markdown(report)), ("report.html", to_html(report)))]


def write_report(report: Report, out_dir: Path) -> list[Path]:
    """Write every output atomically and return their paths. A full disk stops at the first file it refuses: one
    StorageError naming it and every file not written."""
    files = report_files(report)
    written = []
    for index, (name, data) in enumerate(files):
        try:
            written.append(write_bytes_atomically(out_dir / name, data))
        except StorageError as err:
            missing = [path for path, _ in files[index:]]
            named = [str(path) for path in missing if path.parent == Path(".")]  # report.md, report.html
            parts = [*named, *([f"{len(missing) - len(named)} tables and figures"] if len(missing) > len(named)
                               else [])]
            raise err.with_fix(f"{len(missing)} of {len(files)} report files not written in {out_dir} "
                               f"({', '.join(parts)}); free space there and run `harness report` again") from None
    return written


def answer_markdown(report: Report) -> str:
    """The report's answer section alone, as Markdown: what a terminal shows when the files cannot be written."""
    return to_markdown(Report(report.session_id, [s for s in report.sections if s.title == ANSWER][:1]), files=False)
