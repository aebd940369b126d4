"""Interactive environments for Level-3 tasks: one protocol (``base``) and its adapters.

Below the grader (which plays episodes through them) and above nothing of ours but the
leaves: an environment knows games and actions, not runs, records or models.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from agent2rl_tui.envs.base import EnvError, Environment

MODULES = {"textworld-express": "agent2rl_tui.envs.twx", "alfworld": "agent2rl_tui.envs.alfworld",
           "search-qa": "agent2rl_tui.envs.search", "webshop": "agent2rl_tui.envs.webshop"}
"""Each kind's module, imported when a run plays it; it makes its environments (``maker(spec)``)."""
KINDS = tuple(MODULES)
TRANSCRIPTS = ("plain", "react", "search-react", "webshop")
PROFILE_TRANSCRIPTS = ("search-react-reference", "webshop-reference")
"""Layouts a prompt profile may name over its task's (the reference's own loops, quirks kept)."""


@dataclass(frozen=True)
class EnvSpec:
    """A task's ``[env]`` table, read once: which environment, its game, and the limits."""

    kind: str
    game: str = ""
    """The TextWorldExpress game (``twc``, ...); ALFWorld's games are the task's prepared data."""
    params: str = ""
    max_steps: int = 50
    """Actions per episode; then the game counts as lost."""
    pool_size: int = 16
    """Games played at once (one environment instance each)."""
    think_prefix: str | None = None
    """Actions starting so are thoughts: they cost a step and are answered "OK."."""
    transcript: str = "plain"
    """How the episode is written for the model: ``plain`` (observations trimmed) or ``react``
    (ReAct's ALFWorld layout, see ``grader.episodes.ReActFormat``)."""
    examples: str | None = None
    """A JSON file in the task folder with few-shot examples by kind (``react_<kind>_<i>``),
    put in the header's ``{example_<i>}`` fields."""
    data_dir: Path | None = None
    """The task's prepared data folder, where an environment with game files finds them."""
    processes: bool = False
    """Each environment in its own process (``envs.subproc``), the pool stepped in parallel:
    for environments that spend their time in Python (ALFWorld)."""
    search: dict[str, Any] | None = None
    """A searching task's backend, from the run (``envs.search.backend_from``)."""
    top_k: int = 3
    """Search results shown per query."""
    store: dict[str, Any] | None = None
    """A shopping task's store, from the run (``envs.webshop.store_from``): ``url`` of a WebShop server."""
    window: int = 5
    """WebShop: the turns shown in the prompt."""

    @classmethod
    def from_table(cls, table: dict[str, Any], data_dir: Path | None = None,
                   search: dict[str, Any] | None = None, store: dict[str, Any] | None = None) -> EnvSpec:
        kind = table.get("kind")
        if kind not in KINDS:
            raise EnvError(f"[env] kind {kind!r} is not known; known: {', '.join(KINDS)}")
        if kind == "textworld-express" and "game" not in table:
            raise EnvError("[env] needs game = \"...\" (e.g. \"twc\")")
        transcript = str(table.get("transcript", "plain"))
        if transcript not in TRANSCRIPTS:
            raise EnvError(f"[env] transcript {transcript!r} is not known; known: {', '.join(TRANSCRIPTS)}")
        return cls(kind=str(kind), game=str(table.get("game", "")), params=str(table.get("params", "")),
                   max_steps=int(table.get("max_steps", 50)), pool_size=int(table.get("pool_size", 16)),
                   think_prefix=table.get("think_prefix"), transcript=transcript,
                   examples=table.get("examples"), data_dir=data_dir, processes=bool(table.get("processes", False)),
                   search=search, top_k=int(table.get("top_k", 3)), store=store,
                   window=int(table.get("window", 5)))

    @property
    def workers(self) -> int:
        """How many environments the episode runner drives at once."""
        return self.pool_size if self.processes else 1

    def factory(self) -> Callable[[], Environment]:
        """A maker of fresh environment instances for this spec: the kind's module makes it
        (its ``maker(spec)``), in a process of its own each where the spec says so."""
        make: Callable[[], Environment] = importlib.import_module(MODULES[self.kind]).maker(self)
        if self.processes:
            from agent2rl_tui.envs.subproc import InChildProcess

            return partial(InChildProcess, make)
        return make
