"""Interactive environments for Level-3 tasks: one protocol (``base``) and its adapters.

Below the grader (which plays episodes through them) and above nothing of ours but the
leaves: an environment knows games and actions, not runs, records or models.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent2rl_tui.envs.base import EnvError, Environment


def env_factory(spec: dict[str, Any]) -> Callable[[], Environment]:
    """A maker of environments from a task's ``[env]`` table (``kind`` and its options)."""
    kind = spec.get("kind")
    if kind == "textworld-express":
        from agent2rl_tui.envs.twx import TextWorldExpress

        game, params, limit = str(spec["game"]), str(spec.get("params", "")), int(spec.get("max_steps", 50))
        return lambda: TextWorldExpress(game, params, step_limit=limit)
    raise EnvError(f"[env] kind {kind!r} is not known; known: textworld-express")
