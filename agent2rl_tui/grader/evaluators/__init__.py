"""Evaluators turn eval items into prompts and model outputs into per-item verdicts.

An evaluator is pure (no model, no I/O): the eval worker generates with an engine and
hands the outputs here, so evaluators are tested on plain strings.
"""

from __future__ import annotations

from agent2rl_tui.grader.evaluators.base import BaseEvaluator, ItemResult
from agent2rl_tui.grader.evaluators.humaneval import HumanEvalEvaluator
from agent2rl_tui.grader.evaluators.math_answer import MathAnswerEvaluator

EVALUATORS: dict[str, type[BaseEvaluator]] = {
    "math_answer": MathAnswerEvaluator,
    "humaneval": HumanEvalEvaluator,
}


def get_evaluator(name: str) -> BaseEvaluator:
    try:
        return EVALUATORS[name]()
    except KeyError:
        raise ValueError(f"unknown evaluator {name!r}; known: {sorted(EVALUATORS)}") from None


__all__ = ["EVALUATORS", "BaseEvaluator", "ItemResult", "get_evaluator"]
