"""GSM8K-style answer checking: the number after ``####``, else the last number.

The same rule grades the offline ``arith`` task and GSM8K, so one evaluator serves both.
Numbers compare by value: ``1,000``, ``$1000``, ``1000.0`` and ``1000.`` are all 1000.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any

from agent2rl_tui.grader.evaluators.base import BaseEvaluator, ItemResult

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


class MathAnswerEvaluator(BaseEvaluator):
    name = "math_answer"

    def judge(self, index: int, item: dict[str, Any], prompt: str, output: str) -> ItemResult:
        gold = extract_answer(str(item["answer"]))
        predicted = extract_answer(output)
        return ItemResult(
            index=index,
            prompt=prompt,
            output=output,
            extracted=predicted,
            gold=gold or "",
            correct=answers_match(predicted, gold) or _math_verify(predicted, gold),
        )


def _math_verify(predicted: str | None, gold: str | None) -> bool:
    """HF math-verify, when installed, for answers the numeric rule cannot compare (e.g. 3/4)."""
    if predicted is None or gold is None or normalize_number(predicted) is not None:
        return False
    try:
        from math_verify import parse, verify
    except ImportError:
        return False
    try:
        return bool(verify(parse(gold), parse(predicted)))
    except Exception:  # noqa: BLE001 - an unparsable answer is simply not correct
        return False
