"""Profile loading: precedence of the layers, and one clear line per bad value."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core.config import load_profile, parse_size
from harness.core.errors import ConfigError

TEMPLATE = Path(__file__).resolve().parent.parent / "env.template"


def test_template_defaults_parse(in_tmp_cwd: Path) -> None:
    (in_tmp_cwd / "env.template").write_text(TEMPLATE.read_text())
    profile = load_profile()
    assert (profile.cpus, profile.memory_bytes, profile.repeats, profile.iterations) == (1.0, 2 * 1024**3, 7, 500)
    assert profile.sources["CPUS"] == "env.template"


def test_precedence_template_dotenv_file_flag(in_tmp_cwd: Path) -> None:
    (in_tmp_cwd / "env.template").write_text("CPUS=1\nMEMORY=1g\nREPEATS=2\nITERATIONS=7\n")
    (in_tmp_cwd / ".env").write_text("CPUS=2\nMEMORY=768m\nREPEATS=3\n")
    (in_tmp_cwd / "dev.env").write_text("CPUS=0.5\nMEMORY=512m\n")
    profile = load_profile("dev.env", {"CPUS": "1.5"})
    assert profile.cpus == 1.5 and profile.sources["CPUS"] == "--cpus"
    assert profile.memory_bytes == 512 * 1024**2 and profile.sources["MEMORY"] == "dev.env"
    assert profile.repeats == 3 and profile.sources["REPEATS"] == ".env"
    assert profile.iterations == 7


@pytest.mark.parametrize(("text", "expected"), [("512m", 512 * 1024**2), ("2g", 2 * 1024**3), ("1.5G", 1536 * 1024**2),
                                                ("64MiB", 64 * 1024**2), ("0", 0), ("100k", 102400)])
def test_parse_size(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize(("variable", "value", "needle"), [
    ("CPUS", "two", "expected a number > 0"), ("CPUS", "-1", "expected a number > 0"),
    ("MEMORY", "lots", "a size such as 512m"), ("MEMORY", "4m", "too small"),
    ("REPEATS", "0", "whole number >= 1"), ("BACKEND", "podman", "auto, docker or local"),
    ("SAMPLE_INTERVAL_MS", "0.1", "from 1 to 1000"), ("CPU_PINNING", "maybe", "auto, on or off"),
])
def test_bad_value_names_variable_value_source_and_form(in_tmp_cwd: Path, variable: str, value: str,
                                                        needle: str) -> None:
    (in_tmp_cwd / ".env").write_text(f"{variable}={value}\n")
    with pytest.raises(ConfigError) as info:
        load_profile()
    message = str(info.value)
    assert "\n" not in message
    assert variable in message and repr(value) in message and ".env" in message and needle in message


@pytest.mark.parametrize(("value", "hint"), [("256", "did you mean 256m?"), ("1024", "did you mean 1024m?"),
                                           ("4m", None), ("8", None)])
def test_a_memory_with_no_unit_offers_megabytes(in_tmp_cwd: Path, value: str, hint: str | None) -> None:
    """MEMORY=256 is 256 bytes: the error offers 256m where that is a size a runner can have (8m is not)."""
    with pytest.raises(ConfigError) as info:
        load_profile(overrides={"MEMORY": value})
    assert "too small" in str(info.value)
    assert (hint in str(info.value)) if hint else "did you mean" not in str(info.value)


def test_values_are_data_not_shell(in_tmp_cwd: Path) -> None:
    (in_tmp_cwd / ".env").write_text('DEVICE_NAME="$(touch pwned) ${HOME}"\n')
    assert load_profile().device_name == "$(touch pwned) ${HOME}"
    assert not (in_tmp_cwd / "pwned").exists()


def test_missing_env_file_is_one_line(in_tmp_cwd: Path) -> None:
    with pytest.raises(ConfigError, match="env file nope.env not found"):
        load_profile("nope.env")


def test_misspelt_variable_is_warned_about(in_tmp_cwd: Path) -> None:
    (in_tmp_cwd / ".env").write_text("MEMROY=512m\nDOCKER_HOST=unix:///x\n")
    profile = load_profile()
    assert profile.memory_bytes == 2 * 1024**3
    assert profile.warnings == (f"MEMROY in {in_tmp_cwd / '.env'} is not a harness variable (ignored); "
                                "did you mean MEMORY?",)


def test_batches_on_ncnn_are_refused_before_any_run(in_tmp_cwd: Path) -> None:
    (in_tmp_cwd / ".env").write_text("RUNTIME=ncnn\nBATCH_SIZE=4\n")
    with pytest.raises(ConfigError) as info:
        load_profile()
    assert str(info.value) == ("BATCH_SIZE='4' (from .env) cannot run on RUNTIME=ncnn, which feeds one input at a "
                               "time: set BATCH_SIZE=1, or RUNTIME=onnxruntime for batches")
    assert load_profile(overrides={"BATCH_SIZE": "1"}).runtime == "ncnn"
