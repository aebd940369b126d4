"""Evaluators turn eval items into prompts and model outputs into per-item verdicts.

An evaluator is pure (no model, no I/O): the eval worker generates with an engine and
hands the outputs here, so evaluators are tested on plain strings.
"""

from __future__ import annotations

from typing import Any

from agent2rl_tui.grader.evaluators.base import BaseEvaluator, ItemResult
from agent2rl_tui.grader.evaluators.humaneval import HumanEvalEvaluator
from agent2rl_tui.grader.evaluators.math_answer import MathAnswerEvaluator
from agent2rl_tui.tasks.registry import InferenceSettings, Task

EVALUATORS: dict[str, type[BaseEvaluator]] = {
    "math_answer": MathAnswerEvaluator,
    "humaneval": HumanEvalEvaluator,
}


def get_evaluator(name: str, spec: dict[str, Any] | None = None) -> BaseEvaluator:
    try:
        return EVALUATORS[name](spec)
    except KeyError:
        raise ValueError(f"unknown evaluator {name!r}; known: {sorted(EVALUATORS)}") from None


def evaluator_for(task: Task, settings: InferenceSettings | None = None) -> BaseEvaluator:
    """The task's evaluator for a prompt profile (the task's default without one), with the
    options its [grader] section sets."""
    spec = task.grading_spec(settings)
    if task.evaluator == "humaneval":
        grader = task.raw.get("grader", {})
        return HumanEvalEvaluator(spec, timeout_s=float(grader.get("sandbox_timeout_s", 5)),
                                  memory_mb=int(grader.get("sandbox_memory_mb", 1024)),
                                  mode=grader.get("sandbox_mode"))
    return get_evaluator(task.evaluator, spec)


__all__ = ["EVALUATORS", "BaseEvaluator", "ItemResult", "evaluator_for", "get_evaluator"]
