"""The evaluator interface: prompts from items, verdicts from outputs, a 0-100 score.

An evaluator never touches a model: the eval worker renders its prompts, generates with an
engine and hands the outputs back for judging, so evaluators are tested on plain strings.
``BaseEvaluator`` does what most tasks need (the prompt profile's turns, worked examples
included, in chat or completion form, built by ``tasks.grading_rules`` as the workspace's copy
builds them; accuracy); a task overrides ``judge`` or ``judge_all``.
"""

from __future__ import annotations

from typing import Any

from agent2rl_tui.record.results import ItemRow
from agent2rl_tui.tasks import grading_rules as rules
from agent2rl_tui.tasks.registry import InferenceSettings

Messages = list[dict[str, str]]
Prompt = Messages | str  # chat turns, or a plain completion prompt


ItemResult = ItemRow
"""One eval item's outcome: the record's line of evals/<n>/results.jsonl (``record.results.ItemRow``)."""


class BaseEvaluator:
    name = "base"

    def __init__(self, spec: dict[str, Any] | None = None) -> None:
        self.spec: dict[str, Any] = dict(spec or {**InferenceSettings().to_dict(), "shots": []})
        """The prompt profile as ``Task.grading_spec`` gives it: settings and worked examples."""

    def prompt(self, item: dict[str, Any]) -> Prompt:
        """The item as the model is asked it: chat turns (worked examples first), or plain text."""
        if self.spec.get("chat", True):
            return rules.messages(item, self.spec)
        return rules.completion_prompt(item, self.spec)

    def judge(self, index: int, item: dict[str, Any], prompt: str, output: str) -> ItemResult:
        raise NotImplementedError

    def judge_all(self, items: list[dict[str, Any]], prompts: list[str], outputs: list[str]) -> list[ItemResult]:
        return [self.judge(i, item, p, o) for i, (item, p, o) in enumerate(zip(items, prompts, outputs))]

    def score(self, results: list[ItemResult]) -> float:
        """Accuracy x 100."""
        return 100.0 * sum(r.correct for r in results) / len(results) if results else 0.0

    def details(self, results: list[ItemResult]) -> dict[str, Any]:
        """What the score's record keeps beside it (e.g. a second reading of the answers)."""
        return {}
