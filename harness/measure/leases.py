"""Which sessions' run cgroups are still owned by a live harness, so a dead session's are removed and no other's.

Every cgroup the local backend makes for a session is named after it: `harness-<run id>` for a run (a run id starts
with its session id) and `harness-<session id>-next-<pid>-<n>` for a runner started ahead (harness.backends.warm). A
harness that ends in any way it can see (a run's error, an exception in a backend, Ctrl-C, SIGTERM, SIGHUP) removes
them on the way out; one killed outright (SIGKILL, a power cut, the OOM killer) cannot. So each process that makes
cgroups for a session holds that session's lease: a shared flock(2) on LEASE_DIR/<session id>.lease, which the kernel
releases when the process dies, however it dies. The file names the cgroup folders the session's cgroups are made in.

`sweep` (the local backend calls it when it starts, `harness doctor` too) takes each lease file that no live process
holds (an exclusive lock granted at once) and removes the cgroups of that session, found by name in the folders the
file names, killing what still runs in them; then the file goes. A live session's lease is always held, so its cgroups
are never touched. A session resumed after its harness was killed takes its lease when no other process holds it, and
removes its earlier life's cgroups first (the runner that harness had started ahead for its next run among them).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import tempfile
from pathlib import Path

from harness.measure import cgroups


def _lease_dir() -> Path:
    """A folder in memory that every harness of this user on this host finds whatever its TMPDIR (a session may give
    its runs' files a disk of their own, or a full one): the user's runtime folder, else /dev/shm, else the temp
    folder."""
    for base in (os.environ.get("XDG_RUNTIME_DIR"), "/dev/shm"):
        if base and os.path.isdir(base) and os.access(base, os.W_OK):
            return Path(base) / f"harness-{os.getuid()}-leases"
    return Path(tempfile.gettempdir()) / f"harness-{os.getuid()}-leases"


LEASE_DIR = _lease_dir()
"""Where the sessions' lease files live: one per session that has made a cgroup on this host and not removed them."""
LEASE_SUFFIX = ".lease"
PROBE_PREFIX = "harness-probe-"
"""The probe cgroup a local backend makes and removes as it starts (harness.backends.local.probe_isolation) is named
PROBE_PREFIX + its pid: one left by a harness killed in that instant is removed once that pid has gone."""


def session_cgroup(name: str, session_id: str) -> bool:
    """Whether cgroup `name` is one the local backend made for `session_id` (a run's, or a runner's started ahead)."""
    return re.fullmatch(rf"harness-{re.escape(session_id)}-(r\d+-\d+|next-\d+-\d+)", name) is not None


def session_cgroups(session_id: str, folders: list[Path]) -> list[Path]:
    """The cgroups of `session_id` that exist under `folders` (one per v1 controller, or v2's one)."""
    found: list[Path] = []
    for folder in dict.fromkeys(folders):
        with contextlib.suppress(OSError):
            found += sorted(p for p in folder.iterdir() if p.is_dir() and session_cgroup(p.name, session_id))
    return found


def remove_cgroups(paths: list[Path]) -> None:
    """Kill what runs in each cgroup and remove it (RunCgroup.remove retries while exiting tasks linger)."""
    for path in paths:
        cgroups.RunCgroup(1, {"memory": path}).remove()


class Lease:
    """This process's hold on one session's lease file (shared with the session's other processes, if any)."""

    def __init__(self, session_id: str, folders: list[Path]) -> None:
        """Take the lease of `session_id`, whose cgroups go under `folders`. When no other live process holds it, the
        session's cgroups already there are an earlier life's (a harness killed outright): they are removed first.
        A lease that cannot be written (no space, no permission) is not held: the session runs all the same, and only
        a kill outright would leave its cgroups to be removed by hand."""
        self.session_id = session_id
        self.path = LEASE_DIR / f"{session_id}{LEASE_SUFFIX}"
        self._fd = -1
        try:
            self._take(folders)
        except OSError:
            if self._fd >= 0:
                os.close(self._fd)
            self._fd = -1

    def _take(self, folders: list[Path]) -> None:
        LEASE_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
        session_id = self.session_id
        while True:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
            alone = _try_lock(self._fd, fcntl.LOCK_EX)
            if alone:
                remove_cgroups(session_cgroups(session_id, [*listed_folders(self.path), *folders]))
            fcntl.flock(self._fd, fcntl.LOCK_SH)  # from exclusive, or waiting for a sweep that holds it
            if _same_file(self._fd, self.path):
                break
            os.close(self._fd)  # a sweep removed that file meanwhile: take a new one
        known = listed_folders(self.path)
        new = "".join(f"{folder}\n" for folder in dict.fromkeys(folders) if folder not in known)
        if new:
            with contextlib.suppress(OSError):  # a full disk: the lease is held, and sweeps look where they make theirs
                os.write(self._fd, new.encode())

    def release(self) -> None:
        """Give the lease back once this process's cgroups of the session are removed; the last holder removes the
        file (an exclusive lock granted at once says no other process holds it)."""
        if self._fd < 0:
            return
        if _try_lock(self._fd, fcntl.LOCK_EX) and _same_file(self._fd, self.path):
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
        os.close(self._fd)
        self._fd = -1


def listed_folders(path: Path) -> list[Path]:
    """The cgroup folders a lease file names (none when it is gone)."""
    try:
        return [Path(line) for line in path.read_text().splitlines() if line]
    except FileNotFoundError:
        return []


def sweep(folders: list[Path]) -> dict[str, list[Path]]:
    """Remove the cgroups of every session whose lease no live process holds, looked for in the folders its lease
    names and in `folders` (where this harness makes its own), and the probe cgroups of harnesses gone; return them by
    owner (`session ID`, or `pid N` for a probe). Live sessions' leases are held, so theirs are never touched."""
    removed = dead_probes(folders)
    try:
        leases = sorted(LEASE_DIR.glob(f"*{LEASE_SUFFIX}"))
    except OSError:
        return removed
    for path in leases:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue  # removed meanwhile, or not ours to read
        try:
            if not _try_lock(fd, fcntl.LOCK_EX) or not _same_file(fd, path):
                continue  # a live session's
            session_id = path.name[:-len(LEASE_SUFFIX)]
            found = session_cgroups(session_id, [*listed_folders(path), *folders])
            remove_cgroups(found)
            path.unlink()
            if found:
                removed[f"session {session_id}"] = found
        finally:
            os.close(fd)
    return removed


def dead_probes(folders: list[Path]) -> dict[str, list[Path]]:
    """Remove the probe cgroups under `folders` whose harness (named by the pid in the name) no longer runs."""
    removed: dict[str, list[Path]] = {}
    for folder in dict.fromkeys(folders):
        with contextlib.suppress(OSError):
            for path in folder.glob(f"{PROBE_PREFIX}*"):
                pid = path.name.removeprefix(PROBE_PREFIX)
                if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
                    remove_cgroups([path])
                    removed.setdefault(f"pid {pid}", []).append(path)
    return removed


def _try_lock(fd: int, kind: int) -> bool:
    """Whether `kind` was granted at once."""
    try:
        fcntl.flock(fd, kind | fcntl.LOCK_NB)
    except OSError as err:
        if err.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return False
        raise
    return True


def _same_file(fd: int, path: Path) -> bool:
    """Whether `path` still names the file open on `fd` (a sweep may have removed it while we waited for its lock)."""
    try:
        return os.stat(path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False
