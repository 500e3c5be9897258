"""Every write the harness makes to disk goes through here, so a full disk (ENOSPC, EDQUOT) or an I/O error (EIO)
is one StorageError naming the file, never a traceback, and leaves nothing half-written behind: whole files are
written beside their place and renamed into it (the temp file removed on failure), and an append that fails is cut
back to the size before it, so every earlier line stays readable."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.core import STORAGE_ERRNOS
from harness.core.errors import StorageError, in_chain


def storage_fault(err: BaseException) -> OSError | None:
    """The OSError of a full or failing disk behind `err`: libraries (torch's exporter, onnx) wrap it in their own
    exceptions."""
    fault = in_chain(err, lambda cause: isinstance(cause, OSError) and cause.errno in STORAGE_ERRNOS)
    return fault if isinstance(fault, OSError) else None


@contextmanager
def writing(path: Path, needed: int | None = None) -> Iterator[None]:
    """Turn a full or failing disk met inside the block into a StorageError naming `path` and the `needed` bytes."""
    try:
        yield
    except StorageError:
        raise
    except Exception as err:
        fault = storage_fault(err)
        if fault is None:
            raise
        raise StorageError.from_os_error(fault, path, needed) from err


def write_atomically(path: Path, writer: Callable[[Path], object], needed: int | None = None,
                     mode: int | None = None) -> Path:
    """`writer` fills a temp file beside `path` (`.<stem>.<random>.tmp<suffix>`: the suffix kept for writers that
    go by it), which then replaces it: a reader never sees half a file, two writers of the same file both end with a
    whole one, and a failed write leaves the old file and no temp file. `mode` sets the file's permissions (mkstemp
    makes it owner-only)."""
    with writing(path, needed):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=f".tmp{path.suffix}")
        os.close(fd)
        try:
            writer(Path(tmp))
            if mode is not None:
                os.chmod(tmp, mode)
            os.replace(tmp, path)
        finally:
            Path(tmp).unlink(missing_ok=True)
    return path


def _fill(path: Path, data: bytes, durable: bool) -> None:
    with open(path, "wb") as handle:
        handle.write(data)
        if durable:
            handle.flush()
            os.fsync(handle.fileno())


def write_bytes_atomically(path: Path, data: bytes, durable: bool = True) -> Path:
    """`data` as the whole of `path`; `durable` fsyncs it before the rename, so it also survives a power cut."""
    return write_atomically(path, lambda tmp: _fill(tmp, data, durable), len(data))


def _write_all(fd: int, data: bytes) -> None:
    """All of `data` to `fd`, however many writes the kernel takes for it."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def write_through_held(path: Path, data: bytes, held: Path) -> Path:
    """`data` as the whole of `path`, written into `held` (space allocated for it: hold_space) and renamed into place,
    fsynced first: it asks the disk for no block, so a writer that filled the disk since cannot refuse it, as it
    could take the space that releasing `held` first would free. Without a held file that large, a plain atomic
    write; a write that fails leaves `path` as it was and no `held`."""
    try:
        held_bytes = held.stat().st_size
    except OSError:
        held_bytes = -1
    if held_bytes < len(data):
        held.unlink(missing_ok=True)
        return write_bytes_atomically(path, data)
    with writing(path, len(data)):
        try:
            fd = os.open(held, os.O_WRONLY)
            try:
                _write_all(fd, data)
                os.ftruncate(fd, len(data))
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(held, path)
        finally:
            held.unlink(missing_ok=True)
    return path


def write_dir_atomically(target: Path, files: dict[str, bytes]) -> Path:
    """`files` (name -> content, fsynced) as the whole of the folder `target`: written into a temporary sibling
    folder that then takes `target`'s place, so a write the disk cuts short leaves `target` as it was (or absent)
    and no temporary folder. The old folder steps aside for the rename and is removed after it. A name may hold
    subfolders (`graphs/a.onnx`)."""
    with writing(target.parent):
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"))
    try:
        for name, data in files.items():
            with writing(target / name, len(data)):
                (staging / name).parent.mkdir(parents=True, exist_ok=True)
                _fill(staging / name, data, durable=True)
        with writing(target):
            _swap_in(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _swap_in(staging: Path, target: Path) -> None:
    """Rename `staging` to `target`, whose old folder (if any) is renamed aside first and put back if that fails."""
    if not target.exists():
        os.rename(staging, target)
        return
    old = staging.with_name(f"{staging.name}.old")
    os.rename(target, old)
    try:
        os.rename(staging, target)
    except BaseException:
        os.rename(old, target)
        raise
    shutil.rmtree(old, ignore_errors=True)


def append_bytes(path: Path, data: bytes) -> None:
    """Append `data` and fsync it; if the disk refuses any of it, the file is cut back to its size before, so a
    reader never meets a torn last line."""
    with writing(path, len(data)):
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            try:
                _write_all(fd, data)
                os.fsync(fd)
            except BaseException:
                os.ftruncate(fd, size)
                raise
        finally:
            os.close(fd)


def hold_space(path: Path, size: int) -> None:
    """Allocate `size` bytes to `path`, as far as the disk has them: a shortfall only means less in hand later."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    except OSError:
        return
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError:
        path.unlink(missing_ok=True)
    finally:
        os.close(fd)
