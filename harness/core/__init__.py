"""The vocabulary every stage shares: typed errors, the device profile (config), run records, the conditions
under which runs may be pooled, and the metric registry. Stdlib and python-dotenv only; imports no other folder."""

STDERR_TAIL_CHARS = 2000
"""How much of a failed script's stderr a run keeps. Here, not in records, because the runner needs it and does not
import records (whose dataclasses would slow every run's start)."""
