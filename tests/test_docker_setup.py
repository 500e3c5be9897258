"""What needs no engine: the image's build context, the run container's options, and the errors a user
sees when no engine answers (a real socket path that nothing listens on)."""

from __future__ import annotations

import io
import os
import re
import subprocess
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest

from harness.backends import docker as docker_backend
from harness.backends.docker_args import DockerArgs, parse_docker_args
from harness.backends.docker_image import CA_NAME, build_context, context_files, read_sources, source_digest
from harness.cli import main
from harness.core.errors import BackendError, ConfigError
from harness.measure.spec import plan_cpu_limits
from tests.test_docker import make_spec

ROOT = Path(__file__).resolve().parent.parent


def names(context: io.BytesIO) -> list[str]:
    with tarfile.open(fileobj=context) as archive:
        return archive.getnames()


def fake_checkout(root: Path) -> Path:
    (root / "harness" / "measure").mkdir(parents=True)
    for name in ("Dockerfile", "pyproject.toml", "README.md"):
        (root / name).write_text(name)
    (root / "harness" / "measure" / "runner.py").write_text("x = 1\n")
    (root / "harness" / "notes.txt").write_text("not part of the image")
    return root


def test_context_is_exact_and_reproducible(tmp_path: Path) -> None:
    root = fake_checkout(tmp_path / "checkout")
    first = build_context(read_sources(root))
    assert names(first) == ["Dockerfile", "pyproject.toml", "README.md", "harness/measure/runner.py"]
    (root / "harness" / "measure" / "runner.py").touch()  # a new mtime alone must not change a byte (layer cache)
    assert build_context(read_sources(root)).getvalue() == first.getvalue()
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    assert names(build_context(read_sources(root), ca_bundle=ca))[-1] == CA_NAME


def test_source_digest_follows_code_not_readme(tmp_path: Path) -> None:
    root = fake_checkout(tmp_path / "checkout")
    before = source_digest(root)
    (root / "README.md").write_text("a new section")
    assert source_digest(root) == before
    (root / "harness" / "runner.py").write_text("x = 2\n")
    assert source_digest(root) != before
    assert source_digest(tmp_path / "elsewhere") is None


def test_real_context_holds_the_package() -> None:
    files = dict(context_files(ROOT))
    assert {"Dockerfile", "harness/measure/runner.py", "harness/measure/report_protocol.py",
            "harness/measure/benchloop.py", "harness/__init__.py"} <= set(files)
    assert not any("__pycache__" in name or name.startswith("tests/") for name in files)


@pytest.mark.parametrize(("cpus", "expected"), [
    (2.0, {"cpuset_cpus": "0-1"}), (1.0, {"cpuset_cpus": "1"}), (0.5, {"nano_cpus": 500_000_000}),
])
def test_cpu_options(cpus: float, expected: dict, tiny_onnx: Path, workloads: Path) -> None:
    spec = replace(make_spec(workloads / "alloc.py", model=tiny_onnx), cpu=plan_cpu_limits(cpus, "auto", [0, 1]))
    assert docker_backend.cpu_options(spec) == expected


def test_container_names_are_unique_and_valid() -> None:
    first, second = docker_backend.container_name("s/1 r:0"), docker_backend.container_name("s/1 r:0")
    assert first != second and first.startswith(docker_backend.NAME_PREFIX + "s-1-r-0-")


def test_no_engine_is_one_clear_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys,
                                     in_tmp_cwd: Path, tiny_onnx: Path) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/nothing-listens.sock")
    usable, why = docker_backend.engine_status("harness-runtime:latest")
    assert not usable and why == "no Docker engine answers"
    with pytest.raises(BackendError, match="no Docker engine answers at unix://.*start it"):
        docker_backend.DockerBackend("harness-runtime:latest")
    assert main(["profile", str(tiny_onnx), "--backend", "docker", "--repeats", "1"]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("harness: error: no Docker engine answers"), err


def test_unreadable_model_is_refused_before_any_container(tmp_path: Path, workloads: Path) -> None:
    model = tmp_path / "secret.onnx"
    model.write_bytes(b"onnx")
    model.chmod(0o600)
    with pytest.raises(BackendError, match=r"not readable by the container's unprivileged user; run `chmod o\+r"):
        docker_backend._check_readable(model, "model")
    with pytest.raises(BackendError, match="does not exist"):
        docker_backend._check_readable(tmp_path / "missing.onnx", "model")


def test_docker_args_whitelist(tmp_path: Path) -> None:
    parsed = parse_docker_args(f"-v {tmp_path}:/data --volume={tmp_path}:/out:rw -e 'GREETING=hello world' "
                               "--env=EMPTY= --device /dev/null")
    assert [(m["Source"], m["Target"], m["ReadOnly"]) for m in parsed.mounts] == [
        (str(tmp_path), "/data", True), (str(tmp_path), "/out", False)]
    assert parsed.environment == {"GREETING": "hello world", "EMPTY": ""}
    assert parsed.options() == {"environment": {"GREETING": "hello world", "EMPTY": ""}, "devices": ["/dev/null"]}
    assert parse_docker_args(None) == parse_docker_args("") == DockerArgs()


@pytest.mark.parametrize(("text", "message"), [
    ("--privileged", "DOCKER_ARGS --privileged: is not allowed; allowed: -v/--volume"),
    ("--network=host", "DOCKER_ARGS --network=host: is not allowed"),
    ("-v", "DOCKER_ARGS -v: needs a value"),
    ("-v relative:/data", "must be an existing absolute host path"),
    ("-v /:/harness/model", "target must be absolute and outside /harness, /tmp"),
    ("-v /:/data:rx", "expected SRC:DST or SRC:DST:ro|rw"),
    ("-e 1BAD=x", "DOCKER_ARGS --env 1BAD=x: expected NAME=VALUE"),
    ("--device /etc/passwd", "is not an existing device under /dev"),
    ("-e 'unclosed", "cannot be split"),
])
def test_docker_args_refused_with_one_line(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)) as caught:
        parse_docker_args(text)
    assert "\n" not in str(caught.value)


def test_bad_docker_args_stop_before_any_engine_call(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/nothing-listens.sock")
    monkeypatch.setenv("HARNESS_DOCKER_ARGS", "--cap-add SYS_ADMIN")
    with pytest.raises(ConfigError, match="DOCKER_ARGS --cap-add: is not allowed"):
        docker_backend.DockerBackend("harness-runtime:latest")


def test_make_image_never_hands_base_image_to_a_shell(tmp_path: Path) -> None:
    """BASE_IMAGE travels as data: shell syntax in it reaches the harness verbatim and runs nothing."""
    marker = tmp_path / "ran"
    base = f"x'; touch {marker}; echo '$$(touch {marker})"
    done = subprocess.run(["make", "-s", "-o", ".venv/.installed", "image", f"BASE_IMAGE={base}"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/nothing-listens.sock"})
    assert done.returncode != 0 and "harness: error: no Docker engine answers" in done.stderr, done.stderr
    assert not marker.exists()
