"""The CLI front end: every command is reachable, alone or in the full listing."""

from __future__ import annotations

import pytest

from harness.cli import COMMAND_MODULES, command_name, main


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
