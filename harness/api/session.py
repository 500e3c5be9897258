"""A profiled session as Python objects: what `harness profile` wrote, read back as DataFrames (pandas is imported
when one is asked for: the CLI's profile command ends with a Session too, and its session loads no pandas).

A Session is a view of one session folder (runs.jsonl, session.json, summary.json): the records the CLI writes are
its only state, so a Session opened later, in another process or from a session the CLI ran, reads the same numbers.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.analysis.stats import group_key, metric_value, ordered_entries, summarize_group, summary_rows
from harness.core import metric_registry
from harness.core.records import RunRecord
from harness.store.results import SESSION_FILE, SUMMARY_JSON, load_runs, load_session_info, resolve_session

if TYPE_CHECKING:
    import pandas as pd

SHOWN_METRICS = metric_registry.REPORT_SUMMARY_METRICS
"""The metrics a notebook cell shows of a session (the report's summary table has the same)."""
RUN_COLUMNS = ("run_id", "model_name", "cpus", "round", "repeat", "status", "started_at")


def session_folder(session: str | Path | None) -> Path | None:
    """`session` as a session's folder (one that holds session.json), or None: an id, or nothing given."""
    folder = Path(session) if session is not None else None
    return folder if folder is not None and (folder / SESSION_FILE).is_file() else None


class Session:
    """One session folder: `.summary` and `.runs` as DataFrames, `.records` as stored, `.report()` for the HTML."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    @classmethod
    def open(cls, session: str | Path | None = None, results_dir: str | Path = "results") -> Session:
        """A stored session: its folder, or its id under `results_dir` (default: the newest there)."""
        folder = session_folder(session)
        return cls(folder or resolve_session(Path(results_dir), None if session is None else str(session)))

    @property
    def id(self) -> str:
        return self.path.name

    def run_records(self) -> list[RunRecord]:
        return load_runs(self.path)

    @property
    def info(self) -> dict[str, Any]:
        """session.json: the profile, the plan's models and CPUS values, the state, the notes."""
        return dict(load_session_info(self.path))

    @property
    def records(self) -> dict[str, Any]:
        """What the CLI wrote for this session: session.json, summary.json and every line of runs.jsonl."""
        summary_path = self.path / SUMMARY_JSON
        summary = json.loads(summary_path.read_text(encoding="utf-8")) if summary_path.is_file() else None
        return {"session": self.info, "summary": summary, "runs": [run.line for run in self.run_records()]}

    @property
    def summary(self) -> pd.DataFrame:
        """A row per model and CPUS value (and conditions): run counts, then `<metric>_<statistic>` columns (median,
        iqr, mean, std, ci95_low, ci95_high, ci95_level), computed from the runs as summary.csv is."""
        import pandas as pd

        groups: dict[tuple[Any, ...], list[RunRecord]] = {}
        for run in self.run_records():
            groups.setdefault(group_key(run), []).append(run)
        entries = ordered_entries(summarize_group(members) for members in groups.values())
        return pd.DataFrame(summary_rows(entries))

    @property
    def runs(self) -> pd.DataFrame:
        """A row per run: its identity, status and every registered metric's value (NaN where it has none)."""
        import pandas as pd

        rows = []
        for run in self.run_records():
            row = {"run_id": run.run_id, "model_name": run.model_name, "cpus": float(run.cpus),
                   "round": run.get("round"), "repeat": run.get("repeat"), "status": run.get("status"),
                   "started_at": run.get("started_at")}
            row.update({m.name: metric_value(run, m.name) for m in metric_registry.METRICS})
            rows.append(row)
        return pd.DataFrame(rows, columns=[*RUN_COLUMNS, *(m.name for m in metric_registry.METRICS)])

    def report(self, out: str | Path | None = None, *, accuracy: str | Path | None = None,
               max_latency_ms: float | None = None) -> Path:
        """Write report.html (with report.md, figures and tables) to `out` (default: the session's report/ folder)
        and return the HTML's path. `accuracy`: a CSV of model and accuracy (or top1) in percent, and
        `max_latency_ms` a latency budget, for the answer's accuracy against latency (as `harness report`)."""
        from harness.report.document import REPORT_DIR, build_report, write_report

        folder = Path(out) if out is not None else self.path / REPORT_DIR
        write_report(build_report(self.path.parent, self.path, accuracy_file=Path(accuracy) if accuracy else None,
                                  max_latency_ms=max_latency_ms), folder)
        return folder / "report.html"

    def __repr__(self) -> str:
        return f"Session({str(self.path)!r})"

    def _repr_html_(self) -> str:
        """The session's device and limits, its run counts and each model's median of the report's metrics."""
        info, summary = self.info, self.summary
        profile = info.get("profile") or {}
        limits = ", ".join(f"{name}={profile[name]}" for name in ("CPUS", "MEMORY", "RUNTIME", "REPEATS")
                           if profile.get(name) is not None)
        device, state = html.escape(str(profile.get("DEVICE_NAME", ""))), html.escape(str(info.get("state")))
        runs = int(summary["n_runs"].sum()) if not summary.empty else 0
        head = (f"<p><b>session {html.escape(self.id)}</b> · {device} · {html.escape(limits)} · {runs} runs · "
                f"{state}</p>")
        if summary.empty:
            return head + "<p>no runs yet</p>"
        columns = ["model_name", "cpus", "n_ok", "n_runs",
                   *(f"{name}_median" for name in SHOWN_METRICS if f"{name}_median" in summary)]
        table = summary[columns].rename(columns=lambda c: c.removesuffix("_median"))
        return head + table.to_html(index=False, float_format=lambda v: f"{v:.4g}", na_rep="—")
