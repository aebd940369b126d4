"""Logging set-up shared by the run's long-lived processes (the supervisor, the grader).

Both write log lines to a stream that the caller sends to a log file, stamped with UTC
times to the millisecond in the same form (``2025-01-31T12:00:00.123Z``), so the lines of
the supervisor's and the grader's logs can be read side by side. Written once here.

One record, one line: a message is written with its control characters and newlines as
escapes (``util.inert.one_line``), because messages quote what the agent sent (a model path
with a newline would otherwise start a line that reads like one of ours), and a traceback
follows its record with each of its lines quoted (``  │ ``), never starting with a time.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import TextIO

from agent2rl_tui.util.inert import one_line, visible

TIME_FORMAT = "%Y-%m-%dT%H:%M:%S"
STAMP = "%(asctime)s.%(msecs)03dZ "
QUOTE = "  │ "
"""What each line of a traceback starts with, under its record."""


class OneLineFormatter(logging.Formatter):
    """A record's message on its one line, inert; its traceback quoted below it."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        record.message = one_line(record.message)
        return super().formatMessage(record)

    def formatException(self, ei) -> str:  # noqa: ANN001, N802 - logging's signature
        return "\n".join(QUOTE + visible(line) for line in super().formatException(ei).split("\n"))

    def formatStack(self, stack_info: str) -> str:  # noqa: N802
        return "\n".join(QUOTE + visible(line) for line in super().formatStack(stack_info).split("\n"))


def configure_logging(stream: TextIO | None = None, fields: str = "%(message)s") -> None:
    """Send INFO and above to ``stream`` (stdout by default) as ``<UTC time> <fields>``,
    replacing any handlers set up before."""
    handler = logging.StreamHandler(sys.stdout if stream is None else stream)
    fmt = OneLineFormatter(STAMP + fields, TIME_FORMAT)
    fmt.converter = time.gmtime
    handler.setFormatter(fmt)
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)
