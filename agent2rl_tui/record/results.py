"""The lines of ``evals/<n>/results.jsonl``, typed: one item's outcome, or one played episode.

The grader writes these lines (its evaluators' ``ItemResult`` is ``ItemRow``; an interactive
task's ``episode_result`` builds an ``EpisodeRow``) and the record reads them back (run view,
episodes view, report) from run folders any release may have written. They live here, in the
layer that owns the run folder, because the record may not import the grader. The JSON is the
one written before these types (same keys, same order).

A results line is the grader's, but what it holds (prompts, outputs, answers, observations)
is the agent's model's: reading never trusts its types. ``ItemRow.from_dict`` refuses a line
it cannot type (``RowError``; readers skip it); ``EpisodeRow.from_dict`` reads what it can of
an episode's game, as the reviewer's view shows it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any


class RowError(ValueError):
    """A results line that is not an item's outcome (not an object, no index, a field mistyped)."""


def _text(value: Any, key: str, default: str | None = "") -> str | None:
    if isinstance(value, str):
        return value
    if value is None:
        return default
    if isinstance(value, int | float):
        return str(value)
    raise RowError(f"a results line's {key} is {type(value).__name__}, not text")


@dataclass
class ItemRow:
    """One eval item's outcome, as kept in evals/<n>/results.jsonl."""

    index: int
    prompt: str
    output: str
    extracted: str | None
    gold: str
    correct: bool
    extra: dict[str, Any] = field(default_factory=dict)
    """What the evaluator keeps beside the verdict (a stricter reading, a judge's preference, a game)."""
    rest: dict[str, Any] = field(default_factory=dict)
    """A read line's fields this release does not know, as found (written back after ``extra``)."""
    keys: tuple[str, ...] | None = field(default=None, compare=False, repr=False)
    """A read line's keys in its order; None for a row made here (which writes all seven)."""

    FIELDS = ("index", "prompt", "output", "extracted", "gold", "correct", "extra")

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "prompt": self.prompt, "output": self.output, "extracted": self.extracted,
                "gold": self.gold, "correct": self.correct, "extra": self.extra, **self.rest}

    def beside(self) -> dict[str, Any]:
        """What the line holds beside an item's six plain fields (index, prompt, output, extracted,
        gold, correct), in the line's order: its ``extra`` where it has one, then what ``rest`` keeps.
        A reviewer's "other fields": a line without ``extra`` shows none."""
        keys = self.keys if self.keys is not None else ("extra", *self.rest)
        return {key: self.extra if key == "extra" else self.rest[key] for key in keys
                if key == "extra" or key in self.rest}

    @property
    def preference(self) -> Any:
        """A judged item's preference as the judge's verdict was recorded (1 to 2: the model's output
        better; None where the judge failed); None for an item that is not a judgement."""
        return self.extra.get("preference")

    @property
    def judged(self) -> bool:
        """A judge-graded item: its ``extra`` holds a preference (None where the judge failed)."""
        return "preference" in self.extra

    @property
    def is_episode(self) -> bool:
        """An interactive task's item: its ``extra`` holds the turns played (``EpisodeRow``)."""
        return isinstance(self.extra.get("turns"), list)

    def to_line(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @classmethod
    def from_dict(cls, line: Any) -> ItemRow:
        """A line's object as an item; a ``RowError`` for one that is not an item's outcome. Missing
        texts are empty, a number where text belongs is its text, a missing verdict is wrong."""
        if not isinstance(line, dict):
            raise RowError(f"a results line is an object, not {type(line).__name__}")
        index = line.get("index")
        if isinstance(index, float) and index.is_integer():
            index = int(index)
        if not isinstance(index, int) or isinstance(index, bool):
            raise RowError(f"a results line's index is {type(index).__name__}, not an integer")
        correct = line.get("correct")
        if correct is not None and not isinstance(correct, bool | int | float):
            raise RowError(f"a results line's correct is {type(correct).__name__}, not a verdict")
        extra = line.get("extra")
        if extra is not None and not isinstance(extra, dict):
            raise RowError(f"a results line's extra is {type(extra).__name__}, not an object")
        return cls(index=index, prompt=str(_text(line.get("prompt"), "prompt")),
                   output=str(_text(line.get("output"), "output")),
                   extracted=_text(line.get("extracted"), "extracted", None),
                   gold=str(_text(line.get("gold"), "gold")), correct=bool(correct), extra=extra or {},
                   rest={k: v for k, v in line.items() if k not in cls.FIELDS}, keys=tuple(line))

    @classmethod
    def parse(cls, text: str) -> ItemRow | None:
        """A line of results.jsonl as an item; None for one that is not JSON or not an item."""
        try:
            return cls.from_dict(json.loads(text))
        except (ValueError, RecursionError):  # RowError is a ValueError
            return None


@dataclass
class Turn:
    """One turn of an episode: the action taken, what the game answered, the model's own text."""

    action: str
    observation: str
    reward: float | None = None
    completion: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"action": self.action, "observation": self.observation, "reward": self.reward,
                "completion": self.completion}

    @classmethod
    def from_dict(cls, turn: dict[str, Any]) -> Turn:
        reward = turn.get("reward")
        completion = turn.get("completion")
        return cls(action=str(turn.get("action", "")), observation=str(turn.get("observation", "")),
                   reward=reward if isinstance(reward, int | float) else None,
                   completion=completion if isinstance(completion, str) else None)


