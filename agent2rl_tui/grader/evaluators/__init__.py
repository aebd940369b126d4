"""Evaluators turn eval items into prompts and model outputs into per-item verdicts.

An evaluator is pure (no model, no I/O): the eval worker generates with an engine and
hands the outputs here, so evaluators are tested on plain strings.
"""

from __future__ import annotations

from typing import Any

from agent2rl_tui.grader.evaluators.base import BaseEvaluator, ItemResult
from agent2rl_tui.grader.evaluators.humaneval import HumanEvalEvaluator
from agent2rl_tui.grader.evaluators.math_answer import MathAnswerEvaluator
from agent2rl_tui.grader.evaluators.pairwise import PairwiseJudgeEvaluator
from agent2rl_tui.judge import JUDGE_MODES, JudgeError, JudgeSettings
from agent2rl_tui.tasks.registry import InferenceSettings, JudgeSection, Task, task_cache

EVALUATORS: dict[str, type[BaseEvaluator]] = {
    "math_answer": MathAnswerEvaluator,
    "humaneval": HumanEvalEvaluator,
}


def get_evaluator(name: str, spec: dict[str, Any] | None = None) -> BaseEvaluator:
    try:
        return EVALUATORS[name](spec)
    except KeyError:
        raise ValueError(f"unknown evaluator {name!r}; known: {sorted(EVALUATORS)}") from None


def evaluator_for(task: Task, settings: InferenceSettings | None = None, *,
                  judge: dict[str, Any] | None = None) -> BaseEvaluator:
    """The task's evaluator for a prompt profile (the task's default without one), with the
    options its [grader] section sets; a judge-graded task also gets the run's judge."""
    spec = task.grading_spec(settings)
    if task.evaluator == "pairwise_judge":
        return pairwise_evaluator(task, spec, judge)
    if task.evaluator == "humaneval":
        grader, chosen = task.grader, settings or task.inference
        timeout_s = chosen.sandbox_timeout_s if chosen.sandbox_timeout_s is not None else grader.sandbox_timeout_s
        return HumanEvalEvaluator(spec, timeout_s=float(timeout_s), memory_mb=grader.sandbox_memory_mb,
                                  mode=grader.sandbox_mode)
    return get_evaluator(task.evaluator, spec)


def pairwise_evaluator(task: Task, spec: dict[str, Any], judge: dict[str, Any] | None) -> BaseEvaluator:
    """The judge evaluator with the task's templates, its [judge] defaults under the run's
    settings, and the judgement cache and LC data beside the task's prepared data."""
    if not judge:
        raise JudgeError(f"task {task.name} is graded by a judge, and this run names none: start it with "
                         "--judge-url URL --judge-model NAME [--judge-key-env VAR]")
    section = task.judge or JudgeSection()
    settings = JudgeSettings.for_task(section, judge)
    templates = {mode: (task.folder / name).read_text(encoding="utf-8")
                 for mode in JUDGE_MODES if (name := section.template(mode))}
    if settings.mode not in templates:
        raise JudgeError(f"task {task.name} has no [judge] {settings.mode}_template")
    cache = task_cache(task)
    return PairwiseJudgeEvaluator(spec, judge=settings, templates=templates,
                                  cache_path=cache / "judge-cache.sqlite", hub_cache=cache / "hub")


__all__ = ["EVALUATORS", "BaseEvaluator", "ItemResult", "evaluator_for", "get_evaluator"]
