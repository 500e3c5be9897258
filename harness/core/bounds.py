"""Reading a file a user or a tool wrote, up to a bound: past it, one line naming the file and the bound, before more
than the bound is read. Each reader keeps its bound as a constant beside it (docs/measurement.md#input-bounds lists
them); what it does with what it read takes time and memory in proportion to it.

Standard library only: the runner and the bench scripts import it inside a run's limits.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (the runner imports this module)
if TYPE_CHECKING:
    from pathlib import Path


def byte_bound(count: int) -> str:
    """A bound as people read it: 64 MiB, 1 GiB."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size and count % size == 0:
            return f"{count // size} {unit}"
    return f"{count} bytes"


def too_large(path: str | Path, limit: int, what: str, bound: str) -> str:
    """The one line a reader refuses a file with: the file, the bound and its constant's name."""
    return f"{path}: larger than {byte_bound(limit)}, the bound on {what} ({bound}); give a smaller file"


CHUNK_BYTES = 1024 * 1024


def read_bounded(path: str | Path, limit: int) -> bytes | None:
    """The file's bytes, or None when it holds more than `limit` (told by its size, else by reading one byte past
    the bound: a pipe or a file still growing), having read at most limit + 1 bytes. Memory follows what is read, not
    the bound: a file of its size is read at once, the rest of a pipe in chunks. OSError as open() raises it."""
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > limit:
            return None
        asked = size + 1
        chunks = [handle.read(asked)]
        total = len(chunks[0])
        while total <= limit and len(chunks[-1]) == asked:  # a short read is the end of the file
            asked = min(CHUNK_BYTES, limit + 1 - total)
            chunks.append(handle.read(asked))
            total += len(chunks[-1])
    if total > limit:
        return None
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)
