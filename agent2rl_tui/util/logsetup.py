"""Logging set-up shared by the run's long-lived processes (the supervisor, the grader).

Both write log lines to a stream that the caller sends to a log file, stamped with UTC
times to the millisecond in the same form (``2025-01-31T12:00:00.123Z``), so the lines of
the supervisor's and the grader's logs can be read side by side. Written once here.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import TextIO

TIME_FORMAT = "%Y-%m-%dT%H:%M:%S"
STAMP = "%(asctime)s.%(msecs)03dZ "


def configure_logging(stream: TextIO | None = None, fields: str = "%(message)s") -> None:
    """Send INFO and above to ``stream`` (stdout by default) as ``<UTC time> <fields>``,
    replacing any handlers set up before."""
    handler = logging.StreamHandler(sys.stdout if stream is None else stream)
    fmt = logging.Formatter(STAMP + fields, TIME_FORMAT)
    fmt.converter = time.gmtime
    handler.setFormatter(fmt)
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)
