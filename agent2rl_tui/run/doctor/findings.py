"""What the doctor's parts answer, and what they look at: ``Finding``, its ``State``, ``Where``
and ``Part``.

Apart from the checks (``checks``, ``checks_env``) so that they and the package's front
(``__init__``: the parts, running them, the verdict) share these without importing each
other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from agent2rl_tui.util.locks import REPO

SETUP_FIX = "make setup (installs the locked versions)"


class State(StrEnum):
    OK = "ok"
    MISSING = "missing"
    """Not installed or not prepared; optional unless asked for by name."""
    BROKEN = "broken"
    """There, but it does not work."""
    INFO = "info"
    """Told, never a failure (a fix may still be given)."""


@dataclass(frozen=True)
class Finding:
    """One line of the doctor's answer: one thing checked, its state, what was seen, the fix."""

    part: str
    subject: str
    """What was checked: a program, a module, a task, an agent CLI."""
    state: State
    detail: str
    """What was seen: versions and paths from outside, made inert where shown."""
    fix: str = ""
    """The command or step that fixes it (for ``missing`` and ``broken``)."""

    def to_json(self) -> dict[str, str]:
        return {"part": self.part, "subject": self.subject, "state": str(self.state), "detail": self.detail,
                "fix": self.fix}


@dataclass(frozen=True)
class Where:
    """What the checks look at besides the machine itself."""

    root: Path
    """The workspaces root: the global ``--root``, else ``record.root.default_root()``."""
    repo: Path = REPO
    """The checkout: its install locks (``locks/``) and the agent CLIs of ``make agent-clis``."""


@dataclass(frozen=True)
class Part:
    """A part of the machine the doctor checks, by its short name."""

    name: str
    about: str
    check: Callable[[Where], list[Finding]]
    core: bool = False
    """Broken or missing, it fails the doctor even when no part is named."""


class DoctorError(ValueError):
    """A part name the doctor does not know; the message lists the names."""
