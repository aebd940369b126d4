"""The math evaluator: GSM8K and ``arith`` items judged by the profile's rule in ``tasks.grading_rules``.

Under a reference rule (``opencompass-gsm8k``) the score is the reference's reading; each item
also keeps our reading of the same reply (``extra.strict``), and ``details`` counts where the
two disagree, so a reviewer sees both.
"""

from __future__ import annotations

from typing import Any

from agent2rl_tui.grader.evaluators.base import BaseEvaluator, ItemResult
from agent2rl_tui.tasks import grading_rules as rules


class MathAnswerEvaluator(BaseEvaluator):
    name = "math_answer"

    def judge(self, index: int, item: dict[str, Any], prompt: str, output: str) -> ItemResult:
        spec = self.spec
        gold = rules.gold_answer(item, spec)
        predicted = rules.read_answer(output, spec)
        correct = rules.is_correct(item, output, spec)
        if spec.get("extraction") != "opencompass-gsm8k":
            correct = correct or _math_verify(predicted, gold)
            return ItemResult(index=index, prompt=prompt, output=output, extracted=predicted, gold=gold or "",
                              correct=correct)
        strict = rules.strict_answer(output, spec)
        return ItemResult(index=index, prompt=prompt, output=output, extracted=predicted, gold=gold or "",
                          correct=correct,
                          extra={"strict": strict, "strict_correct": rules.answers_match(strict, gold)})

    def details(self, results: list[ItemResult]) -> dict[str, Any]:
        return strict_details(results, "our reading of the same text: the number after ####, else the last "
                                       "number, thousands separators kept (1,000 is 1000)")


def strict_details(results: list[ItemResult], rule: str) -> dict[str, Any]:
    """Our stricter reading beside the reference's: its score and the items where they differ."""
    if not results or "strict_correct" not in results[0].extra:
        return {}
    differ = [r.index for r in results if r.extra["strict_correct"] != r.correct]
    n_strict = sum(r.extra["strict_correct"] for r in results)
    return {"strict": {"score": 100.0 * n_strict / len(results), "n_correct": n_strict,
                       "n_differ": len(differ), "differ": differ[:200], "rule": rule}}


def _math_verify(predicted: str | None, gold: str | None) -> bool:
    """HF math-verify, when installed, for answers the numeric rule cannot compare (e.g. 3/4)."""
    if predicted is None or gold is None or rules.normalize_number(predicted) is not None:
        return False
    try:
        from math_verify import parse, verify
    except ImportError:
        return False
    try:
        return bool(verify(parse(gold), parse(predicted)))
    except Exception:  # noqa: BLE001 - an unparsable answer is simply not correct
        return False
