"""The GRPO reward: 1.0 when the reply's final answer equals the gold one, else 0.0.

Written by the agent for its own training, from the task's description of how answers are
read: the number after ``####``, else the last number in the text, compared by value
(``1,000``, ``$1000`` and ``1000.0`` are all 1000). Exact match is hard to game, so the
policy can only raise it by answering right.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any

NUMBER = re.compile(r"-?[$]?\d[\d,]*(?:\.\d+)?|-?[$]?\.\d+")
AFTER_HASHES = re.compile(r"####\s*(" + NUMBER.pattern + ")")


def final_answer(text: str) -> str | None:
    """The number after the first ``####``, else the last number, else None."""
    m = AFTER_HASHES.search(text)
    if m:
        return m.group(1)
    numbers = NUMBER.findall(text)
    return numbers[-1] if numbers else None


def as_number(text: str | None) -> Decimal | None:
    if text is None:
        return None
    try:
        return Decimal(text.replace(",", "").replace("$", "").strip().rstrip("."))
    except InvalidOperation:
        return None


def same_answer(reply: str, gold: str) -> bool:
    a, b = as_number(final_answer(reply)), as_number(final_answer(gold))
    return a is not None and b is not None and a == b


def exact_match_reward(completions: list[Any], answer: list[str], **_: Any) -> list[float]:
    """TRL reward function: one float per completion; ``answer`` is the dataset's column."""
    rewards = []
    for completion, gold in zip(completions, answer):
        text = completion[-1]["content"] if isinstance(completion, list) else str(completion)
        rewards.append(1.0 if same_answer(text, gold) else 0.0)
    return rewards
