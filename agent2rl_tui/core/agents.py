"""How to start an agent: the command line and what it needs from the environment.

Two kinds for now: ``example`` (the scripted SFT+GRPO agent shipped in the package) and
``command`` (any shell command line, run with bash in the workspace). The coding-agent
CLIs (Claude Code, Codex, ...) become profiles of the same shape.
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass


class AgentError(ValueError):
    """An agent cannot be started as asked; the message says what to change."""


@dataclass(frozen=True)
class AgentSpec:
    name: str
    argv: tuple[str, ...]
    driver: str | None = None


KNOWN_AGENTS = ("example", "command")


def resolve_agent(name: str, command: str | None = None, driver: str | None = None) -> AgentSpec:
    if name == "example":
        return AgentSpec("example", (sys.executable, "-u", "-m", "agent2rl_tui.agents.example"), driver)
    if name == "command":
        if not command:
            raise AgentError("the 'command' agent needs --command 'CMD' (a shell command line)")
        # bash execs a lone simple command, so the recorded exit code is the command's own.
        shell = shutil.which("bash") or "/bin/sh"
        return AgentSpec("command", (shell, "-c", command), driver)
    raise AgentError(f"unknown agent {name!r}; known agents: {', '.join(KNOWN_AGENTS)}")
