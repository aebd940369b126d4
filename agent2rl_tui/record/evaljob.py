"""The eval job and its summary, typed: what the grader hands its eval worker, and what comes back.

The grader's queue (``grader/server/queue.py``) writes one job per submission as a JSON line
on the worker's stdin; the worker (``grader/worker.py``) writes its answer to
``evals/<n>/summary.json``, and the queue keeps the summary's settings as the submission's
``settings_json`` in run.db, which the record's readers (``store.strict_of``,
``judgement_of``, ``prompt_profile_of``, ``decoding_row_of``) parse again, years later, from
run folders any release may have written. They live here, in the layer that owns the run
folder, so that the writer (the grader) and those readers share one definition: each is a
dataclass with one way to JSON and one way back, and so is each table inside a summary
(``record.summary_parts``: our stricter reading, the judge, its win rates, the engine's
settings, the environment, the play summary). The JSON is the same as before these types
existed (same keys, same order, unknown keys kept), so old run folders stay readable and new
ones stay readable by old releases.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from agent2rl_tui.record.summary_parts import (
    EngineRecord,
    EnvRecord,
    EpisodesSummary,
    Judgement,
    JudgeRecord,
    Part,
    StrictReading,
    WinRates,
    as_json,
)
from agent2rl_tui.tasks.eval_settings import InferenceSettings

P = TypeVar("P", bound=Part)
"""One of a summary's inner tables (``record.summary_parts``)."""


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


def _loads(text: str | bytes | None) -> Any:
    """JSON from the record, or None where it is absent or unreadable (never raises)."""
    if not text:
        return None
    try:
        return json.loads(text)
    except (ValueError, TypeError, RecursionError):
        return None


@dataclass
class EvalSummary:
    """How a score was made, as kept beside it (a submission's ``settings_json``).

    The worker writes, in this order: the evaluator and how the engine was chosen and loaded;
    the prompt profile's settings (``InferenceSettings.to_dict``: ``inference``, with the
    profile's name and its model-table row typed); the engine's settings; the evaluator's
    details (our stricter reading ``strict``, a pairwise judge's ``judge`` and ``winrate``, or
    anything else an evaluator adds: ``rest``); an interactive task's ``env`` table and its
    ``episodes`` summary. Every reader of a stored score goes through ``from_settings_json``.
    """

    evaluator: str | None = None
    engine_choice: str | None = None
    engine_load: str | None = None
    inference: dict[str, Any] = field(default_factory=dict)
    """The prompt profile's settings as recorded, but for the two typed below."""
    prompt_profile: str | None = None
    decoding_row: str | None = None
    engine_settings: EngineRecord | None = None
    strict: StrictReading | None = None
    """Our stricter reading beside a reference-profile score: score, n_correct, n_differ, differ, rule."""
    judge: JudgeRecord | None = None
    """A pairwise judge's settings (model, mode, prompt_version, order...)."""
    winrate: WinRates | None = None
    """A pairwise judge's rates (metric, win_rate, length_controlled_winrate, n_total...)."""
    env: EnvRecord | None = None
    """An interactive task's ``[env]`` table."""
    episodes: EpisodesSummary | None = None
    """An interactive task's play summary (score, games won, by kind, generate calls, its judging)."""
    rest: dict[str, Any] = field(default_factory=dict)
    """Every other key, kept as found (an evaluator's other details, a later release's keys)."""
    order: tuple[str, ...] = field(default=(), repr=False, compare=False)
    """A read summary's keys in their order (a later release may write its keys elsewhere); empty
    for one made here, which writes the worker's order."""

    TEXTS = ("evaluator", "engine_choice", "engine_load")
    TABLES: ClassVar[dict[str, type[Part]]] = {
        "engine_settings": EngineRecord, "strict": StrictReading, "judge": JudgeRecord, "winrate": WinRates,
        "env": EnvRecord, "episodes": EpisodesSummary}
    """Each inner table's key and its part (``record.summary_parts``)."""
    INFERENCE_KEYS = frozenset(f.name for f in dataclasses.fields(InferenceSettings)) - {"prompt_profile",
                                                                                        "decoding_row"}
    """The prompt profile's settings (``InferenceSettings.to_dict``), but for the two typed."""

    @classmethod
    def made_with(cls, *, evaluator: str, engine_choice: str, engine_load: str, inference: dict[str, Any],
                  engine_settings: dict[str, Any], details: dict[str, Any],
                  env: dict[str, Any] | None = None, episodes: dict[str, Any] | None = None) -> EvalSummary:
        """The worker's summary of one evaluation: ``inference`` is ``InferenceSettings.to_dict()``,
        ``details`` the evaluator's."""
        details = dict(details)

        def take(key: str, part: type[P]) -> P | None:  # a table of the details becomes its part
            return part.from_json(details.pop(key)) if isinstance(details.get(key), dict) else None

        inference = dict(inference)
        return cls(evaluator=evaluator, engine_choice=engine_choice, engine_load=engine_load, inference=inference,
                   prompt_profile=inference.get("prompt_profile"), decoding_row=inference.get("decoding_row"),
                   engine_settings=EngineRecord.from_json(engine_settings), strict=take("strict", StrictReading),
                   judge=take("judge", JudgeRecord), winrate=take("winrate", WinRates), env=EnvRecord.from_json(env),
                   episodes=EpisodesSummary.from_json(episodes), rest=details)

    def to_json(self) -> dict[str, Any]:
        """The object kept as ``settings_json``, in the worker's order."""
        out: dict[str, Any] = {key: getattr(self, key) for key in self.TEXTS if getattr(self, key) is not None}
        out.update(self.inference)
        for key in ("prompt_profile", "decoding_row"):
            if key in out or getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.engine_settings is not None:
            out["engine_settings"] = self.engine_settings.to_json()
        out.update({key: part.to_json() for key in ("strict", "judge", "winrate")
                    if (part := getattr(self, key)) is not None})
        out.update(self.rest)
        if self.episodes is not None or self.env is not None:  # the worker writes both (a read one: those it had)
            pair = {"env": as_json(self.env), "episodes": as_json(self.episodes)}
            out.update({key: value for key, value in pair.items()
                        if value is not None or not self.order or key in self.order})
        if self.order:  # as read: its own order, anything set since after it
            out = {key: out[key] for key in self.order if key in out} | out
        return out

    def to_settings_json(self) -> str:
        return json.dumps(self.to_json())

    @classmethod
    def from_json(cls, data: Any) -> EvalSummary:
        """A summary from its object, old or new; anything not an object is an empty summary,
        a typed key of the wrong type is kept in ``rest`` as found."""
        if not isinstance(data, dict):
            return cls()
        summary, rest = cls(), {}
        for key, value in data.items():
            if key in cls.TEXTS or key in ("prompt_profile", "decoding_row"):
                if isinstance(value, str) or (value is None and key in ("prompt_profile", "decoding_row")):
                    if key in ("prompt_profile", "decoding_row"):
                        summary.inference[key] = value  # its place among the profile's settings
                    setattr(summary, key, value)
                    continue
            elif key in cls.TABLES:
                if (part := cls.TABLES[key].from_json(value)) is not None:
                    setattr(summary, key, part)
                    continue
            elif key in cls.INFERENCE_KEYS:
                summary.inference[key] = value
                continue
            rest[key] = value
        summary.rest = rest
        summary.order = tuple(data)
        return summary

    @classmethod
    def from_settings_json(cls, text: str | bytes | None) -> EvalSummary:
        """A stored ``settings_json``, of any release or none; never raises (an unreadable one,
        or one that is not an object, is an empty summary)."""
        return cls.from_json(_loads(text))

    def judgement(self) -> Judgement | None:
        """A judge-graded score's facts: which rate the score is, both rates, the judge, how many
        items it failed on; None for other scores (no rates or no judge, or an empty table)."""
        rates, judge = self.winrate, self.judge
        if rates is None or judge is None or rates.empty or judge.empty:
            return None
        return Judgement.of(rates, judge)


