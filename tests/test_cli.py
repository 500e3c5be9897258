"""The CLI front end: every command is reachable, alone or in the full listing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from harness.api.profiling import KEYWORDS, device_profile
from harness.cli import COMMAND_MODULES, build_parser, command_name, main
from harness.commands.shared import flag_of, flag_settings, profile_env_file
from harness.core.errors import ConfigError


def test_help_lists_every_command(capsys) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert all(command_name(module) in out for module in COMMAND_MODULES)


@pytest.mark.parametrize("module", COMMAND_MODULES)
def test_each_command_parses_alone(capsys, module: str) -> None:
    name = command_name(module)
    with pytest.raises(SystemExit) as done:
        main([name, "--help"])
    assert done.value.code == 0
    assert f"usage: harness {name}" in capsys.readouterr().out


def test_unknown_command_is_one_usage_error(capsys) -> None:
    with pytest.raises(SystemExit) as done:
        main(["profiel"])
    assert done.value.code == 2
    assert "invalid choice: 'profiel'" in capsys.readouterr().err


@pytest.mark.parametrize("module", COMMAND_MODULES)
def test_no_command_takes_a_prefix_of_a_flag(capsys, module: str) -> None:
    """Prefix matching is off on every parser: `--device-n` is no abbreviation of `--device-name`, nor `--res` of
    `--results-dir` (argparse's default would take them, and `--device` for `--device-name` where no --device is)."""
    name = command_name(module)
    parsers = [build_parser([name])._subparsers._group_actions[0].choices[name]]  # type: ignore[union-attr]
    parsers += [p for a in parsers[0]._actions if a.choices and isinstance(a.choices, dict) for p in a.choices.values()]
    for parser in parsers:
        assert parser.allow_abbrev is False, parser.prog


def test_device_on_profile_loads_the_preset(monkeypatch) -> None:
    """`profile --device raspberry-pi-4` is the preset (4 CPUs, 4 GiB), as `device=` is in Python, and is said in
    --help; it is no prefix of --device-name."""
    monkeypatch.delenv("HARNESS_ENV_FILE", raising=False)
    for name in ("profile", "sweep"):
        args = build_parser([name]).parse_args([name, "--device", "raspberry-pi-4"])
        profile = device_profile(profile_env_file(args), flag_settings(args))[0]
        assert (profile.device_name, profile.cpus, profile.memory_mib) == ("raspberry-pi-4", 4, 4096)
    with pytest.raises(SystemExit):
        build_parser(["profile"]).parse_args(["profile", "--device-n", "x"])


def test_flags_and_keywords_are_one_table(monkeypatch) -> None:
    """Every keyword of harness.profile is a flag of profile and sweep (its dest), and both set the same variables:
    --timeout and --dim are timeout_s= and dims=; an error names the flag the value came from."""
    monkeypatch.delenv("HARNESS_ENV_FILE", raising=False)
    parser = build_parser(["profile"])
    dests = {action.dest for action in parser._subparsers._group_actions[0].choices["profile"]._actions}  # type: ignore[union-attr]
    assert set(KEYWORDS) <= dests
    args = parser.parse_args(["profile", "--timeout", "7", "--dim", "batch=2", "--dim", "seq=128", "--cpu-pinning",
                              "off"])
    by_flags = device_profile(None, flag_settings(args))[0]
    by_keywords = device_profile(None, {"timeout_s": 7, "dims": {"batch": 2, "seq": 128}, "cpu_pinning": "off"})[0]
    assert (by_flags.timeout_s, by_flags.dims, by_flags.cpu_pinning) == (7.0, "batch=2 seq=128", "off")
    assert (by_keywords.timeout_s, by_keywords.dims) == (by_flags.timeout_s, by_flags.dims)
    with pytest.raises(ConfigError, match=r"TIMEOUT_S='-1' \(from --timeout\)"):
        device_profile(None, flag_settings(parser.parse_args(["profile", "--timeout", "-1"])),
                       source=flag_of)
    with pytest.raises(ConfigError, match=r"TIMEOUT_S='-1' \(from harness.profile\(timeout_s=...\)\)"):
        device_profile(None, {"timeout_s": -1})


def test_a_misspelt_preset_offers_the_closest(monkeypatch, capsys) -> None:
    monkeypatch.delenv("HARNESS_ENV_FILE", raising=False)
    assert main(["profile", "x.onnx", "--device", "raspbery-pi-4"]) == 2
    err = capsys.readouterr().err
    assert "did you mean raspberry-pi-4?" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("name", ["profile", "sweep", "predict", "regress", "suggest", "import-device"])
def test_device_means_one_thing_in_every_help(capsys, name: str) -> None:
    with pytest.raises(SystemExit):
        main([name, "--help"])
    assert "on profile and sweep a preset" in " ".join(capsys.readouterr().out.split())


class _InterruptedDefinition:
    """A descriptor whose __set_name__ raises KeyboardInterrupt: what Ctrl-C does when it lands in a class body that
    an import is running (Python 3.11 hands it on wrapped in a RuntimeError)."""

    def __set_name__(self, owner: type, name: str) -> None:
        raise KeyboardInterrupt


def _define_a_class(_args: object) -> int:
    class Interrupted:
        attribute = _InterruptedDefinition()

    return 0


def test_ctrl_c_that_python_wraps_in_another_error_is_still_an_interrupt(capsys, monkeypatch) -> None:
    monkeypatch.setattr("harness.commands.zoo.list_models", _define_a_class)
    assert main(["zoo", "list"]) == 130
    assert capsys.readouterr().err == "harness: interrupted; completed runs are kept\n"


def test_an_error_without_ctrl_c_behind_it_is_not_taken_for_one(monkeypatch) -> None:
    def fail(_args: object) -> int:
        try:
            raise ValueError("handled")
        except ValueError as err:
            raise RuntimeError("a bug") from err

    monkeypatch.setattr("harness.commands.zoo.list_models", fail)
    with pytest.raises(RuntimeError, match="a bug"):
        main(["zoo", "list"])


CLOSED_PIPE_COMMANDS = (["devices", "--json"], ["devices"], ["zoo", "list"], ["zoo", "list", "--json"],
                        ["devices", "show", "ncnn-rpi4b-4t"], ["--help"], ["predict", "--help"])


@pytest.mark.parametrize("argv", CLOSED_PIPE_COMMANDS, ids=" ".join)
def test_a_closed_pipe_ends_a_command_quietly(argv: list[str]) -> None:
    """`harness devices --json | head -1`: a reader gone before the first line ends the command as it ends a Unix
    tool, with no traceback and the status a shell shows for SIGPIPE (141)."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the command writes
    try:
        done = subprocess.run([sys.executable, "-m", "harness.cli", *argv], stdout=write_end, stderr=subprocess.PIPE,
                              text=True, timeout=120, check=False)
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (128 + signal.SIGPIPE, "")


def test_a_broken_pipe_of_the_harness_own_is_not_taken_for_a_closed_output(monkeypatch) -> None:
    def fail(_args: object) -> int:
        raise BrokenPipeError("a runner's pipe")

    monkeypatch.setattr("harness.commands.zoo.list_models", fail)
    with pytest.raises(BrokenPipeError, match="a runner's pipe"):
        main(["zoo", "list"])
