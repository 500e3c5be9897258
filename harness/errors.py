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