@dataclass
class WorkerSummary:
    """The eval worker's answer for one job (``evals/<n>/summary.json``): a score with how it was
    made (``settings``, kept as the submission's ``settings_json``) and its timings, or a failure's
    code and text."""

    ok: bool
    submission_id: int | None
    score: float | None = None
    n_items: int | None = None
    n_correct: int | None = None
    weights_hash: str | None = None
    engine: str | None = None
    settings: EvalSummary = field(default_factory=EvalSummary)
    timings: dict[str, float] = field(default_factory=dict)
    error_code: str | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        if not self.ok:
            return {"ok": False, "submission_id": self.submission_id, "error_code": self.error_code,
                    "error": self.error}
        return {"ok": True, "submission_id": self.submission_id, "score": self.score, "n_items": self.n_items,
                "n_correct": self.n_correct, "weights_hash": self.weights_hash, "engine": self.engine,
                "settings": self.settings.to_json(), "timings": self.timings}

    @classmethod
    def from_json(cls, data: Any) -> WorkerSummary:
        """A summary.json's object; an ``EvalJobError`` for one that is not an answer (a score
        without its figures, a field of the wrong type)."""
        if not isinstance(data, dict):
            raise EvalJobError(f"a worker's summary is a JSON object, not {type(data).__name__}")
        sub_id = data.get("submission_id")
        sub_id = sub_id if isinstance(sub_id, int) and not isinstance(sub_id, bool) else None
        if not data.get("ok"):
            code, error = data.get("error_code"), data.get("error")
            return cls(ok=False, submission_id=sub_id, error_code=None if code is None else str(code),
                       error=None if error is None else str(error))
        try:
            timings = data.get("timings") or {}
            if not isinstance(timings, dict):
                raise TypeError("timings is not an object")
            score = data["score"]
            if not isinstance(score, int | float) or isinstance(score, bool):
                raise TypeError(f"score is {type(score).__name__}")
            return cls(ok=True, submission_id=sub_id, score=score, n_items=int(data["n_items"]),
                       n_correct=int(data["n_correct"]),
                       weights_hash=None if data.get("weights_hash") is None else str(data["weights_hash"]),
                       engine=str(data["engine"]), settings=EvalSummary.from_json(data.get("settings")),
                       timings=dict(timings))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise EvalJobError(f"a worker's summary without its figures: {type(exc).__name__}: {exc}") from exc
