"""The tables inside an eval summary (``settings_json``), typed: our stricter reading, a judge,
its win rates, the engine's settings, an interactive task's environment and its play summary.

Each table was written by some release's evaluator and is read back from run folders years
later, so each part is a small frozen dataclass that keeps its table exactly: the fields this
release reads are typed attributes, every other key (a later release's, an evaluator's own) and
every typed key whose value is of the wrong type is kept in ``rest`` as found, and ``order``
keeps the table's key order, so ``to_json`` gives back the very object read (byte-identical
JSON). Values are checked, never converted (an integer score stays an integer), and reading
never raises: what is not an object is no part at all (None).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self


def _text(value: Any) -> bool:
    return isinstance(value, str)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _integers(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)


def _table(value: Any) -> bool:
    return isinstance(value, dict)


@dataclass(frozen=True)
class Part:
    """One table of a summary: typed fields (declared by each part in ``CHECKS``), ``rest`` and ``order``."""

    rest: dict[str, Any] = field(default_factory=dict, repr=False)
    """The keys not typed here, or typed but holding another type, as found."""
    order: tuple[str, ...] = field(default=(), repr=False, compare=False)
    """The table's keys in the order read (empty for a part made in code: typed fields first, then ``rest``)."""

    CHECKS: ClassVar[dict[str, Callable[[Any], bool]]] = {}
    """Each typed field's name (its key in the table) and what its value must be."""

    @classmethod
    def from_json(cls, data: Any) -> Self | None:
        """The part of a table as found; None for anything that is not an object. Never raises."""
        if not isinstance(data, dict):
            return None
        typed: dict[str, Any] = {}
        rest: dict[str, Any] = {}
        for key, value in data.items():
            check = cls.CHECKS.get(key) if isinstance(key, str) else None
            if check is not None and (value is None or check(value)):
                typed[key] = value
            else:
                rest[key] = value
        return cls(rest=rest, order=tuple(data), **typed)

    def to_json(self) -> dict[str, Any]:
        """The table, as read (same keys, same order); a part made in code: its typed fields that
        are set, then ``rest``."""
        keys = self.order or (*(k for k in self.CHECKS if getattr(self, k) is not None), *self.rest)
        return {key: self.rest[key] if key in self.rest else getattr(self, key) for key in keys}

    @property
    def empty(self) -> bool:
        """An empty table (``{}``)."""
        return not self.order and not self.rest and all(getattr(self, k) is None for k in self.CHECKS)


def _checked(cls: type[Part]) -> type[Part]:
    """A part's ``CHECKS`` cover its own fields exactly (a typo would silently keep a key in ``rest``)."""
    own = {f.name for f in dataclasses.fields(cls)} - {"rest", "order"}
    assert own == set(cls.CHECKS), f"{cls.__name__}: fields {sorted(own)} but checks {sorted(cls.CHECKS)}"
    return cls


@_checked
@dataclass(frozen=True)
class StrictReading(Part):
    """Our stricter reading beside a reference-profile score (``math_answer.strict_details``)."""

    score: float | None = None
    n_correct: float | None = None
    n_differ: float | None = None
    differ: list[int] | None = None
    """The indices of the items the two readings disagree on (the first 200)."""
    rule: str | None = None
    """Our rule, in words."""

    CHECKS: ClassVar[dict[str, Callable[[Any], bool]]] = {
        "score": _number, "n_correct": _number, "n_differ": _number, "differ": _integers, "rule": _text}


@_checked
@dataclass(frozen=True)
class JudgeRecord(Part):
    """The judge that graded a score: its settings (``JudgeSettings.to_dict``), prompt version and style."""

    model: str | None = None
    mode: str | None = None
    prompt_version: str | None = None
    style: str | None = None

    CHECKS: ClassVar[dict[str, Callable[[Any], bool]]] = {
        "model": _text, "mode": _text, "prompt_version": _text, "style": _text}


@_checked
@dataclass(frozen=True)
class WinRates(Part):
    """A pairwise judge's rates (``judge.winrate.win_rates`` and the evaluator's counts)."""

    metric: str | None = None
    """Which rate is the score: ``length_controlled_winrate`` or ``win_rate``."""
    win_rate: float | None = None
    length_controlled_winrate: float | None = None
    lc_unavailable: str | None = None
    """Why there is no length-controlled rate."""
    n_total: float | None = None
    n_failed: float | None = None
    n_cached: float | None = None

    CHECKS: ClassVar[dict[str, Callable[[Any], bool]]] = {
        "metric": _text, "win_rate": _number, "length_controlled_winrate": _number, "lc_unavailable": _text,
        "n_total": _number, "n_failed": _number, "n_cached": _number}


@_checked
@dataclass(frozen=True)
class EngineRecord(Part):
    """The engine's settings a score was made with (``EngineSettings.to_dict`` and what the engine reported)."""

    engine: str | None = None
    dtype: str | None = None
    device: str | None = None

    CHECKS: ClassVar[dict[str, Callable[[Any], bool]]] = {"engine": _text, "dtype": _text, "device": _text}


@_checked
@dataclass(frozen=True)
class EnvRecord(Part):
    """An interactive task's ``[env]`` table, as the score was played with."""

    kind: str | None = None

    CHECKS: ClassVar[dict[str, Callable[[Any], bool]]] = {"kind": _text}


@_checked
@dataclass(frozen=True)
class EpisodesSummary(Part):
    """An interactive task's play summary (``grader.episode_runner.summarize`` and what ``play_task`` adds)."""

    score: float | None = None
    games: float | None = None
    won: float | None = None
    mean_steps: float | None = None
    by_kind: dict[str, Any] | None = None
    generate_calls: float | None = None
    largest_batch: float | None = None

    CHECKS: ClassVar[dict[str, Callable[[Any], bool]]] = {
        "score": _number, "games": _number, "won": _number, "mean_steps": _number, "by_kind": _table,
        "generate_calls": _number, "largest_batch": _number}


@dataclass(frozen=True)
class Judgement:
    """A judge-graded score's facts, as the report keeps them: which rate the score is, both
    rates, how many items were judged, failed and cached, and the judge."""

    metric: str | None
    win_rate: float | None
    length_controlled_winrate: float | None
    lc_unavailable: str | None
    n_judged: float | None
    n_failed: float | None
    n_cached: float | None
    judge_model: str | None
    judge_mode: str | None

    @classmethod
    def of(cls, rates: WinRates, judge: JudgeRecord) -> Judgement:
        return cls(metric=rates.metric, win_rate=rates.win_rate,
                   length_controlled_winrate=rates.length_controlled_winrate,
                   lc_unavailable=rates.lc_unavailable, n_judged=rates.n_total, n_failed=rates.n_failed,
                   n_cached=rates.n_cached, judge_model=judge.model, judge_mode=judge.mode)

    def to_json(self) -> dict[str, Any]:
        """report.json's ``judged`` (these keys, in this order)."""
        return dataclasses.asdict(self)


def as_json(part: Part | Judgement | None) -> dict[str, Any] | None:
    """A part's table (or a judgement's facts) for a report; None for none."""
    return part.to_json() if part is not None else None
