"""Crash-safe result store.

Layout: RESULTS_DIR/<session_id>/
  runs.jsonl     one RunRecord per line, appended, flushed and fsynced the moment a run ends; the session's
                 provenance is on its first line, and on a later one only where it differs (a cluster worker's host)
  session.json   the plan: profile, models, seed, provenance (written atomically before the first run)
  .session.reserve   while the session runs: space held for its next session.json, released to write it, so a disk
                 that fills mid-session can still mark the session interrupted
  summary.json / summary.csv   per-model statistics, rewritten atomically after a run at most once a second
                 and at the session's end, but not fsynced: they are derived from runs.jsonl, which is, so a
                 power cut can cost a summary, never a run

Every file carries `schema_version`; a newer one is refused with a clear message rather than misread, and
an older one is migrated on reading, one version at a time (asv's habit; steps in store/migrations.py). Readers get
typed records (RunRecord, SessionInfo), never the raw objects.

Why the first line and not session.json holds the shared provenance: runs.jsonl stays whole on its own (copied alone,
it still says where every run ran), and a run never waits for a second durable write.
"""

from __future__ import annotations

import csv
import io
import json
import secrets
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.core.bounds import byte_bound
from harness.core.errors import ConfigError, DataError
from harness.core.records import RunRecord, SessionInfo
from harness.core.storage import append_bytes, hold_space, write_bytes_atomically, write_through_held
from harness.store.migrations import RUN_MIGRATIONS, SESSION_MIGRATIONS, Migration

SCHEMA_VERSION = 4
RUNS_FILE = "runs.jsonl"
MAX_RUN_LINE_BYTES = 64 * 1024 * 1024
"""The longest runs.jsonl line read: a run's record is a few KiB, tens of MiB with KEEP_SAMPLES over a long run; a
longer line is no run this harness wrote, and is refused in one line without being read whole."""
SESSION_FILE = "session.json"
SUMMARY_JSON = "summary.json"
SUMMARY_CSV = "summary.csv"
RESERVE_FILE = ".session.reserve"
RESERVE_MARGIN = 64 * 1024
"""Bytes held beyond session.json's size: its next state and a summary of about that size fit in them."""
ALL_SESSIONS = "all"  # the session name that pools every session of a results directory


def new_session_id() -> str:
    """Sortable by start time (to the millisecond), unique across parallel sessions."""
    now = time.time()
    return time.strftime("%Y%m%d-%H%M%S", time.localtime(now)) + f"{int(now % 1 * 1000):03d}-{secrets.token_hex(2)}"


def atomic_write_text(path: Path, text: str, durable: bool = True) -> None:
    """Write via a temp file in the same directory + rename: readers never see half a file. `durable` fsyncs it
    first, so it also survives a power cut (a few milliseconds that derived files, rewritten after every run,
    skip). A full disk is a StorageError naming `path`, with no temp file left."""
    write_bytes_atomically(path, text.encode("utf-8"), durable)


def json_text(obj: Any) -> str:
    """The JSON files' text: indented, keys in their order."""
    return json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n"


def atomic_write_json(path: Path, obj: Any, durable: bool = True) -> None:
    atomic_write_text(path, json_text(obj), durable)


def atomic_write_csv(path: Path, rows: Sequence[Mapping[str, object]], durable: bool = True) -> None:
    """Rows (a column name to a cell each) may have different keys; the header is their ordered union."""
    fields: list[str] = []
    for row in rows:
        fields.extend(key for key in row if key not in fields)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(path, buffer.getvalue(), durable)


