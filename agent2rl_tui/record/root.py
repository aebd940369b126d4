"""Where runs live, and the error that says a run cannot be made or found.

Kept apart from the run index so that what only needs the workspaces root (the CLI's start,
the grader's sandbox, the supervisor) imports nothing but the standard library to find it.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parents[2]


class RunError(ValueError):
    """A run cannot be created or found; the message says what to do."""


def default_root() -> Path:
    """``$AGENT2RL_WORKSPACES``, else the checkout's workspaces/, else ~/.local/share."""
    env = os.environ.get("AGENT2RL_WORKSPACES")
    if env:
        return Path(env)
    if (PACKAGE_ROOT / "pyproject.toml").exists():
        return PACKAGE_ROOT / "workspaces"
    return Path.home() / ".local" / "share" / "agent2rl-tui" / "workspaces"
