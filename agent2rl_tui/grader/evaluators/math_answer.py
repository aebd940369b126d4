"""The math evaluator: GSM8K and ``arith`` items judged by the rule in ``tasks.answers``."""

from __future__ import annotations

from typing import Any

from agent2rl_tui.grader.evaluators.base import BaseEvaluator, ItemResult
from agent2rl_tui.tasks.answers import answers_match, extract_answer, normalize_number


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
