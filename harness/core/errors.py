"""Typed errors: library code raises these; only the CLI prints them (one line) and picks exit codes."""


class HarnessError(Exception):
    """An error the user can fix; its message is one line naming the thing and the fix."""

    exit_code = 2


class ConfigError(HarnessError):
    """A bad value in an env file, the environment or a CLI flag."""


class ModelError(HarnessError):
    """A model file that is missing, corrupt, of an unknown kind, or needs an optional extra."""


class BackendError(HarnessError):
    """A backend that cannot start or has died (engine gone, cgroups not writable, ...)."""

    exit_code = 3


class DataError(HarnessError):
    """Bad input data: device CSVs, result files of an unknown schema, too few points to fit."""


def is_user_interrupt(err: BaseException) -> bool:
    """True when Ctrl-C is behind `err`: Python hands on a KeyboardInterrupt raised inside some machinery wrapped in
    another exception (in 3.11 a class body's `__set_name__`, as in an import that Ctrl-C lands in), so the chain of
    causes and contexts is searched, not only the exception's type."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False
