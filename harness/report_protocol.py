"""The reporting protocol's name before harness/measure/, kept for scripts that import it."""

import sys

from harness.measure import report_protocol

sys.modules[__name__] = report_protocol
