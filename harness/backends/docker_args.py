"""DOCKER_ARGS: the few `docker run` options a user may add to every run container, parsed into SDK fields.

Only bind mounts (-v/--volume), environment variables (-e/--env) and devices (--device) are accepted;
anything else (--privileged, --network, --cap-add, ...) would undo the limits or the lockdown, and is
refused with one line naming the option. The text is split like a shell would (shlex) and never run
by one.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from docker.types import Mount

from harness.core.errors import ConfigError

RESERVED_TARGETS = ("/harness", "/tmp")  # where the backend mounts the spec, model, script and the tmpfs
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_FLAGS = {"-v": "volume", "--volume": "volume", "-e": "env", "--env": "env", "--device": "device"}
ALLOWED = "-v/--volume SRC:DST[:ro|rw], -e/--env NAME=VALUE, --device /dev/X[:/dev/Y[:rwm]]"


@dataclass(frozen=True)
class DockerArgs:
    mounts: list[Mount] = field(default_factory=list)
    environment: dict[str, str] = field(default_factory=dict)
    devices: list[str] = field(default_factory=list)

    def options(self) -> dict[str, Any]:
        """Keyword arguments for containers.create (mounts are merged by the caller)."""
        return {key: value for key, value in (("environment", self.environment), ("devices", self.devices))
                if value}

    def describe(self) -> dict[str, Any]:
        return {"volumes": [f"{m['Source']}:{m['Target']}:{'ro' if m['ReadOnly'] else 'rw'}" for m in self.mounts],
                "env": sorted(self.environment), "devices": self.devices}


def _bad(option: str, why: str) -> ConfigError:
    return ConfigError(f"DOCKER_ARGS {option}: {why}")


def _volume(value: str) -> Mount:
    parts = value.split(":")
    if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] not in ("ro", "rw")):
        raise _bad(f"--volume {value}", "expected SRC:DST or SRC:DST:ro|rw (absolute paths)")
    source, target = Path(parts[0]), parts[1]
    if not source.is_absolute() or not source.exists():
        raise _bad(f"--volume {value}", f"{source} must be an existing absolute host path")
    if not target.startswith("/") or any(target == r or target.startswith(r + "/") for r in RESERVED_TARGETS):
        raise _bad(f"--volume {value}", f"target must be absolute and outside {', '.join(RESERVED_TARGETS)}")
    return Mount(target, str(source), type="bind", read_only=len(parts) == 2 or parts[2] == "ro")


def _env(value: str) -> tuple[str, str]:
    name, sep, text = value.partition("=")
    if not sep or not _ENV_NAME.match(name):
        raise _bad(f"--env {value}", "expected NAME=VALUE")
    return name, text


def _device(value: str) -> str:
    host = value.split(":")[0]
    if not host.startswith("/dev/") or not Path(host).exists():
        raise _bad(f"--device {value}", f"{host} is not an existing device under /dev")
    return value


def parse_docker_args(text: str | None) -> DockerArgs:
    """`-v /data:/data -e FOO=1 --device /dev/dri` -> DockerArgs; one ConfigError line for anything else."""
    try:
        words = shlex.split(text or "")
    except ValueError as err:
        raise _bad(repr(text), f"cannot be split ({err})") from None
    parsed = DockerArgs()
    index = 0
    while index < len(words):
        word = words[index]
        flag, sep, value = word.partition("=") if word.startswith("--") else (word, "", "")
        kind = _FLAGS.get(flag)
        if kind is None:
            raise _bad(word, f"is not allowed; allowed: {ALLOWED}")
        if not sep:
            index += 1
            if index == len(words):
                raise _bad(word, "needs a value")
            value = words[index]
        if kind == "volume":
            parsed.mounts.append(_volume(value))
        elif kind == "env":
            name, text_value = _env(value)
            parsed.environment[name] = text_value
        else:
            parsed.devices.append(_device(value))
        index += 1
    return parsed
