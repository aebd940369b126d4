"""Where runs live, and the error that says a run cannot be made or found.

Kept apart from the run index so that what only needs the workspaces root (the CLI's start,
the grader's sandbox, the supervisor) imports nothing but the standard library to find it.

Every root a run was made under is remembered on this machine (``roots_file``), so that a
contained agent can be kept out of all of them, not only its own: another root's runs hold
eval prompts with their gold answers.
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


ROOTS_FILE_ENV = "AGENT2RL_ROOTS_FILE"
MAX_ROOTS_BYTES = 1 << 20


def roots_file() -> Path:
    """Where the roots runs were made under are listed: ``$AGENT2RL_ROOTS_FILE``, else
    ``$XDG_STATE_HOME/agent2rl-tui/roots`` (``~/.local/state``)."""
    env = os.environ.get(ROOTS_FILE_ENV)
    if env:
        return Path(env)
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "agent2rl-tui" / "roots"


def known_roots() -> list[Path]:
    """The roots runs were made under on this machine (those that still exist), oldest first."""
    try:
        with roots_file().open("rb") as fh:
            text = fh.read(MAX_ROOTS_BYTES).decode("utf-8", "replace")
    except OSError:
        return []
    seen: list[Path] = []
    for line in text.splitlines():
        path = Path(line)
        if line and path.is_absolute() and path not in seen and path.is_dir():
            seen.append(path)
    return seen


def remember_root(root: Path) -> None:
    """Add ``root`` to the machine's list (best effort: a list that cannot be written is a log line's
    worth of trouble, never a run that cannot start)."""
    path = str(root.resolve())
    if "\n" in path:
        return
    target = roots_file()
    try:
        if target.exists() and path in target.read_text(encoding="utf-8", errors="replace").splitlines():
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("a", encoding="utf-8") as fh:
            fh.write(path + "\n")
    except OSError:
        pass