def ensure_writable_dir(path: Path, what: str) -> Path:
    """Create `path` if needed and prove a file can be written there, before any work whose output it holds:
    an unusable directory is one line naming it and the reason, never a traceback after the runs."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as err:
        reason = err.strerror or type(err).__name__
        if isinstance(err, FileExistsError) or (path.exists() and not path.is_dir()):
            reason = "it exists and is not a directory"
        raise ConfigError(f"{what} {path} cannot be used: {reason}; pick a writable directory") from None
    return path


def check_schema(obj: dict[str, Any], where: str) -> None:
    version = obj.get("schema_version")
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise DataError(
            f"{where}: schema_version {version!r} is not one this harness reads (<= {SCHEMA_VERSION}); "
            "upgrade the harness to read it"
        )


def migrate(obj: dict[str, Any], steps: dict[int, Migration], where: str) -> dict[str, Any]:
    """`obj` brought to SCHEMA_VERSION one step at a time; a newer version is refused."""
    check_schema(obj, where)
    while obj["schema_version"] < SCHEMA_VERSION:
        version = obj["schema_version"]
        obj = {**steps[version](obj), "schema_version": version + 1}
    return obj


class SessionStore:
    """One session directory. `append_run` is the only way a run reaches disk."""

    def __init__(self, results_dir: Path, session_id: str | None = None) -> None:
        self.session_id = session_id or new_session_id()
        self.path = Path(results_dir) / self.session_id
        self.path.mkdir(parents=True, exist_ok=True)
        self._provenance = _first_provenance(self.runs_path)

    @property
    def runs_path(self) -> Path:
        return self.path / RUNS_FILE

    def append_run(self, result: dict[str, Any]) -> None:
        """One line, fsynced; on a full disk a StorageError, with runs.jsonl cut back to its last whole line. The
        line leaves out a provenance equal to the first line's (load_runs puts it back)."""
        shared = self._provenance
        if shared is not None and result.get("provenance") == shared:
            result = {k: v for k, v in result.items() if k != "provenance"}
        line = json.dumps({"schema_version": SCHEMA_VERSION, **result}, default=str)
        append_bytes(self.runs_path, (line + "\n").encode("utf-8"))
        if shared is None:
            self._provenance = _first_provenance(self.runs_path)

    def write_session(self, info: dict[str, Any]) -> None:
        """session.json, written through the space held for it (RESERVE_FILE, renamed into its place); while the state
        is `running` the space for the next one is held again, so a full disk cannot keep the session from being
        marked interrupted. Releasing the held space before the write let a writer that filled the disk take it
        first, and the session stayed `running`."""
        reserve = self.path / RESERVE_FILE
        data = json_text({"schema_version": SCHEMA_VERSION, **info}).encode("utf-8")
        write_through_held(self.path / SESSION_FILE, data, reserve)
        if info.get("state") == "running":
            hold_space(reserve, len(data) + RESERVE_MARGIN)

    def write_summary(self, summary: dict[str, Any], rows: list[dict[str, Any]]) -> None:
        """Derived from runs.jsonl, so not fsynced (see the module docstring)."""
        atomic_write_json(self.path / SUMMARY_JSON, {"schema_version": SCHEMA_VERSION, **summary}, durable=False)
        atomic_write_csv(self.path / SUMMARY_CSV, rows, durable=False)

    def runs(self) -> list[RunRecord]:
        return load_runs(self.path)


def _first_provenance(path: Path) -> dict[str, Any] | None:
    """The provenance on the first line of runs.jsonl, which later lines of its session leave out when theirs is the
    same; None when there is no whole first line yet."""
    try:
        with open(path, encoding="utf-8") as handle:
            first = json.loads(handle.readline())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return first.get("provenance") if isinstance(first, dict) else None


def load_runs(session_dir: Path) -> list[RunRecord]:
    """All complete runs of a session, read line by line. A torn last line (power cut mid-write) is skipped, not
    fatal; a line longer than MAX_RUN_LINE_BYTES is refused in one line before it is read whole. A line without
    provenance has the first line's (SessionStore.append_run)."""
    path = Path(session_dir) / RUNS_FILE
    if not path.exists():
        return []
    runs: list[RunRecord] = []
    shared = None
    with open(path, "rb") as handle:
        lines = iter(lambda: handle.readline(MAX_RUN_LINE_BYTES + 1), b"")
        for number, raw in enumerate(lines, start=1):
            if len(raw) > MAX_RUN_LINE_BYTES:
                raise DataError(f"{path}:{number}: a line longer than {byte_bound(MAX_RUN_LINE_BYTES)}, the bound on a "
                                f"{RUNS_FILE} line (MAX_RUN_LINE_BYTES); remove that line")
            run = _run_line(raw, path, number, last=not handle.peek(1))
            if run is None:
                continue
            if not runs:
                shared = run.get("provenance")
            elif "provenance" not in run and shared is not None:
                run["provenance"] = shared
            runs.append(RunRecord.from_dict(migrate(run, RUN_MIGRATIONS, f"{path}:{number}")))
    return runs


def _run_line(raw: bytes, path: Path, number: int, last: bool) -> dict[str, Any] | None:
    """One runs.jsonl line's run; None for a blank line, or a torn last one."""
    if not raw.strip():
        return None
    try:
        run: dict[str, Any] = json.loads(raw.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        if last:
            return None
        reason = err.msg if isinstance(err, json.JSONDecodeError) else "not UTF-8"
        raise DataError(f"{path}:{number}: not valid JSON ({reason}); remove or repair that line") from err
    return run


def load_session_info(session_dir: Path) -> SessionInfo:
    path = Path(session_dir) / SESSION_FILE
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as err:
        raise DataError(f"{session_dir}: no {SESSION_FILE}; is this a session directory?") from err
    return SessionInfo.from_dict(migrate(info, SESSION_MIGRATIONS, str(path)))


def list_sessions(results_dir: Path) -> list[Path]:
    """Session directories, oldest first (ids sort by start time)."""
    root = Path(results_dir)
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if (p / SESSION_FILE).exists())


def resolve_session(results_dir: Path, session: str | None) -> Path:
    """A session by id or path, or the newest one under results_dir."""
    if session:
        candidate = Path(session)
        for path in (candidate, Path(results_dir) / session):
            if (path / SESSION_FILE).exists():
                return path
        raise DataError(f"session {session!r} not found under {results_dir}; see `ls {results_dir}`")
    sessions = list_sessions(results_dir)
    if not sessions:
        raise DataError(f"no sessions under {results_dir}; run `make profile MODEL=...` first")
    return sessions[-1]


def iter_all_runs(results_dir: Path) -> Iterator[RunRecord]:
    for session_dir in list_sessions(results_dir):
        yield from load_runs(session_dir)
