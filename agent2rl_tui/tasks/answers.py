"""Answer rules of the math tasks: the number after ``####``, else the last number.

The same rule grades the offline ``arith`` task and GSM8K. Numbers compare by value:
``1,000``, ``$1000``, ``1000.0`` and ``1000.`` are all 1000. It lives with the task
definitions so the grader's evaluator and a reader of per-item results use one rule.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

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
