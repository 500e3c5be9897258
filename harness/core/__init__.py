"""The vocabulary every stage shares: typed errors, the device profile (config), run records, the conditions
under which runs may be pooled, and the metric registry. Stdlib and python-dotenv only; imports no other folder."""

import errno

STDERR_TAIL_CHARS = 2000
"""How much of a failed script's stderr a run keeps. Here, not in records, because the runner needs it and does not
import records (whose dataclasses would slow every run's start)."""

STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO})
"""The faults of a disk rather than of the caller (full, over quota, failing): only freeing space or a new disk fixes
them. Here for the runner too, which writes its result file and imports nothing heavier than errno."""

RESULT_NOT_STORED_EXIT = 74
"""The runner's exit code when the disk refused its result file (sysexits' EX_IOERR): the run was measured but cannot
be handed back, so the backend stops the session as a full disk instead of keeping an `error` run."""
