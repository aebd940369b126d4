"""The protocol every interactive (Level-3) environment implements, so one episode runner
plays them all: ``reset(game)`` starts a game and says what the agent sees; ``step(action)``
plays one action and says what happened.

A *game* is a string id the environment understands (a TextWorldExpress ``fold:seed``, an
ALFWorld game folder); the task's data lists the games of each split. Environments are
not thread-safe: one instance plays one episode at a time, and a runner that plays many
episodes at once holds a pool of instances.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


class EnvError(RuntimeError):
    """The environment cannot be made or cannot play a game; the message says what to do."""


@dataclass(frozen=True)
class Start:
    """What the agent sees when a game begins."""

    observation: str
    goal: str
    admissible: list[str] | None = None  # the actions the game accepts now, where it says
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Outcome:
    """What one action did."""

    observation: str
    reward: float
    done: bool
    won: bool
    score: float  # the game's own progress, 0..1
    admissible: list[str] | None = None


class Environment(Protocol):
    """One instance plays one game at a time."""

    name: str

    def reset(self, game: str) -> Start:
        """Start ``game`` afresh (any game of any split the environment knows)."""
        ...

    def step(self, action: str) -> Outcome:
        """Play one action in the current game."""
        ...

    def gold_actions(self) -> list[str] | None:
        """A winning action sequence for the current game, where the environment has one."""
        ...

    def close(self) -> None:
        ...
