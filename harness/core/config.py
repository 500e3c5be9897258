"""DeviceProfile: the target device's limits and the session's knobs, loaded once and validated once.

Precedence, lowest to highest: built-in defaults < env.template < .env < --env FILE < values given to
make (`make profile CPUS=2`, which the Makefile exports as HARNESS_SET_CPUS) < CLI flags.
Files are read as data by python-dotenv (no interpolation, no shell), so a value is never executed.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dotenv import dotenv_values

from harness.core.errors import ConfigError
from harness.core.targets import FORM as TARGET_FORM
from harness.core.targets import canonical_target

_SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """'512m' -> bytes. Units k/m/g/t are binary (KiB, MiB, ...), as Docker reads them."""
    match = _SIZE_RE.match(text)
    if not match:
        raise ValueError(text)
    return int(float(match.group(1)) * _SIZE_UNITS[match.group(2).lower()])


def _number(kind: type, low: float, high: float = math.inf) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        value = kind(text)
        if not (low <= value <= high) or (kind is float and not math.isfinite(value)):
            raise ValueError(text)
        return value

    return parse


def _choice(*options: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        value = text.strip().lower()
        if value not in options:
            raise ValueError(text)
        return value

    return parse


def _positive_float(text: str) -> float:
    value = float(text)
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(text)
    return value


def _flag(text: str) -> bool:
    value = text.strip().lower()
    if value not in ("0", "1", "true", "false"):
        raise ValueError(text)
    return value in ("1", "true")


_DIM_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_.-]*)=([1-9][0-9]{0,6})$")


def parse_dims(text: str) -> str:
    """'seq=128, h=320 w=320' -> 'seq=128 h=320 w=320': sizes of named dynamic input dimensions, canonical (one
    space between pairs, a name given twice keeps its last size), so equal settings record equal conditions."""
    sizes: dict[str, str] = {}
    for item in text.replace(",", " ").split():
        match = _DIM_RE.match(item)
        if not match:
            raise ValueError(text)
        sizes.pop(match.group(1), None)
        sizes[match.group(1)] = match.group(2)
    return " ".join(f"{name}={size}" for name, size in sizes.items())


def dim_sizes(text: str) -> dict[str, int]:
    """A canonical DIMS value as {name: size}."""
    return {name: int(size) for name, _, size in (item.partition("=") for item in text.split())}


def _optional_text(text: str) -> str:
    return text.strip()


def _text(text: str) -> str:
    if not text.strip():
        raise ValueError(text)
    return text.strip()


# variable -> (field, parser, accepted form shown in errors, default as written in env.template)
VARIABLES: dict[str, tuple[str, Callable[[str], Any], str, str]] = {
    "DEVICE_NAME": ("device_name", _text, "any non-empty text", "generic"),
    "CPUS": ("cpus", _positive_float, "a number > 0 such as 2 or 0.5", "1"),
    "CPU_PINNING": ("cpu_pinning", _choice("auto", "on", "off"), "auto, on or off", "auto"),
    "MEMORY": ("memory_bytes", parse_size, "a size such as 512m or 2g (units k, m, g)", "2g"),
    "SWAP": ("swap_bytes", parse_size, "a size such as 0, 256m or 1g", "0"),
    "REPEATS": ("repeats", _number(int, 1, 10_000), "a whole number >= 1", "7"),
    "PRECISION": ("precision_pct", _number(float, 0, 100), "a percentage from 0 to 100 such as 2 (0: off)", "2"),
    "MAX_REPEATS": ("max_repeats", _number(int, 1, 10_000), "a whole number >= 1", "15"),
    "ADAPTIVE_BUDGET_S": ("adaptive_budget_s", _number(float, 0, 10_000_000), "a number of seconds >= 0", "300"),
    "LATENCY_STATISTIC": ("latency_statistic", _choice("p50", "p05"), "p50 or p05", "p05"),
    "ITERATIONS": ("iterations", _number(int, 1, 10_000_000), "a whole number >= 1", "500"),
    "WARMUP": ("warmup", _number(int, 0, 10_000_000), "a whole number >= 0", "20"),
    "BATCH_SIZE": ("batch_size", _number(int, 1, 1_000_000), "a whole number >= 1", "1"),
    "SAMPLE_INTERVAL_MS": ("sample_interval_ms", _number(float, 1, 1000), "a number of ms from 1 to 1000", "10"),
    "TIMEOUT_S": ("timeout_s", _positive_float, "a number of seconds > 0", "600"),
    "BACKEND": ("backend", _choice("auto", "docker", "local"), "auto, docker or local", "auto"),
    "IMAGE": ("image", _text, "a Docker image tag such as harness-runtime:latest", "harness-runtime:latest"),
    "RESULTS_DIR": ("results_dir", _text, "a directory path", "results"),
    "PER_OP": ("per_op", _flag, "0 or 1", "0"),
    "RUNTIME": ("runtime", _choice("onnxruntime", "ncnn", "litert"), "onnxruntime, ncnn or litert", "onnxruntime"),
    "DIMS": ("dims", parse_dims, 'sizes of named dynamic dimensions such as "seq=128 h=320 w=320" (NAME=SIZE, '
             "SIZE a whole number >= 1, pairs separated by spaces)", ""),
    "INPUTS": ("inputs", _optional_text, "the path of an .npz file of arrays named after the model's inputs", ""),
    "TARGET": ("target", canonical_target, TARGET_FORM, ""),
}
_MIN_MEMORY_BYTES = 16 * 1024**2
SET_PREFIX = "HARNESS_SET_"
"""HARNESS_SET_<VARIABLE> in the environment sets <VARIABLE>; the Makefile exports one per variable given to make."""


@dataclass(frozen=True)
class DeviceProfile:
    """One validated profile. Sizes are bytes, times seconds unless the name says otherwise."""

    device_name: str
    cpus: float
    cpu_pinning: str
    memory_bytes: int
    swap_bytes: int
    repeats: int
    precision_pct: float
    max_repeats: int
    adaptive_budget_s: float
    latency_statistic: str
    iterations: int
    warmup: int
    batch_size: int
    sample_interval_ms: float
    timeout_s: float
    backend: str
    image: str
    results_dir: str
    per_op: bool
    runtime: str
    dims: str = ""
    inputs: str = ""
    target: str = ""
    sources: Mapping[str, str] = field(default_factory=dict, compare=False)
    warnings: tuple[str, ...] = field(default=(), compare=False)

    @property
    def memory_mib(self) -> float:
        return self.memory_bytes / 1024**2

    @property
    def dim_sizes(self) -> dict[str, int]:
        """DIMS as {dimension name: size}."""
        return dim_sizes(self.dims)

    @property
    def threads(self) -> int:
        """Intra-op threads for frameworks: ceil(CPUS), since they otherwise see every host core."""
        return max(1, math.ceil(self.cpus))

    def as_variables(self) -> dict[str, Any]:
        """The profile as the variables of env.template, typed (sizes in bytes), for session.json."""
        values = asdict(self)
        # Flags as 0/1, as env.template writes them, so a resumed session reads them back unchanged
        return {name: int(value) if isinstance(value := values[spec[0]], bool) else value
                for name, spec in VARIABLES.items()}


def project_root() -> Path:
    """The checkout that holds env.template: the working directory, as `make` runs from it."""
    return Path.cwd()


def read_env_file(path: Path, warnings: list[str]) -> dict[str, str]:
    """Key/values of one env file, as data. Unknown keys are ignored so one .env can serve other tools,
    but one that looks like a misspelt harness variable earns a warning: a typo must not pass silently."""
    if not path.is_file():
        raise ConfigError(f"env file {path} not found; pass an existing file (e.g. ENV=devices/jetson-nano.env)")
    values = dotenv_values(path, interpolate=False)
    for key in values:
        close = difflib.get_close_matches(key, VARIABLES, n=1, cutoff=0.75) if key not in VARIABLES else []
        if close:
            warnings.append(f"{key} in {path} is not a harness variable (ignored); did you mean {close[0]}?")
    return {key: value for key, value in values.items() if key in VARIABLES and value is not None}


def environment_values(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables set through HARNESS_SET_<NAME> (empty means not given, as make exports unset ones)."""
    environ = os.environ if environ is None else environ
    return {name: environ[SET_PREFIX + name] for name in VARIABLES if environ.get(SET_PREFIX + name)}


