"""The run row of run.db and its config, typed: one definition for the writer and every reader.

``run start`` (run/lifecycle.py) writes one row into run.db's ``run`` table, its settings as
JSON in ``config_json``; the supervisor, the grader, the train-environment service, the
report, the run list and the TUI read it back, on this machine or years later from a copied
run folder. ``RunRecord`` is that row and ``RunConfig`` is its config, each with one way in
(``from_row``/``from_json``) and one way out. Every default of a run's settings lives here,
in ``RunConfig``'s fields, so no reader re-states one.

Reading never raises on an old or damaged record: a config key of the wrong type reads as
its default, and keys this release does not know are kept (``rest``) and written back as
they were. Writing gives the same JSON as before these types (same keys, same order).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent2rl_tui.tasks.registry import DEFAULT_EVAL_TIMEOUT_S, EVAL_SEED_KEY

GIB = 1 << 30
DEFAULT_MAX_QUEUED = 4
"""Submissions that may wait for the grader at once, unless a run's config says otherwise."""


def _opt(kind: type | tuple[type, ...]) -> Callable[[Any], Any]:
    """A reader that keeps a value of ``kind`` and gives None otherwise (JSON's true is no number)."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return lambda value: value if isinstance(value, kinds) and (bool in kinds or not isinstance(value, bool)) else None


def _number(value: Any) -> float | None:
    """An int or float as written (so a config reads back to the same JSON); None otherwise."""
    return _opt((int, float))(value)


def _dict(value: Any) -> dict[str, Any] | None:
    return dict(value) if isinstance(value, dict) else None


def _paths(value: Any) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list | tuple) else ()


@dataclass(frozen=True)
class RunConfig:
    """A run's settings, as ``run start`` decided them (``run.config_json``).

    The fields are in the order the JSON has them. The last four (``max_submission_gib``,
    ``max_queued``, ``train_env`` and anything unknown) are written only where set: they are
    knobs a person or a test adds to a run's config, not options of ``run start``.
    """

    task_folder: str = ""
    """The task's folder (tasks/<name>), as resolved when the run was made."""
    agent_command: str | None = None
    """The agent's command line where ``--command`` replaced the profile's."""
    eval_timeout_s: float = DEFAULT_EVAL_TIMEOUT_S
    """The longest one evaluation may take (the task's ``[grader]``, or ``--eval-timeout``)."""
    eval_limit: int | None = None
    """The first N eval items only (``--eval-limit``); None: all."""
    engine: dict[str, Any] = field(default_factory=dict)
    """The run's engine settings over the task's (``--engine``, ``--engine-option``)."""
    prompt_profile: str | None = None
    """The task's prompt profile (``--prompt-profile``); None: the task's default."""
    decoding_row: str | None = None
    """The base model's row of the reference's model table, where the profile uses it."""
    judge: dict[str, Any] | None = None
    """The judge of a judge-graded task, as its check returned it (never a key's value)."""
    search: dict[str, Any] | None = None
    """A searching task's backend."""
    store: dict[str, Any] | None = None
    """A shopping task's WebShop server (the name the record has always used for it)."""
    keep_submissions: bool = False
    eval_memory_gib: float | None = None
    """The eval worker's memory limit; None: the grader's default for the base model's size."""
    driver_url: str | None = None
    """The driver LLM's URL where the run names one (``--driver-url``)."""
    meter: bool = True
    """Record the agent's LLM calls through the meter."""
    max_tokens: int | None = None
    max_cost_usd: float | None = None
    prices_path: str | None = None
    summarizer: dict[str, Any] | None = None
    """The narrative's summarizer settings (``run.summarizer.SummarizerSettings``)."""
    gpus: str | None = None
    """CUDA device indices for the run (``CUDA_VISIBLE_DEVICES``)."""
    contain: bool = True
    read_only_paths: tuple[str, ...] = ()
    writable_paths: tuple[str, ...] = ()
    profiles_path: str | None = None
    agent_env: dict[str, str] = field(default_factory=dict)
    """The variables given to the agent (``--env``), by name only: each value reads ``<not recorded>``."""
    profile: dict[str, Any] = field(default_factory=dict)
    """The agent profile as it was when the run was made (secrets redacted)."""
    eval_seed: int | None = None
    """The seed of the run's eval draw (key ``tasks.registry.EVAL_SEED_KEY``): here only."""
    max_submission_gib: float | None = None
    """The largest submission the grader takes; None: by the base model's size."""
    max_queued: int | None = None
    """Submissions that may wait at once; None: ``DEFAULT_MAX_QUEUED`` (``queue_limit``)."""
    train_env: dict[str, Any] | None = None
    """The train-environment service's limits over its defaults."""
    rest: dict[str, Any] = field(default_factory=dict)
    """Keys this release does not know, kept as they were."""

    OPTIONAL = ("max_submission_gib", "max_queued", "train_env")

    # -- in ---------------------------------------------------------------------------
    @classmethod
    def from_json(cls, text: str | bytes | dict[str, Any] | None) -> RunConfig:
        """The config of ``run.config_json``; the defaults for what is missing, unreadable or mistyped."""
        raw: Any = text
        if not isinstance(text, dict):
            try:
                raw = json.loads(text or "{}")
            except (ValueError, RecursionError, TypeError):
                raw = {}
        if not isinstance(raw, dict):
            raw = {}
        known = {f.name for f in dataclasses.fields(cls)} - {"rest", "eval_seed"}
        seed = raw.get(EVAL_SEED_KEY)
        timeout = _number(raw.get("eval_timeout_s"))
        return cls(
            task_folder=_opt(str)(raw.get("task_folder")) or "",
            agent_command=_opt(str)(raw.get("agent_command")),
            eval_timeout_s=timeout if timeout is not None and timeout > 0 else DEFAULT_EVAL_TIMEOUT_S,
            eval_limit=_opt(int)(raw.get("eval_limit")),
            engine=_dict(raw.get("engine")) or {},
            prompt_profile=_opt(str)(raw.get("prompt_profile")),
            decoding_row=_opt(str)(raw.get("decoding_row")) or None,
            judge=_dict(raw.get("judge")) or None,
            search=_dict(raw.get("search")) or None,
            store=_dict(raw.get("store")) or None,
            keep_submissions=raw.get("keep_submissions") is True,
            eval_memory_gib=_number(raw.get("eval_memory_gib")),
            driver_url=_opt(str)(raw.get("driver_url")),
            meter=raw.get("meter") is not False,
            max_tokens=_opt(int)(raw.get("max_tokens")),
            max_cost_usd=_number(raw.get("max_cost_usd")),
            prices_path=_opt(str)(raw.get("prices_path")),
            summarizer=_dict(raw.get("summarizer")) or None,
            gpus=_opt(str)(raw.get("gpus")),
            contain=raw.get("contain") is not False,
            read_only_paths=_paths(raw.get("read_only_paths")),
            writable_paths=_paths(raw.get("writable_paths")),
            profiles_path=_opt(str)(raw.get("profiles_path")),
            agent_env={k: str(v) for k, v in (_dict(raw.get("agent_env")) or {}).items()},
            profile=_dict(raw.get("profile")) or {},
            eval_seed=_opt(int)(seed),
            max_submission_gib=_number(raw.get("max_submission_gib")),
            max_queued=_opt(int)(raw.get("max_queued")),
            train_env=_dict(raw.get("train_env")),
            rest={k: v for k, v in raw.items() if k not in known and k != EVAL_SEED_KEY},
        )

    # -- out --------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """The object ``run.config_json`` holds (the keys ``run start`` has always written, in order)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name in ("rest", "eval_seed") or f.name in self.OPTIONAL:
                continue
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        out[EVAL_SEED_KEY] = self.eval_seed
        for name in self.OPTIONAL:
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        out.update(self.rest)
        return out

    def dumps(self) -> str:
        return json.dumps(self.to_json())

    def replace(self, **changes: Any) -> RunConfig:
        return dataclasses.replace(self, **changes)

    # -- derived ----------------------------------------------------------------------
    @property
    def max_submission_bytes(self) -> int | None:
        return int(self.max_submission_gib * GIB) if self.max_submission_gib else None

    @property
    def queue_limit(self) -> int:
        return DEFAULT_MAX_QUEUED if self.max_queued is None else self.max_queued

    @property
    def eval_memory_bytes(self) -> int | None:
        return int(self.eval_memory_gib * GIB) if self.eval_memory_gib else None


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
