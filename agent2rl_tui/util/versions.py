"""A program's version, from what its ``--version`` (or ``-version``) printed.

Read in three places that run a program to see that it works: the doctor (java, chromium, each
agent CLI), the run's pre-flight (the agent CLI in its sandbox, whose answer the run records) and
the agents check. One reading, so that they name the same line.
"""

from __future__ import annotations

import re

from agent2rl_tui.util.inert import one_line

_VERSION = re.compile(r"\d+\.\d+")

JVM_NOTES = ("Picked up JAVA_TOOL_OPTIONS:", "Picked up _JAVA_OPTIONS:", "NOTE: Picked up JDK_JAVA_OPTIONS:")
"""What ``java`` prints first when the environment gives it options: never its version."""

VERSION_LINE_MAX = 100


def version_line(text: str) -> str:
    """The first line of a ``--version`` answer that holds a version number, else its first line
    (a banner's frame holds none; a JVM's note of the options it picked up from the environment is
    not the answer). At most ``VERSION_LINE_MAX`` characters."""
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith(JVM_NOTES)]
    return next((line for line in lines if _VERSION.search(line)), lines[0] if lines else "")[:VERSION_LINE_MAX]


def named_version(text: str) -> str | None:
    """``version_line`` as one inert row, for a record or a terminal; None when nothing was said."""
    return one_line(version_line(text)) or None