def flag_source(name: str) -> str:
    """Where an override came from, as a message names it: the CLI flag that sets `name`."""
    return f"--{name.lower().replace('_', '-')}"


def load_profile(env_file: str | Path | None = None, overrides: Mapping[str, Any] | None = None,
                 environment: Mapping[str, str] | None = None,
                 override_source: Callable[[str], str] = flag_source) -> DeviceProfile:
    """Merge the layers and validate every value once; errors name the variable, value, source and form.

    `environment` is the HARNESS_SET_* layer (default: read from os.environ); `override_source` names where an
    override came from (a CLI flag, or a keyword of harness.profile)."""
    raw: dict[str, tuple[str, str]] = {name: (spec[3], "default") for name, spec in VARIABLES.items()}
    warnings: list[str] = []
    root = project_root()
    layers = [root / "env.template", root / ".env"]
    for path in layers:
        if path.is_file():
            raw.update({k: (v, path.name) for k, v in read_env_file(path, warnings).items()})
    if env_file:
        path = Path(env_file)
        raw.update({k: (v, str(path)) for k, v in read_env_file(path, warnings).items()})
    given = environment_values() if environment is None else environment
    raw.update({name: (value, f"make {name}=... ({SET_PREFIX}{name})") for name, value in given.items()})
    for name, value in (overrides or {}).items():
        if value is not None:
            raw[name] = (str(value), override_source(name))
    fields: dict[str, Any] = {}
    for name, (text, source) in raw.items():
        attr, parse, form, _ = VARIABLES[name]
        try:
            fields[attr] = parse(text)
        except (ValueError, TypeError, OverflowError):
            raise ConfigError(f"{name}={text!r} (from {source}) is not valid: expected {form}") from None
    if fields["memory_bytes"] < _MIN_MEMORY_BYTES:
        text, source = raw["MEMORY"]
        unitless = _SIZE_RE.match(text) and not re.search(r"[a-z]", text, re.IGNORECASE)
        hint = f"; did you mean {text.strip()}m?" if unitless and parse_size(f"{text}m") >= _MIN_MEMORY_BYTES else ""
        raise ConfigError(f"MEMORY={text!r} (from {source}) is too small: a Python runner needs at least 16m "
                          f"(a size with no unit is bytes){hint}")
    if fields["runtime"] == "ncnn" and fields["batch_size"] != 1:
        text, source = raw["BATCH_SIZE"]
        raise ConfigError(f"BATCH_SIZE={text!r} (from {source}) cannot run on RUNTIME=ncnn, which feeds one input at "
                          "a time: set BATCH_SIZE=1, or RUNTIME=onnxruntime for batches")
    return DeviceProfile(**fields, sources={name: source for name, (_, source) in raw.items()},
                         warnings=tuple(warnings))


def host_cpu_count() -> int:
    """Cores this process may run on (affinity), not the machine's total."""
    return len(os.sched_getaffinity(0))


def resolve_results_dir(explicit: str | None) -> Path:
    """--results-dir, else RESULTS_DIR of the profile (env.template < .env < HARNESS_ENV_FILE, the file make's ENV
    names), for the commands that read results and take no profile of their own."""
    if explicit:
        return Path(explicit)
    return Path(load_profile(os.environ.get("HARNESS_ENV_FILE") or None).results_dir)
