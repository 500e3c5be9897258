"""The Docker engine connection, shared by the run backend and the image builder (neither imports the other)."""

from __future__ import annotations

import os

import docker
import requests
from docker.errors import DockerException

from harness.core.errors import BackendError


def connect(timeout: int | None = None) -> docker.DockerClient:
    """A client that has answered a ping, or one clear BackendError naming the fix."""
    try:
        client = docker.from_env(timeout=timeout) if timeout else docker.from_env()
        client.ping()
    except (DockerException, requests.RequestException) as err:
        host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        raise BackendError(f"no Docker engine answers at {host} ({type(err).__name__}); start it "
                           "(e.g. `systemctl start docker`) or use BACKEND=local") from None
    return client
