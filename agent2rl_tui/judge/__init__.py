"""LLM judges for judge-graded (Level-2) tasks: any OpenAI-compatible endpoint.

A run names its judge (base URL, model, the *name* of the variable holding its key, the
judging mode); the key itself is read from the grader's environment when a call is made
and never written anywhere. ``client`` speaks the chat-completions protocol with retries,
``pairwise`` builds AlpacaEval's pairwise prompts and parses the judge's answers, ``cache``
keeps every judgement so a re-submitted model costs no judge calls, and ``winrate`` turns
preferences into AlpacaEval's win rate and length-controlled win rate.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from agent2rl_tui.tasks.registry import JudgeSection

JUDGE_MODES = ("ranking", "weighted")


class JudgeError(RuntimeError):
    """The judge could not be reached or answered something unusable; the message says which."""


class Unparseable(JudgeError):
    """The judge answered, but not in the form asked for; the item counts as failed."""


TASK_DEFAULTS = JudgeSection.RUN_DEFAULTS
"""The keys of a task's ``[judge]`` that are defaults of the run's judge settings."""


@dataclass(frozen=True)
class JudgeSettings:
    """Where the judge is and how it is asked; recorded with every score (the key's value never)."""

    base_url: str
    """The OpenAI-compatible API root, e.g. ``https://api.openai.com/v1`` or ``http://127.0.0.1:8000/v1``."""
    model: str
    key_env: str | None = None
    """The environment variable that holds the API key (None: no key, as a local server)."""
    mode: str = "ranking"
    """``ranking``: a strict structured answer (a tool call), for judges without logprobs;
    ``weighted``: one token, the preference read from the top-5 logprobs."""
    timeout_s: float = 120.0
    retries: int = 3
    """Further attempts after an error or timeout, with exponential backoff."""
    backoff_s: float = 2.0
    backoff_growth: float = 2.0
    """Each wait is this many times the one before (1: every wait ``backoff_s``, as RD-Agent waits)."""
    concurrency: int = 8
    """Judge calls in flight at once."""

    def __post_init__(self) -> None:
        if self.mode not in JUDGE_MODES:
            raise JudgeError(f"judge mode {self.mode!r}: use one of {', '.join(JUDGE_MODES)}")
        if not self.base_url.startswith(("http://", "https://")):
            raise JudgeError(f"judge URL {self.base_url!r}: give the API root, e.g. http://127.0.0.1:8000/v1")
        if not self.model:
            raise JudgeError("the judge needs a model name (--judge-model)")
        if self.concurrency < 1 or self.retries < 0 or self.timeout_s <= 0:
            raise JudgeError("judge concurrency must be >= 1, retries >= 0 and the timeout positive")

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> JudgeSettings:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise JudgeError(f"unknown judge settings {unknown}; known: {sorted(known)}")
        return cls(**raw)

    @classmethod
    def for_task(cls, task: JudgeSection | Mapping[str, Any] | None, run: dict[str, Any], *,
                 modes: bool = True) -> JudgeSettings:
        """The run's judge over the task's ``[judge]`` defaults (its ``JudgeSection``, or the table as
        written); ``modes=False`` for a judge that gives verdicts (it has no ranking/weighted mode, so
        a run's ``mode`` is not its business)."""
        if not isinstance(task, JudgeSection):
            task = JudgeSection(**{k: v for k, v in (task or {}).items() if k in TASK_DEFAULTS})
        defaults = task.run_defaults(modes=modes)
        return cls.from_dict({**defaults, **{k: v for k, v in run.items() if modes or k != "mode"}})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def api_key(self, env: Mapping[str, str] | None = None) -> str | None:
        """The key's value, from the environment; an error naming the variable when it is unset."""
        return key_from_env(self.key_env, env, JudgeError(
            f"the judge's key variable {self.key_env} is not set in the grader's environment; "
            f"export {self.key_env}=... before starting the run"))


def key_from_env(key_env: str | None, env: Mapping[str, str] | None, unset: Exception) -> str | None:
    """The value of the variable ``key_env`` names (None when it names none); ``unset`` raised
    when the variable is empty or missing."""
    if not key_env:
        return None
    value = (os.environ if env is None else env).get(key_env)
    if not value:
        raise unset
    return value


__all__ = ["JUDGE_MODES", "JudgeError", "JudgeSettings", "Unparseable"]
