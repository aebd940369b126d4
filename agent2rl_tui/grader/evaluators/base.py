"""The evaluator interface: prompts from items, verdicts from outputs."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from agent2rl_tui.core.tasks import InferenceSettings

Messages = list[dict[str, str]]


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


class Evaluator(Protocol):
    name: str

    def messages(self, item: dict[str, Any], settings: InferenceSettings) -> Messages:
        """The chat turns the model is asked, for one item."""
        ...

    def judge(self, index: int, item: dict[str, Any], prompt: str, output: str) -> ItemResult:
        ...

    def score(self, results: list[ItemResult]) -> float:
        """0-100."""
        ...
