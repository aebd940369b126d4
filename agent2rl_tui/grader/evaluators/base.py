"""The evaluator interface: prompts from items, verdicts from outputs, a 0-100 score.

An evaluator never touches a model: the eval worker renders its prompts, generates with an
engine and hands the outputs back for judging, so evaluators are tested on plain strings.
``BaseEvaluator`` does what most tasks need (template prompts, optional few-shot examples in
chat or completion form, accuracy); a task overrides ``judge`` or ``judge_all``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from agent2rl_tui.tasks.registry import InferenceSettings

Messages = list[dict[str, str]]
Prompt = Messages | str  # chat turns, or a plain completion prompt


@dataclass
class ItemResult:
    """One eval item's outcome, as kept in evals/<n>/results.jsonl."""

    index: int
    prompt: str
    output: str
    extracted: str | None
    gold: str
    correct: bool
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class BaseEvaluator:
    name = "base"

    def prompt(self, item: dict[str, Any], settings: InferenceSettings,
               examples: list[dict[str, Any]] = ()) -> Prompt:  # type: ignore[assignment]
        """The item as the model is asked it, after ``settings.fewshot`` worked examples."""
        question = settings.prompt_template.format(**item)
        shots = [(settings.prompt_template.format(**ex), settings.answer_template.format(**ex)) for ex in examples]
        if settings.chat:
            turns: Messages = [{"role": "system", "content": settings.system_prompt}] if settings.system_prompt else []
            for q, a in shots:
                turns += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
            return turns + [{"role": "user", "content": question}]
        head = settings.system_prompt + "\n\n" if settings.system_prompt else ""
        return head + "".join(f"{q}{a}\n\n" for q, a in shots) + question

    def judge(self, index: int, item: dict[str, Any], prompt: str, output: str) -> ItemResult:
        raise NotImplementedError

    def judge_all(self, items: list[dict[str, Any]], prompts: list[str], outputs: list[str]) -> list[ItemResult]:
        return [self.judge(i, item, p, o) for i, (item, p, o) in enumerate(zip(items, prompts, outputs))]

    def score(self, results: list[ItemResult]) -> float:
        """Accuracy x 100."""
        return 100.0 * sum(r.correct for r in results) / len(results) if results else 0.0
