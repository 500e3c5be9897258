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
