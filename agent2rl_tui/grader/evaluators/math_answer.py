"""GSM8K-style answer checking: the number after ``####``, else the last number.

The same rule grades the offline ``arith`` task and GSM8K, so one evaluator serves both.
Numbers compare by value: ``1,000``, ``$1000``, ``1000.0`` and ``1000.`` are all 1000.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any

from agent2rl_tui.core.tasks import InferenceSettings
from agent2rl_tui.grader.evaluators.base import ItemResult, Messages

_NUMBER = re.compile(r"-?[$]?\d[\d,]*(?:\.\d+)?|-?[$]?\.\d+")
_AFTER_HASHES = re.compile(r"####\s*(" + _NUMBER.pattern + ")")


def normalize_number(text: str) -> Decimal | None:
    cleaned = text.replace(",", "").replace("$", "").strip().rstrip(".")
    try:
        return Decimal(cleaned)
    except InvalidOperation:
        return None


def extract_answer(text: str) -> str | None:
    """The GSM8K rule: the number after the first ``####``, else the last number in the text."""
    m = _AFTER_HASHES.search(text)
    if m:
        return m.group(1)
    numbers = _NUMBER.findall(text)
    return numbers[-1] if numbers else None


def answers_match(predicted: str | None, gold: str | None) -> bool:
    if predicted is None or gold is None:
        return False
    a, b = normalize_number(predicted), normalize_number(gold)
    return a is not None and b is not None and a == b


class MathAnswerEvaluator:
    name = "math_answer"

    def messages(self, item: dict[str, Any], settings: InferenceSettings) -> Messages:
        turns: Messages = []
        if settings.system_prompt:
            turns.append({"role": "system", "content": settings.system_prompt})
        turns.append({"role": "user", "content": settings.prompt_template.format(**item)})
        return turns

    def judge(self, index: int, item: dict[str, Any], prompt: str, output: str) -> ItemResult:
        gold = extract_answer(str(item["answer"]))
        predicted = extract_answer(output)
        return ItemResult(
            index=index,
            prompt=prompt,
            output=output,
            extracted=predicted,
            gold=gold or "",
            correct=answers_match(predicted, gold),
        )

    def score(self, results: list[ItemResult]) -> float:
        if not results:
            return 0.0
        return 100.0 * sum(r.correct for r in results) / len(results)
