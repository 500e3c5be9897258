"""Shared by the benchmark scripts: run the real CLI (and bare scripts), read the stored runs, print a table,
write JSON with the goals each benchmark checks."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness.core import metric_registry
from harness.store.results import list_sessions, load_runs

ROOT = Path(__file__).resolve().parent.parent
TINY_MODEL_NAME = "bench_input.onnx"
OUT_DIR = ROOT / "results" / "bench"
ONNX_BENCH = ROOT / "bench_scripts" / "onnx_bench.py"
WORKLOADS = Path(__file__).resolve().parent / "workloads"
TEST_WORKLOADS = ROOT / "tests" / "workloads"


@dataclass(frozen=True)
class Session:
    """One CLI session: its stored runs, and when the CLI was spawned and seen to end, on the host's monotonic clock
    (the clock of every run's clock_s), so its whole wall time splits into start, runs, gaps between them and end."""

    runs: list[dict[str, Any]]
    started_s: float
    ended_s: float

    @property
    def wall_s(self) -> float:
        return self.ended_s - self.started_s


@dataclass(frozen=True)
class Goal:
    """One goal of the issue: what was promised, what this run measured, and why it was missed if it was."""

    name: str
    target: str
    measured: str
    met: bool | None  # None: informative figure, no target
    note: str = ""


def placeholder_model(directory: Path) -> Path:
    """Workload scripts ignore their model argument, but the harness checks it exists and parses."""
    sys.path.insert(0, str(ROOT))
    from tests.conftest import make_matmul_model

    path = directory / TINY_MODEL_NAME
    return path if path.exists() else make_matmul_model(path, size=64, layers=1)


def zoo_model(name: str) -> Path:
    """A zoo model's cached ONNX export (built on first use; needs `make setup-zoo`)."""
    from harness.zoo import export

    return export(name)


def docker_usable() -> tuple[bool, str]:
    """Whether the Docker backend can run here (an engine answers and the profile's IMAGE exists), and why not."""
    from harness.backends.docker import engine_status
    from harness.core.config import load_profile

    return engine_status(load_profile().image)


def unbound_limit_flags(iterations: int, warmup: int) -> list[str]:
    """Profile flags for every host core and all host memory: the limits exist but never bind."""
    memory_mib = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 1024**2
    return ["--cpus", str(len(os.sched_getaffinity(0))), "--memory", f"{memory_mib}m",
            "--iterations", str(iterations), "--warmup", str(warmup)]


def harness(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """One harness command through the real CLI, its output captured; a failure ends the benchmark in one line."""
    done = subprocess.run([sys.executable, "-m", "harness.cli", *args], env=env, capture_output=True, text=True,
                          cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"harness {' '.join(args)} failed: {done.stderr.strip()[-400:]}")
    return done


def profile_runs(directory: Path, script: Path | None, script_args: list[str], *, backend: str, repeats: int,
                 extra_flags: list[str] | None = None, models: Sequence[str | Path] | None = None,
                 command: str = "profile") -> Session:
    """One `harness profile` (or `sweep`) session through the real CLI; returns its stored runs and wall time."""
    results = directory / "results"
    before = set(list_sessions(results))
    argv = [sys.executable, "-m", "harness.cli", command, *map(str, models or [placeholder_model(directory)]),
            "--backend", backend, "--repeats", str(repeats), "--results-dir", str(results), "--json",
            *(extra_flags or [])]
    if script is not None:
        argv += ["--script", str(script), "--", *script_args]
    started = time.monotonic()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    ended = time.monotonic()
    if done.returncode != 0:
        raise SystemExit(f"harness {command} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    (session,) = set(list_sessions(results)) - before
    runs = load_runs(session)
    failed = [run for run in runs if run["status"] != "ok"]
    if failed:
        raise SystemExit(f"{len(failed)} run(s) of {session} ended {failed[0]['status']}: {failed[0]['stderr_tail']}")
    return Session(runs, started, ended)


def headline(session: Path) -> dict[str, float]:
    """Each model's median headline latency over its runs in a session."""
    value = metric_registry.get(metric_registry.LATENCY).value
    found: dict[str, list[float]] = {}
    for run in load_runs(session):
        latency = value(run.line) if run.ok else None
        if latency is not None:
            found.setdefault(run.model_name, []).append(float(latency))
    return {model: statistics.median(values) for model, values in found.items()}


def shares(errors: Iterable[float]) -> dict[str, float]:
    """The share of relative errors within ±10% and ±5%, and their median magnitude."""
    magnitude = [abs(error) for error in errors]
    return {"within ±10%": statistics.fmean(m <= 0.10 for m in magnitude),
            "within ±5%": statistics.fmean(m <= 0.05 for m in magnitude),
            "median |error|": statistics.median(magnitude)}


def shown(found: dict[str, float]) -> dict[str, str]:
    """shares (or any such figures) as a table prints them: shares as whole percents, errors to a tenth."""
    return {name: (f"{value:.0%}" if name.startswith("within") else f"{value:.1%}" if "error" in name else str(value))
            for name, value in found.items()}


def bare_run(script: Path, args: list[str]) -> tuple[float, dict[str, Any]]:
    """The script run directly, no harness: (wall time spawn to exit, what it reported via HARNESS_METRICS)."""
    with tempfile.TemporaryDirectory(prefix="bench-bare-") as tmp:
        metrics = Path(tmp) / "metrics.jsonl"
        env = {**os.environ, "HARNESS_METRICS": str(metrics)}
        started = time.monotonic()
        subprocess.run([sys.executable, str(script), *args], env=env, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, check=True)
        wall_s = time.monotonic() - started
        reported: dict[str, Any] = {}
        for line in metrics.read_text().splitlines():
            reported.update(json.loads(line))
    return wall_s, reported


def compile_bytecode() -> str:
    """Compile the harness package's bytecode, as `pip install` does, so start-up figures are a user's and not an
    environment's: where PYTHONDONTWRITEBYTECODE is set (as on this host), every start would otherwise compile each
    harness module it imports from source. Returns a note saying so."""
    import compileall

    compileall.compile_dir(ROOT / "harness", quiet=1)
    setting = os.environ.get("PYTHONDONTWRITEBYTECODE")
    return f"harness bytecode compiled first, as pip install does (PYTHONDONTWRITEBYTECODE={setting or 'unset'} here)"


def load_note(when: str) -> str:
    """The host's 1-minute load average, for the figures beside it (2 cores here: above 2, others wait for a core)."""
    return f"load average {os.getloadavg()[0]:.1f} {when}"


def pct(value: float, reference: float) -> float:
    """Signed error of `value` against `reference`, in percent."""
    return 100.0 * (value - reference) / reference


def farthest(values: Iterable[float]) -> float:
    """The value farthest from zero, sign kept: the worst of a set of errors."""
    return max(values, key=abs)


def print_table(title: str, rows: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for column in rows[0] if rows else []:
        table.add_column(str(column), justify="right")
    for row in rows:
        table.add_row(*(f"{value:.4g}" if isinstance(value, float) else str(value) for value in row.values()))
    Console(width=200).print(table)


def rescore(out: Path, score: Callable[[], dict[str, Any]], show: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """A benchmark's scoring from its committed summary: timed (`rescore_s`), shown, written to `out`."""
    started = time.monotonic()
    result = score()
    result["rescore_s"] = round(time.monotonic() - started, 1)
    show(result)
    write_json(out, result)
    return result


def write_json(path: Path, rows: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows, indent=2) + "\n")


def write_report(name: str, rows: list[dict[str, Any]], goals: list[Goal], notes: list[str] | None = None,
                 raw: dict[str, Any] | None = None, tables: dict[str, list[dict[str, Any]]] | None = None) -> Path:
    """results/bench/<name>.json: the table's rows, further tables by title, the goals (read by goals.py), notes
    and raw per-run values."""
    path = OUT_DIR / f"{name}.json"
    write_json(path, {"benchmark": name, "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "rows": rows,
                      "tables": tables or {}, "goals": [asdict(goal) for goal in goals], "notes": notes or [],
                      "raw": raw or {}})
    for note in notes or []:
        print(f"note: {note}")
    print(json.dumps({"written": str(path)}))
    return path


def api_runs(directory: Path, model: Path, cpu_plans: list[Any], *, rounds: int, iterations: int, warmup: int,
             backend: Any = None, seed: int = 1, sample_interval_ms: float = 10.0) -> list[dict[str, Any]]:
    """One session through the Python API (for CPU plans the CLI does not offer, such as another CFS period):
    onnx_bench.py on `model`, each round running every CpuLimits in `cpu_plans` once, in a seeded shuffled order."""
    import random
    from dataclasses import replace

    from harness.backends.local import LocalBackend
    from harness.core.config import load_profile
    from harness.models.resolve import resolve_model
    from harness.run.session import Plan, Session, plan_session

    profile = load_profile(None, {"RESULTS_DIR": str(directory / "results"), "REPEATS": "1",
                                  "ITERATIONS": str(iterations), "WARMUP": str(warmup),
                                  "SAMPLE_INTERVAL_MS": str(sample_interval_ms)})
    session_id = f"bench-{time.strftime('%H%M%S')}-{random.Random().randrange(10**6):06d}"
    template = plan_session(profile, [resolve_model(str(model), None)], [1.0], (), session_id, seed=seed)
    base, rng = template.specs[0], random.Random(seed)
    specs = []
    for round_index in range(rounds):
        order = list(range(len(cpu_plans)))
        rng.shuffle(order)
        specs += [replace(base, run_id=f"{session_id}-r{round_index:03d}-{len(specs) + i:04d}", round=round_index,
                          repeat=round_index, cpu=cpu_plans[index]) for i, index in enumerate(order)]
    plan = Plan(session_id, seed, specs, template.models, sorted({c.cpus for c in cpu_plans}))
    Session(profile, plan, backend or LocalBackend(), "benchmark").run()
    runs = load_runs(directory / "results" / session_id)
    failed = [run for run in runs if run["status"] != "ok"]
    if failed:
        raise SystemExit(f"{len(failed)} run(s) ended {failed[0]['status']}: {failed[0]['stderr_tail']}")
    return runs
