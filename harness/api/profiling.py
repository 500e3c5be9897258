"""The harness from Python: profile, predict, rank and compare, each returning typed results, never printed text.
This module profiles (light: the CLI's profile command runs its sessions here); harness.api.queries ranks and
compares, harness.api.predicting predicts.

    import harness
    session = harness.profile(["a.onnx", "b.onnx"], device="raspberry-pi-4", repeats=5)
    session.summary                    # a DataFrame, a row per model
    harness.rank(session).best()       # the models that share rank 1
    harness.compare("a", "b").table
    harness.predict(cells, device="nb201-raspi4")   # NAS-Bench-201 cells, none of them run

The CLI's commands call these functions and print what they return. Errors are the harness's typed exceptions
(harness.HarnessError and its kinds), with the one-line messages the CLI prints.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from harness.api.session import Session
from harness.core.config import VARIABLES, DeviceProfile, environment_values, load_profile, resolve_results_dir
from harness.core.errors import ConfigError
from harness.core.shipped import PRESETS_DIR
from harness.core.targets import TARGET_BACKEND
from harness.models.input_feeds import dims_text
from harness.run.assemble import SessionRequest, SessionStart, start_session
from harness.run.session import BaseSession

KEYWORDS = {"device_name": "DEVICE_NAME", "cpus": "CPUS", "cpu_pinning": "CPU_PINNING", "memory": "MEMORY",
            "swap": "SWAP", "repeats": "REPEATS", "precision": "PRECISION", "max_repeats": "MAX_REPEATS",
            "adaptive_budget_s": "ADAPTIVE_BUDGET_S", "latency_statistic": "LATENCY_STATISTIC",
            "iterations": "ITERATIONS", "warmup": "WARMUP",
            "batch_size": "BATCH_SIZE", "sample_interval_ms": "SAMPLE_INTERVAL_MS", "timeout_s": "TIMEOUT_S",
            "backend": "BACKEND", "image": "IMAGE", "runtime": "RUNTIME", "per_op": "PER_OP",
            "results_dir": "RESULTS_DIR", "dims": "DIMS", "inputs": "INPUTS", "target": "TARGET"}
"""The one table of a profile's settings: profile()'s keyword, which is also the CLI's flag's argparse dest (--timeout
and --dim are the flags of timeout_s and dims), -> the env.template variable it sets; any other variable goes by its
own name (SWAP=...). The layers are: env.template < .env < the device's env file < HARNESS_SET_* < these."""
KEYWORD_OF = {variable: keyword for keyword, variable in KEYWORDS.items()}


def keyword_source(name: str) -> str:
    """Where a Python caller's override came from, as an error names it."""
    return f"harness.profile({KEYWORD_OF.get(name, name)}=...)"


def device_env(device: str | Path | None) -> Path | None:
    """A preset's name (devices/<name>.env) or an env file's path -> the file; one line naming the presets else."""
    if device is None:
        return None
    path = Path(device)
    if path.is_file():
        return path
    preset = PRESETS_DIR / f"{device}.env"
    if preset.is_file():
        return preset
    names = sorted(p.stem for p in PRESETS_DIR.glob("*.env"))
    close = difflib.get_close_matches(str(device), names, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]}? " if close else ""
    raise ConfigError(f"device={str(device)!r}: neither an env file nor a preset; {hint}name one of "
                      f"{', '.join(names)} or give an env file's path")


def profile_settings(**settings: Any) -> dict[str, str]:
    """Keywords and env.template variables -> variable: value (None dropped; True/False as 1/0, as env files say;
    dims={"seq": 128} as DIMS writes it, "seq=128")."""
    found: dict[str, str] = {}
    for key, value in settings.items():
        name = KEYWORDS.get(key, key)
        if name not in VARIABLES:
            raise ConfigError(f"{key}={value!r}: not a profile setting; use one of {', '.join(sorted(KEYWORDS))} "
                              "or an env.template variable (docs/variables.md)")
        if isinstance(value, Mapping):
            value = dims_text(value)
        if value is not None:
            found[name] = str(int(value)) if isinstance(value, bool) else str(value)
    return found


@contextmanager
def _progress(total: Callable[[], int]) -> Iterator[tuple[Callable[..., None] | None, Callable[..., None] | None]]:
    """rich's progress bar (a notebook shows it live), imported only when shown."""
    from harness.report.console import run_progress

    with run_progress(total) as callbacks:
        yield callbacks


