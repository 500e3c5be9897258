"""Typed errors: library code raises these; only the CLI prints them (one line) and picks exit codes."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable


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


class StorageError(HarnessError):
    """A write the disk refused (full, over quota, or an I/O error). Its line names the file, the bytes the write
    needed when known and the space left on that disk, so the user knows how much to free; `fix` is what to do then
    (a session puts its `--resume` command there)."""

    exit_code = 4

    def __init__(self, path: Path, reason: str, needed: int | None, free: int | None,
                 fix: str = "free space there and run again") -> None:
        self.path, self.reason, self.needed, self.free, self.fix = Path(path), reason, needed, free, fix
        sizes = [f"needs {byte_size(needed)}"] if needed is not None else []
        sizes += [f"{byte_size(free)} free on its disk"] if free is not None else []
        detail = f" ({', '.join(sizes)})" if sizes else ""
        super().__init__(f"cannot write {path}: {reason}{detail}; {fix}")

    @classmethod
    def from_os_error(cls, err: OSError, path: Path, needed: int | None = None) -> StorageError:
        return cls(path, err.strerror or type(err).__name__, needed, free_bytes(path))

    def __reduce__(self) -> tuple[type[StorageError], tuple[Path, str, int | None, int | None, str]]:
        """Pickled by its fields (a cluster worker hands it back to the driver)."""
        return StorageError, (self.path, self.reason, self.needed, self.free, self.fix)

    def with_fix(self, fix: str) -> StorageError:
        """The same fault with another remedy (the caller knows better what to run once space is freed)."""
        return StorageError(self.path, self.reason, self.needed, self.free, fix)


def free_bytes(path: Path) -> int | None:
    """Free bytes on the disk that holds `path`, asked of its nearest existing folder (the file itself, or even its
    folder, may not exist yet); None when not even that can be read."""
    folder = Path(path).absolute()
    while not folder.is_dir() and folder != folder.parent:
        folder = folder.parent
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


def byte_size(count: int) -> str:
    """A byte count as people read disk space: B, KiB, MiB or GiB, three significant figures."""
    value, unit = float(count), "B"
    for bigger in ("KiB", "MiB", "GiB"):
        if value < 1024:
            break
        value, unit = value / 1024, bigger
    return f"{count} B" if unit == "B" else f"{value:.3g} {unit}"


def in_chain(err: BaseException, wanted: Callable[[BaseException], bool]) -> BaseException | None:
    """The first exception in `err`'s chain of causes and contexts that is `wanted`: Python and libraries hand on an
    exception raised inside some machinery wrapped in another one, so its type alone does not tell what happened."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        if wanted(current):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def user_interrupt(err: BaseException) -> BaseException | None:
    """The KeyboardInterrupt behind `err` (Ctrl-C, or SIGTERM / SIGHUP as harness.core.interrupts raises them), or
    None: in 3.11 a KeyboardInterrupt in a class body's `__set_name__`, as in an import that Ctrl-C lands in, reaches
    the caller wrapped."""
    return in_chain(err, lambda cause: isinstance(cause, KeyboardInterrupt))
