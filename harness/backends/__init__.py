"""Backends create one limited environment per run and start the runner in it.

BACKENDS registers each backend by name (BACKEND=docker|local) with a probe, which says whether it can run on this
host and why, and a factory. `auto` takes the first one whose probe says yes, in the registry's order: Docker when an
engine answers and the runtime image exists (and runs RUNTIME's engine, when its label says), else the local cgroup
backend. The choice and the reason are returned so
the summary and every result can say which. Each factory imports its module when called: the Docker SDK loads only
where Docker is asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.backends.base import Backend
from harness.core.errors import BackendError

if TYPE_CHECKING:  # type-only: the local backend also loads on a bare board Python (harness.backends.target.agent)
    from harness.core.config import DeviceProfile


@dataclass(frozen=True)
class BackendKind:
    """One entry of BACKENDS: the backend's BACKEND name, its probe and its factory."""

    name: str
    probe: Callable[[DeviceProfile], tuple[bool, str]]
    """(usable, why): whether the backend can run here, in a few words for the session's first line."""
    factory: Callable[[DeviceProfile], Backend]


def _docker_probe(profile: DeviceProfile) -> tuple[bool, str]:
    from harness.backends.docker import engine_status

    return engine_status(profile.image, profile.runtime)


def _docker(profile: DeviceProfile) -> Backend:
    from harness.backends.docker import DockerBackend

    return DockerBackend(profile.image)


def _local_probe(_profile: DeviceProfile) -> tuple[bool, str]:
    return True, "local, since it needs no engine (cgroups where this host lets them be written, else rlimits)"


def _local(_profile: DeviceProfile) -> Backend:
    from harness.backends.local import LocalBackend

    return LocalBackend()


BACKENDS: tuple[BackendKind, ...] = (
    BackendKind("docker", _docker_probe, _docker),
    BackendKind("local", _local_probe, _local),
)
BY_NAME = {kind.name: kind for kind in BACKENDS}


def select_backend(profile: DeviceProfile) -> tuple[Backend, str]:
    """The backend for this profile and a one-line reason for the choice: with TARGET, its board (or farm)."""
    if profile.target:
        from harness.backends.target.backend import target_backend

        return target_backend(profile.target), f"TARGET={profile.target}"
    if profile.backend in BY_NAME:
        return BY_NAME[profile.backend].factory(profile), f"BACKEND={profile.backend}"
    unusable: list[str] = []
    for kind in BACKENDS:
        usable, why = kind.probe(profile)
        if usable:
            chosen = f"{kind.name}, since {'; '.join(unusable)}" if unusable else why
            return kind.factory(profile), f"BACKEND=auto: {chosen}"
        unusable.append(why)
    raise BackendError(f"BACKEND=auto: no backend can run here ({'; '.join(unusable)}); see `harness doctor`")


__all__ = ["BACKENDS", "Backend", "BackendError", "BackendKind", "select_backend"]