def run_session(session: BaseSession, progress: bool = True) -> tuple[Session, dict[str, Any]]:
    """Run every planned run a session has not kept, under a progress bar or silently; returns it as a Session, with
    the summary its last run left (the one summary.json holds, at hand without reading anything back). The CLI's
    profile, sweep and resume run their sessions here too."""
    kept = len(session.runs)

    def planned() -> int:
        """Runs to go, read at every run: adaptive repeats add rounds as the session goes."""
        return len(session.plan.specs) - kept

    with _progress(planned) if progress else nullcontext((None, None)) as (on_start, on_done):
        summary = session.run(on_start, on_done)
    if session.backend_info.get("backend") == TARGET_BACKEND:  # a board's runs are a device's, with no import
        from harness.analysis.boards import register_boards
        from harness.analysis.throttle import throttle_notes

        session.plan.notes += throttle_notes(session.runs)
        chosen = session.profile.device_name if session.profile.sources.get("DEVICE_NAME") not in (
            "default", "env.template") else None
        session.plan.notes += register_boards(session.runs, session.store.path.parent, chosen)
    return Session(session.store.path), summary


def plan_profile(request: SessionRequest, env_file: str | Path | None, settings: Mapping[str, Any], *,
                 source: Callable[[str], str] = keyword_source) -> SessionStart:
    """The session that harness.profile and the CLI's profile and sweep run, planned and checked (every model
    resolved, every value validated), not run."""
    profile, sweep = device_profile(env_file, settings, source=source)
    return start_session(profile, request, sweep)


def device_profile(env_file: str | Path | None, settings: Mapping[str, Any], *,
                   source: Callable[[str], str] = keyword_source) -> tuple[DeviceProfile, list[float] | None]:
    """The profile from every layer, `settings` (profile()'s keywords) last, and the CPUS values of a sweep: `cpus`
    as a list sweeps them in one session, and make's CPUS (HARNESS_SET_CPUS) is then that list, not a CPUS value."""
    cpus = settings.get("cpus")
    sweep = [cpus_value(value, source("CPUS")) for value in cpus] if isinstance(cpus, (list, tuple)) else None
    variables = profile_settings(**{key: value for key, value in settings.items() if not (sweep and key == "cpus")})
    environment = {name: value for name, value in environment_values().items() if not (sweep and name == "CPUS")}
    return load_profile(env_file, variables, environment, override_source=source), sweep


def cpus_value(value: object, source: str) -> float:
    """One CPUS value of a sweep, validated as CPUS is."""
    parse, form = VARIABLES["CPUS"][1], VARIABLES["CPUS"][2]
    try:
        return float(parse(str(value)))
    except ValueError:
        raise ConfigError(f"CPUS={str(value)!r} (from {source}, a sweep's list) is not valid: "
                          f"expected {form}") from None


def start_profile(models: Iterable[str | Path] | str | Path, *, device: str | Path | None = None,
                  seed: int | None = None, parallel: int | str | None = None, **settings: Any) -> SessionStart:
    """The session profile() runs, planned and checked, not run."""
    names = tuple(str(model) for model in ([models] if isinstance(models, (str, Path)) else models))
    if not names:
        raise ConfigError("profile: give at least one model (a file or a zoo name)")
    request = SessionRequest(models=names, seed=seed, parallel=None if parallel is None else str(parallel))
    return plan_profile(request, device_env(device), settings)


def profile(models: Iterable[str | Path] | str | Path, *, device: str | Path | None = None,
            runtime: str | None = None, repeats: int | None = None, per_op: bool | None = None,
            cpus: float | str | list[float] | None = None, memory: str | None = None,
            results_dir: str | Path | None = None,
            seed: int | None = None, parallel: int | str | None = None, progress: bool = True,
            **settings: Any) -> Session:
    """Profile `models` (files or zoo names) under `device`'s limits (a preset such as "raspberry-pi-4", or an env
    file), as `harness profile` does, and return the stored session. Keywords override the device's variables;
    others are env.template's by name (ITERATIONS=50, SWAP="0"). `cpus=[1, 2, 4]` sweeps them, as `harness sweep`."""
    start = start_profile(models, device=device, seed=seed, parallel=parallel, runtime=runtime, repeats=repeats,
                          per_op=per_op, cpus=cpus, memory=memory, results_dir=results_dir, **settings)
    return run_session(start.session, progress)[0]


def open_session(session: str | Path | None = None, results_dir: str | Path | None = None) -> Session:
    """A stored session: its folder, or its id under `results_dir` (default: RESULTS_DIR; the newest there)."""
    return Session.open(session, resolve_results_dir(None if results_dir is None else str(results_dir)))
