"""The eval job and its summary, typed: what the grader hands its eval worker, and what comes back.

The grader's queue (``grader/server/queue.py``) writes one job per submission as a JSON line
on the worker's stdin; the worker (``grader/worker.py``) writes its answer to
``evals/<n>/summary.json``, and the queue keeps the summary's settings as the submission's
``settings_json`` in run.db, which the record's readers (``store.strict_of``,
``judgement_of``, ``prompt_profile_of``, ``decoding_row_of``) parse again, years later, from
run folders any release may have written. They live here, in the layer that owns the run
folder, so that the writer (the grader) and those readers share one definition: each is a
dataclass with one way to JSON and one way back. The JSON is the same as before these types
existed (same keys, same order), so old run folders stay readable and new ones stay
readable by old releases.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


class EvalJobError(ValueError):
    """A job the worker cannot run: a required key missing or of the wrong type."""


def _dict_or_none(value: Any) -> dict[str, Any] | None:
    return dict(value) if isinstance(value, dict) else None


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


@dataclass(frozen=True)
class EvalJob:
    """One submission's evaluation, as the grader's queue hands it to the eval worker."""

    submission_id: int
    model_path: str
    """The grader's own copy of the submitted folder (``intake/<n>``)."""
    task_folder: str
    out_dir: str
    """``evals/<n>``: results.jsonl and summary.json go there."""
    weight_files: list[str] | None = None
    """The weight files the intake took (the engine loads these, the hash covers these); None: all."""
    limit: int | None = None
    """The run's ``eval_limit``: the first N items only."""
    engine: dict[str, Any] = field(default_factory=dict)
    """The run's engine settings over the task's (``--engine``, ``--engine-option``)."""
    prompt_profile: str | None = None
    decoding_row: str | None = None
    judge: dict[str, Any] | None = None
    eval_seed: int | None = None
    search: dict[str, Any] | None = None
    store: dict[str, Any] | None = None

    REQUIRED = ("submission_id", "model_path", "task_folder", "out_dir")

    def to_json(self) -> dict[str, Any]:
        """The job line's object (the grader's keys, in its order)."""
        return {
            "submission_id": self.submission_id,
            "model_path": self.model_path,
            "weight_files": self.weight_files,
            "task_folder": self.task_folder,
            "out_dir": self.out_dir,
            "limit": self.limit,
            "engine": self.engine,
            "prompt_profile": self.prompt_profile,
            "decoding_row": self.decoding_row,
            "judge": self.judge,
            "eval_seed": self.eval_seed,
            "search": self.search,
            "store": self.store,
        }

    @classmethod
    def from_json(cls, data: Any) -> EvalJob:
        """A job from its object (or its JSON text); optional keys missing or null take their
        defaults, a required one missing or mistyped is an ``EvalJobError`` that names it."""
        if isinstance(data, str | bytes):
            try:
                data = json.loads(data)
            except ValueError as exc:
                raise EvalJobError(f"an eval job is not JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise EvalJobError(f"an eval job is a JSON object, not {type(data).__name__}")
        missing = [key for key in cls.REQUIRED if data.get(key) is None]
        if missing:
            raise EvalJobError(f"an eval job without {', '.join(missing)}")
        sub_id = data["submission_id"]
        if not isinstance(sub_id, int) or isinstance(sub_id, bool):
            raise EvalJobError(f"an eval job's submission_id is an integer, not {sub_id!r}")
        for key in ("model_path", "task_folder", "out_dir"):
            if not isinstance(data[key], str):
                raise EvalJobError(f"an eval job's {key} is a path, not {type(data[key]).__name__}")
        weights = data.get("weight_files")
        limit, seed = data.get("limit"), data.get("eval_seed")
        return cls(
            submission_id=sub_id,
            model_path=data["model_path"],
            task_folder=data["task_folder"],
            out_dir=data["out_dir"],
            weight_files=[str(w) for w in weights] if isinstance(weights, list) else None,
            limit=int(limit) if isinstance(limit, int | float) and not isinstance(limit, bool) else None,
            engine=_dict_or_none(data.get("engine")) or {},
            prompt_profile=_str_or_none(data.get("prompt_profile")),
            decoding_row=_str_or_none(data.get("decoding_row")),
            judge=_dict_or_none(data.get("judge")),
            eval_seed=int(seed) if isinstance(seed, int | float) and not isinstance(seed, bool) else None,
            search=_dict_or_none(data.get("search")),
            store=_dict_or_none(data.get("store")),
        )
