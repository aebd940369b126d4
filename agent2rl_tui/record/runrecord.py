"""The run row of run.db, typed: one definition for the writer and every reader.

``run start`` (run/lifecycle.py) writes one row into run.db's ``run`` table, its settings as
JSON in ``config_json`` (``record.runconfig.RunConfig``); the supervisor, the grader, the
train-environment service, the report, the run list and the TUI read it back, on this machine
or years later from a copied run folder. ``RunRecord`` is that row, with one way in
(``from_row``) and one way out (``to_row``); a column of a newer schema is left out.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any

from agent2rl_tui.record.runconfig import RunConfig


@dataclass(frozen=True)
class RunRecord:
    """The row of run.db's ``run`` table (one per run folder), its config parsed."""

    id: str
    task: str
    agent: str
    base_model: str
    """The base model's folder name under workspace/models/."""
    base_model_source: str
    """Where the base model was copied from."""
    budget_s: float
    grace_s: float
    status: str
    created_at: float
    driver: str | None = None
    seed: int = 0
    budget_start: float | None = None
    """When the agent was started: the budget's zero."""
    deadline: float | None = None
    ended_at: float | None = None
    agent_ended_at: float | None = None
    agent_exit_code: int | None = None
    """Negative: killed by that signal."""
    end_reason: str | None = None
    """agent_exited, deadline, stopped, error."""
    supervisor_pid: int | None = None
    grader_pid: int | None = None
    grader_port: int | None = None
    agent_pid: int | None = None
    heartbeat_at: float | None = None
    error: str | None = None
    config_json: str = "{}"

    @classmethod
    def from_row(cls, row: Any) -> RunRecord:
        """A ``SELECT * FROM run`` row (an ``sqlite3.Row`` or a dict); columns this release does not
        know (a newer schema, a query's extra columns) are left out."""
        data = dict(row)
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def to_row(self) -> dict[str, Any]:
        """The columns to insert, in the table's order; unset optional ones left out."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}

    @property
    def config(self) -> RunConfig:
        return _config_of(self.config_json)

    @classmethod
    def columns(cls) -> frozenset[str]:
        return frozenset(f.name for f in dataclasses.fields(cls))


@functools.lru_cache(maxsize=64)
def _config_of(text: str) -> RunConfig:
    """``RunConfig.from_json``, the last answers kept: readers ask a record's config often."""
    return RunConfig.from_json(text)
