"""Interactive environments for Level-3 tasks: one protocol (``base``) and its adapters.

Below the grader (which plays episodes through them) and above nothing of ours but the
leaves: an environment knows games and actions, not runs, records or models.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent2rl_tui.envs.base import EnvError, Environment

KINDS = ("textworld-express",)


@dataclass(frozen=True)
class EnvSpec:
    """A task's ``[env]`` table, read once: which environment, its game, and the limits."""

    kind: str
    game: str
    params: str = ""
    max_steps: int = 50
    """Actions per episode; then the game counts as lost."""
    pool_size: int = 16
    """Games played at once (one environment instance each)."""
    think_prefix: str | None = None
    """Actions starting so are thoughts: they cost a step and are answered "OK."."""

    @classmethod
    def from_table(cls, table: dict[str, Any]) -> EnvSpec:
        if table.get("kind") not in KINDS:
            raise EnvError(f"[env] kind {table.get('kind')!r} is not known; known: {', '.join(KINDS)}")
        if "game" not in table:
            raise EnvError("[env] needs game = \"...\" (e.g. \"twc\")")
        return cls(kind=str(table["kind"]), game=str(table["game"]), params=str(table.get("params", "")),
                   max_steps=int(table.get("max_steps", 50)), pool_size=int(table.get("pool_size", 16)),
                   think_prefix=table.get("think_prefix"))

    def factory(self) -> Callable[[], Environment]:
        """A maker of fresh environment instances for this spec."""
        from agent2rl_tui.envs.twx import TextWorldExpress

        return lambda: TextWorldExpress(self.game, self.params, step_limit=self.max_steps)
