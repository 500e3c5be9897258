"""Terminal output for people: the session header, a live progress bar, and the summary table (rich).

Everything for people goes to stderr except the final table, so `--json` can own stdout alone.
"""

from __future__ import annotations

import contextlib
import datetime
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from harness.analysis.stats import UNSTABLE_RULE
from harness.core import metric_registry
from harness.measure.spec import RunSpec


class PipedConsole(Console):
    """rich's console, whose closed pipe (`harness zoo list | head -1`) reaches the CLI as the BrokenPipeError it is,
    where every command's ends the same way; rich's own ending exits 1 and points stdout at /dev/null, even for
    stderr's console."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError(f"{'stderr' if self.stderr else 'stdout'}: its reader is gone")


# Tables are wide: piped output (a file, a CI log) gets 200 columns instead of rich's default 80.
WIDTH = shutil.get_terminal_size((200, 24)).columns
err_console = PipedConsole(stderr=True, soft_wrap=True, width=WIDTH)
out_console = PipedConsole(soft_wrap=True, width=WIDTH)

STATUS_STYLE = {"ok": "green", "oom": "red", "timeout": "yellow", "error": "red"}


@contextmanager
def run_progress(total: Callable[[], int]) -> Iterator[tuple[Any, Any]]:
    """Yields (on_start, on_done) callbacks that drive a progress bar over model x repeat, with ETA; plain lines
    where stderr is no terminal (a CI log, a notebook's output), which rich's live bar would leave blank. `total`
    is read at every run: adaptive repeats add rounds as the session goes."""
    if not err_console.is_terminal:
        with plain_progress(total) as callbacks:
            yield callbacks
        return
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        TextColumn("eta"), TimeRemainingColumn(), console=err_console, transient=False)
    task = progress.add_task("starting", total=total())

    def on_start(spec: RunSpec) -> None:
        progress.update(task, total=total(),
                        description=f"{spec.model_name} cpus={spec.cpu.cpus:g} repeat {spec.repeat + 1}")

    def on_done(spec: RunSpec, result: dict[str, Any] | None) -> None:
        status = (result or {}).get("status", "error")
        if status != "ok":
            tail = ((result or {}).get("stderr_tail") or "").strip().splitlines()
            progress.console.print(f"[{STATUS_STYLE.get(status, 'red')}]{spec.model_name} repeat {spec.repeat + 1}: "
                                   f"{status}[/] {tail[-1] if tail else ''}")
        progress.advance(task)

    with progress:
        yield on_start, on_done


@contextmanager
def plain_progress(total: Callable[[], int], clock: Callable[[], float] = time.monotonic) -> Iterator[tuple[Any, Any]]:
    """Yields (on_start, on_done) that print one line as each run starts: its place, model, CPUs, round, the time so
    far and the time left at the mean pace of the runs done; a run that failed says so. The total's line comes when
    the session ends, not when the runs planned so far are done: an adaptive round may follow them."""
    started, done = clock(), [0]

    def say(text: str) -> None:
        """A progress line, best effort: a terminal or log that went away (SIGHUP) never stops the session (its
        broken pipe is a BrokenPipeError, an OSError: PipedConsole)."""
        with contextlib.suppress(OSError, ValueError):
            err_console.print(text, highlight=False, markup=False)

    def on_start(spec: RunSpec) -> None:
        elapsed = clock() - started
        eta = _clock_text(elapsed / done[0] * (total() - done[0])) if done[0] else "?"
        say(f"run {done[0] + 1}/{total()}: {spec.model_name} cpus={spec.cpu.cpus:g} round {spec.repeat + 1} · elapsed "
            f"{_clock_text(elapsed)} · eta {eta}")

    def on_done(spec: RunSpec, result: dict[str, Any] | None) -> None:
        done[0] += 1
        status = (result or {}).get("status", "error")
        if status != "ok":
            tail = ((result or {}).get("stderr_tail") or "").strip().splitlines()
            say(f"{spec.model_name} round {spec.repeat + 1}: {status}{f' {tail[-1]}' if tail else ''}")

    yield on_start, on_done
    if done[0]:
        say(f"{done[0]} runs done in {_clock_text(clock() - started)}")


def _clock_text(seconds: float) -> str:
    return str(datetime.timedelta(seconds=round(seconds)))


def _cell(metrics: dict[str, Any], metric: metric_registry.Metric) -> str:
    summary = metrics.get(metric.name)
    if not summary or summary.get("median") is None:
        return "-"
    text = f"{summary['median']:.{metric.digits}f}"
    if summary.get("iqr"):
        text += f" ±{summary['iqr']:.{metric.digits}f}"
    return f"[yellow]{text}*[/]" if summary.get("unstable") else text


def summary_table(summary: dict[str, Any]) -> Table:
    table = Table(title=f"{summary['device_name']} · backend {summary['backend']} ({summary['isolation']}) · "
                        f"memory {summary['memory_mib']:.0f} MiB · median ±IQR over ok runs")
    shown = [metric_registry.get(name) for name in metric_registry.CONSOLE_METRICS]
    for column in ("model", "cpus", "ok/runs", *(f"{m.label} {m.unit}" for m in shown)):
        table.add_column(column, justify="left" if column == "model" else "right")
    for entry in summary["models"]:
        metrics = entry["metrics"]
        bad = {k: v for k, v in entry["statuses"].items() if k != "ok"}
        ok = f"{entry['n_ok']}/{entry['n_runs']}" + (" " + " ".join(f"{k}={v}" for k, v in bad.items()) if bad else "")
        label = entry.get("condition_label")
        name = entry["model_name"] + (f" [{label}]" if label else "")
        table.add_row(name, f"{entry['cpus']:g}", ok, *(_cell(metrics, m) for m in shown))
    return table


def print_summary(summary: dict[str, Any]) -> None:
    out_console.print(summary_table(summary))
    for entry in summary["models"]:
        if entry.get("shorter_than_quota_window_runs"):
            err_console.print(f"[yellow]quota[/]: {entry['model_name']} cpus={entry['cpus']:g}: inferences shorter "
                              "than the CFS quota's run window, so most run at full speed and a few absorb the stall; "
                              "p50 shows the unlimited speed, and latency ms is the mean (docs/measurement.md)")
    quota = sorted({f"{e['cpus']:g}" for e in summary["models"] if e.get("latency_headline") == "mean"})
    elsewhere = "its median" if any(e.get("latency_headline") == "p50" for e in summary["models"]) else (
        "its 5th percentile")
    if quota:
        err_console.print(f"latency ms: each run's mean inference at CPUS={','.join(quota)} (CFS quota: the median "
                          f"there shows the unlimited speed between the quota's stalls), {elsewhere} elsewhere")
    unstable = [(e["model_name"], e["cpus"], e["unstable_metrics"]) for e in summary["models"] if e["unstable_metrics"]]
    for model, cpus, names in unstable:
        err_console.print(f"[yellow]unstable[/]: {model} cpus={cpus:g}: {UNSTABLE_RULE} for {', '.join(names)}; "
                          "raise REPEATS or ITERATIONS, or quiet the machine (see docs/measurement.md: unstable)")
    throttled = [(e["model_name"], e["throttled_runs"]) for e in summary["models"] if e["throttled_runs"]]
    for model, count in throttled:
        err_console.print(f"[yellow]throttled[/]: {model}: {count} run(s) spent >10% of CFS periods throttled; "
                          "latency tails are bent by the quota (whole CPUS with CPU_PINNING=auto avoid it)")
    noisy = [e for e in summary["models"] if e.get("noisy_runs")]
    if noisy:
        runs = sum(e["noisy_runs"] for e in noisy), sum(e["n_ok"] for e in summary["models"])
        names = ", ".join(f"{e['model_name']} ({e['noisy_runs']})" for e in noisy)
        err_console.print(f"[yellow]noisy[/]: {runs[0]} of {runs[1]} runs shared the machine with other work: {names} "
                          "(each run's host_load says what); quiet the machine and profile again for numbers that "
                          "repeat (docs/measurement.md: noisy)")
    err_console.print(f"results: {summary['results_dir']}")
