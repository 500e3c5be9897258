"""Options and output shared by the analysis commands (import-device, regress, predict, rank, report).

User values from `make` arrive as HARNESS_* environment variables (never through a shell); an empty
variable means "not given".
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import Any

from rich.markup import escape

from harness.core import metric_registry
from harness.report.console import err_console, out_console
from harness.store.results import ALL_SESSIONS, SCHEMA_VERSION

stdout, stderr = out_console, err_console  # the analysis commands print through the shared consoles


def env_default(name: str) -> str | None:
    return os.environ.get(name) or None


def add_results_options(parser: argparse.ArgumentParser, *, pooled: bool = False, json_flag: bool = True) -> None:
    parser.add_argument("--results-dir", help="results directory (default: RESULTS_DIR of the profile)")
    help_text = "session id or path (default: the newest)"
    if pooled:
        help_text += f"; `{ALL_SESSIONS}` pools every session"
    parser.add_argument("--session", default=env_default("HARNESS_SESSION"), help=help_text)
    if json_flag:
        parser.add_argument("--json", action="store_true", help="print JSON only, on stdout")


def add_metric_option(parser: argparse.ArgumentParser, default: str | None, help_text: str,
                      accept: Callable[[metric_registry.Metric], bool]) -> None:
    choices = ", ".join(metric_registry.names(accept))
    parser.add_argument("--metric", default=env_default("HARNESS_METRIC") or default,
                        help=f"{help_text}; one of: {choices} (make: METRIC=...)")


def add_fit_option(parser: argparse.ArgumentParser, fit_names: tuple[str, ...]) -> None:
    parser.add_argument(
        "--fit", default=env_default("HARNESS_FIT") or "auto", choices=("auto", *fit_names),
        help="auto (default: the fit with the best held-out ±10%% share) or one fit forced (make regress: FIT=...)",
    )


def add_across_repeats_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--across-repeats", default=env_default("HARNESS_ACROSS_REPEATS"), choices=metric_registry.ACROSS_REPEATS,
        help="how a model's repeats become its harness value: fastest-inference (the default for latency_ms and "
             "latency_p50_ms: the fastest single inference of all repeats), fastest (the fastest repeat; the default "
             "for other times, which other load only lengthens) or median (the default for memory) "
             "(make: ACROSS_REPEATS=...)",
    )


def add_device_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--device", default=env_default("HARNESS_DEVICE"), required=env_default("HARNESS_DEVICE") is None,
        help="device name given to import-device (make: DEVICE=...)",
    )


def print_json(obj: dict[str, Any]) -> None:
    """The command's result as one JSON document on stdout, versioned like the stored results."""
    json.dump({"schema_version": SCHEMA_VERSION, **obj}, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def warn(message: str) -> None:
    """`message` as it is (model names from a user's files may hold `[/x]`, which rich would read as markup)."""
    stderr.print(f"[yellow]warning:[/yellow] {escape(message)}", highlight=False, soft_wrap=True)


def fmt(value: Any, digits: int = 4) -> str:
    """Numbers to `digits` significant figures; missing as an em dash."""
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)
