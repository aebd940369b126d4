"""The error of a task that is missing or malformed: its own module, so that what the registry
imports (the generators) can raise it without importing the registry."""

from __future__ import annotations


class TaskError(ValueError):
    """A task is missing or malformed; the message says what to fix."""