@dataclass
class EpisodeRow:
    """One played game of an interactive task: the item's outcome (won or not) with the whole
    game in its ``extra``: the game, goal, how it ended, every turn; a searching task's answer and
    its judging, and anything else, in ``rest``."""

    item: ItemRow
    game: str
    kind: str | None
    goal: str
    steps: int
    end: str
    """``won``, ``done``, ``step limit``, ``context full``, ``wrong answer`` (or what a grader wrote)."""
    score: float | None
    first_observation: str
    turns: list[Turn]
    rest: dict[str, Any] = field(default_factory=dict)

    GAME_KEYS = ("game", "kind", "goal", "steps", "end", "score", "first_observation", "turns")

    @property
    def index(self) -> int:
        return self.item.index

    @property
    def won(self) -> bool:
        return self.item.correct

    def to_extra(self) -> dict[str, Any]:
        return {"game": self.game, "kind": self.kind, "goal": self.goal, "steps": self.steps, "end": self.end,
                "score": self.score, "first_observation": self.first_observation,
                "turns": [t.to_dict() for t in self.turns], **self.rest}

    def to_item(self) -> ItemRow:
        """The results line: the item, its extra the game."""
        item = self.item
        return ItemRow(index=item.index, prompt=item.prompt, output=item.output, extracted=item.extracted,
                       gold=item.gold, correct=item.correct, extra=self.to_extra())

    def to_dict(self) -> dict[str, Any]:
        return self.to_item().to_dict()

    @classmethod
    def from_dict(cls, line: Any) -> EpisodeRow:
        """A line as an episode; a ``RowError`` for one that is not an item or holds no turns."""
        return cls.from_item(ItemRow.from_dict(line))

    @classmethod
    def from_item(cls, item: ItemRow) -> EpisodeRow:
        """An item as an episode; a ``RowError`` for one that holds no turns. What the game's fields
        hold is read as text where it is not (a reviewer sees all of it)."""
        if not item.is_episode:
            raise RowError("a results line without the turns of a game")
        extra = item.extra
        turns = [Turn.from_dict(t) for t in extra["turns"] if isinstance(t, dict)]
        steps, score, kind = extra.get("steps"), extra.get("score"), extra.get("kind")
        return cls(item=item, game=str(extra.get("game") or ""), kind=str(kind) if kind else None,
                   goal=str(extra.get("goal") or ""),
                   steps=int(steps) if isinstance(steps, int | float) and math.isfinite(steps) else len(turns),
                   end=str(extra.get("end") or ""), score=score if isinstance(score, int | float) else None,
                   first_observation=str(extra.get("first_observation") or ""), turns=turns,
                   rest={k: v for k, v in extra.items() if k not in cls.GAME_KEYS})
