"""The former name of harness.report_protocol, kept so bench scripts written against it still run."""

from harness.report_protocol import (
    ENV_VAR,
    LATENCIES_ENV_VAR,
    MAX_LATENCIES,
    PROFILE_DIR_ENV,
    phase,
    report,
    report_latencies,
)

__all__ = ["ENV_VAR", "LATENCIES_ENV_VAR", "MAX_LATENCIES", "PROFILE_DIR_ENV", "phase", "report", "report_latencies"]
