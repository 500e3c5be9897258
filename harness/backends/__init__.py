"""Backends create one limited environment per run and start the runner in it.

`auto` picks Docker when an engine answers and the runtime image exists, and the local cgroup backend
otherwise; the choice and the reason are returned so the summary and every result can say which.
"""

from __future__ import annotations

from harness.backends.base import Backend
from harness.core.config import DeviceProfile
from harness.core.errors import BackendError


def select_backend(profile: DeviceProfile) -> tuple[Backend, str]:
    """The backend for this profile and a one-line reason for the choice."""
    from harness.backends.local import LocalBackend

    if profile.backend == "local":
        return LocalBackend(), "BACKEND=local"
    from harness.backends import docker as docker_backend

    if profile.backend == "docker":
        return docker_backend.DockerBackend(profile.image), "BACKEND=docker"
    usable, why = docker_backend.engine_status(profile.image)
    if usable:
        return docker_backend.DockerBackend(profile.image), f"BACKEND=auto: {why}"
    return LocalBackend(), f"BACKEND=auto: local, since {why}"


__all__ = ["Backend", "BackendError", "select_backend"]
