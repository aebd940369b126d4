"""Episodes (the items of an interactive task) as a reviewer reads them, turn by turn.

A Level-3 result line keeps the whole game in ``extra`` (the grader's ``episode_result``):
the game, its goal, how it ended, and every turn's action, observation, reward and the
model's raw completion. This module decides what of it is shown and in what order (the
facts, the opening observation, then each turn) and caps what could be too long to draw at
once: an episode that ran into its step limit may hold fifty long observations. The Items
screen only draws these rows; nothing here knows about a terminal.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from agent2rl_tui.record.results import EpisodeRow, ItemRow

MAX_TURNS = 200
"""Turns shown per episode; the rest are counted, not drawn."""
MAX_TEXT_CHARS = 4000
"""Characters shown of one observation or completion; the rest are counted, not drawn."""

END_MEANINGS = {
    "won": "won",
    "done": "lost: the game ended without a win",
    "step limit": "lost: the step limit was reached before a win",
    "context full": "lost: the transcript outgrew the model's context",
    "wrong answer": "lost: the judge called the answer wrong",
}
"""What each end an episode runner records means (``Episode.end``)."""

RowKind = Literal["won", "lost", "field", "observation", "action", "completion", "hidden"]


@dataclass(frozen=True)
class EpisodeFacts:
    """What the list shows of an episode, and the head of its detail."""

    index: int
    won: bool
    game: str
    kind: str | None
    goal: str
    end: str  # "won", "done", "step limit", "context full" (or whatever the grader wrote)
    steps: int
    score: float | None
    actions: list[str]

    @property
    def outcome(self) -> str:
        """``won``, or ``lost (<end>)``: a short verdict for a table cell."""
        return "won" if self.won else f"lost ({self.end})" if self.end and self.end != "won" else "lost"

    @property
    def end_meaning(self) -> str:
        return END_MEANINGS.get(self.end, f"{'won' if self.won else 'lost'}: {self.end or 'no end recorded'}")


@dataclass(frozen=True)
class Row:
    """One block of an episode's detail: a label column, a text, and a dimmer note."""

    kind: RowKind
    label: str
    text: str
    turn: int | None = None  # the turn (from 1) the row belongs to
    note: str = ""  # shown after the text (an action's reward)
    note_good: bool = False  # the note is good news (a positive reward)


def is_episode(item: ItemRow) -> bool:
    """An interactive task's result line: an item whose ``extra`` holds the turns played."""
    return item.is_episode


def all_episodes(items: Iterable[ItemRow]) -> bool:
    """The items are episodes (an evaluation's items are all of one kind); False for none."""
    seen = False
    for item in items:
        if not is_episode(item):
            return False
        seen = True
    return seen


def facts(item: ItemRow) -> EpisodeFacts:
    """An episode's facts (``is_episode`` items only: another is a ``RowError``)."""
    return _facts(EpisodeRow.from_item(item))


def _facts(ep: EpisodeRow) -> EpisodeFacts:
    return EpisodeFacts(
        index=ep.index, won=ep.won, game=ep.game or "?", kind=ep.kind, goal=ep.goal,
        end=ep.end or ep.item.extracted or "", steps=ep.steps,
        score=float(ep.score) if ep.score is not None else None, actions=[t.action for t in ep.turns])


def _reward(value: Any) -> str:
    if not isinstance(value, int | float):
        return "reward ?"
    return f"reward {value:+g}" if value else "reward 0"


def _capped(kind: RowKind, label: str, text: str, turn: int | None, max_chars: int) -> list[Row]:
    if len(text) <= max_chars:
        return [Row(kind, label, text, turn)]
    return [Row(kind, label, text[:max_chars], turn),
            Row("hidden", "", f"… {len(text) - max_chars:,} more characters not shown", turn)]


def episode_rows(item: ItemRow, *, max_turns: int = MAX_TURNS,
                 max_chars: int = MAX_TEXT_CHARS) -> list[Row]:
    """The detail of one episode: its facts, the opening observation, then every turn
    (action and reward; the raw completion where it says more than the action; the
    observation), with long texts and turns past ``max_turns`` counted instead of shown."""
    ep = EpisodeRow.from_item(item)
    f = _facts(ep)
    extra = ep.rest  # a searching task's answer and judging
    score = f" · score {f.score:g}" if f.score is not None else ""
    rows = [Row("won" if f.won else "lost", "",
                f"episode {f.index} · {f.outcome} after {f.steps} step{'s' if f.steps != 1 else ''}{score}"),
            Row("field", "game", f.game)]
    if f.kind:
        rows.append(Row("field", "kind", f.kind))
    rows += [Row("field", "goal", f.goal or "-"), Row("field", "end", f.end_meaning),
             Row("field", "steps", str(f.steps))]
    if "gold_answer" in extra:  # a searching task: the answer, the gold one and the judge's verdict
        answer = extra.get("answer")
        rows += [Row("field", "answer", "(none given)" if answer is None else str(answer) or "(empty)"),
                 Row("field", "gold", str(extra.get("gold_answer"))),
                 Row("field", "judge", str(extra.get("judge_raw") or extra.get("judge_error") or "-"))]
        if extra.get("judge_fallback"):  # the reference's judge failed, and its string match decided
            rows.append(Row("field", "decided by", f"{extra['judge_fallback']} (the judge failed)"))
    rows += _capped("observation", "start", ep.first_observation.rstrip(), None, max_chars)
    turns = ep.turns
    for n, turn in enumerate(turns[:max_turns], start=1):
        action, reward = turn.action, turn.reward
        rows.append(Row("action", f"{n} >", action or "(empty action)", n, _reward(reward),
                        reward is not None and reward > 0))
        completion = turn.completion
        if completion is not None and completion.strip() != action:
            rows += _capped("completion", "raw", json.dumps(completion, ensure_ascii=False), n, max_chars)
        rows += _capped("observation", "", turn.observation.rstrip(), n, max_chars)
    if len(turns) > max_turns:
        rows.append(Row("hidden", "", f"… {len(turns) - max_turns} more turns not shown (turns {max_turns + 1}-"
                                      f"{len(turns)}); the evaluation's results.jsonl holds them all"))
    return rows
