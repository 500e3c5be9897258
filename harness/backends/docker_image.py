"""Build the runtime image through the Docker SDK (`make image`), from an exact, reproducible context.

The context is a tar made here rather than the whole checkout: only the Dockerfile, pyproject.toml,
README.md and harness/*.py, with fixed owners and times so an unchanged tree hits every cached layer.
The image is labelled with a digest of those sources, so a backend can tell an image built from
another checkout (stale) from a current one. Values reach the engine as API fields, never a shell.
"""

from __future__ import annotations

import hashlib
import io
import os
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.core.errors import BackendError

ROOT = Path(__file__).resolve().parent.parent.parent
SOURCE_LABEL = "org.harness.source-digest"
ENGINES_LABEL = "org.harness.engines"
"""The RUNTIME engines the image runs (onnxruntime, and ncnn or litert when built with them), comma-separated: what
BACKEND=auto reads before choosing Docker for a session on one of them."""
ENGINE_BUILD_ARGS = {"ncnn": "WITH_NCNN", "litert": "WITH_LITERT"}
"""The build argument (`make image` option without WITH_) that adds each engine beyond onnxruntime."""


def image_engines(build_args: dict[str, str]) -> str:
    """ENGINES_LABEL's value for an image built with `build_args`."""
    added = [engine for engine, arg in ENGINE_BUILD_ARGS.items() if build_args.get(arg) == "1"]
    return ",".join(["onnxruntime", *added])


def make_option(engine: str) -> str:
    """The `make image` option that adds `engine`: NCNN=1 for WITH_NCNN."""
    return f"{ENGINE_BUILD_ARGS[engine].removeprefix('WITH_')}=1"
CA_NAME = "build-ca.pem"  # the Dockerfile lets pip trust this file when the context holds it


def context_files(root: Path = ROOT) -> list[tuple[str, Path]]:
    """(name in the context, file) for everything the image is built from, in a stable order."""
    files = [(name, root / name) for name in ("Dockerfile", "pyproject.toml", "README.md")]
    package = root / "harness"
    files += [(str(path.relative_to(root)), path) for path in sorted(package.rglob("*.py"))]
    return files


def read_sources(root: Path = ROOT) -> list[tuple[str, bytes]]:
    """The context's files read once, so the tar and its digest describe the same bytes."""
    return [(name, path.read_bytes()) for name, path in context_files(root)]


def digest_of(sources: list[tuple[str, bytes]]) -> str:
    """sha256 over the files that decide what the image runs (README.md only feeds package metadata)."""
    digest = hashlib.sha256()
    for name, data in sources:
        if name != "README.md":
            digest.update(name.encode() + b"\0" + data + b"\0")
    return digest.hexdigest()


def source_digest(root: Path = ROOT) -> str | None:
    """The checkout's digest; None for an installed package without its checkout (nothing to compare)."""
    return digest_of(read_sources(root)) if (root / "Dockerfile").is_file() else None


def _add(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o644, 0
    archive.addfile(info, io.BytesIO(data))


def build_context(sources: list[tuple[str, bytes]], ca_bundle: Path | None = None) -> io.BytesIO:
    """The context tar in memory (a few hundred KiB), with fixed owners and times so layer caching works."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, data in sources:
            _add(archive, name, data)
        if ca_bundle is not None:
            _add(archive, CA_NAME, ca_bundle.read_bytes())
    buffer.seek(0)
    return buffer


def default_ca_bundle() -> Path | None:
    """The CA bundle host pip trusts (PIP_CERT), so a build behind the same TLS proxy can install too."""
    value = os.environ.get("PIP_CERT")
    return Path(value) if value and Path(value).is_file() else None


def _lines(stream: Iterator[dict[str, Any]], failure: str) -> Iterator[str]:
    """Build output as text; an engine-side error becomes one BackendError line."""
    for chunk in stream:
        if "error" in chunk:
            raise BackendError(f"{failure}: {chunk['error'].strip()}")
        if chunk.get("stream"):
            yield chunk["stream"]


def build_image(tag: str, base_image: str, build_args: dict[str, str], ca_bundle: Path | None,
                log: Any = sys.stderr) -> str:
    """Build `tag` and return its image id. Output streams to `log` while the engine works."""
    import requests
    from docker.errors import APIError, DockerException

    from harness.backends.engine import connect

    if not (ROOT / "Dockerfile").is_file():
        raise BackendError(f"no Dockerfile in {ROOT}: build the image from a checkout of the harness")
    sources = read_sources(ROOT)
    client = connect()
    args = {"BASE_IMAGE": base_image, **build_args}
    failure = f"building {tag} from BASE_IMAGE={base_image} failed"
    try:
        stream = client.api.build(fileobj=build_context(sources, ca_bundle), custom_context=True, tag=tag,
                                  buildargs=args, rm=True, forcerm=True, decode=True,
                                  labels={SOURCE_LABEL: digest_of(sources), ENGINES_LABEL: image_engines(build_args)})
        for line in _lines(stream, failure):
            log.write(line)
        return str(client.images.get(tag).attrs["Id"])
    except APIError as err:
        raise BackendError(f"{failure}: {err.explanation or err}") from None
    except (DockerException, requests.RequestException) as err:
        raise BackendError(f"{failure}: the Docker engine stopped answering ({type(err).__name__})") from None
    finally:
        client.close()
