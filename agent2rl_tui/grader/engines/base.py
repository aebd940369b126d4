"""The engine interface the eval worker drives: load a checkpoint, generate for chats."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from agent2rl_tui.tasks.registry import InferenceSettings

Messages = list[dict[str, str]]


class EngineError(RuntimeError):
    """The model could not be loaded or run; the message is shown to the agent."""


class Engine(Protocol):
    name: str

    def load(self, model_path: Path) -> None:
        """Load weights and tokenizer from a model folder (replacing any loaded model)."""
        ...

    def render(self, messages: Messages) -> str:
        """The prompt text the model sees for one chat (chat template applied)."""
        ...

    def generate(self, prompts: list[str], settings: InferenceSettings) -> list[str]:
        """Completions for rendered prompts, in order, stop strings cut off."""
        ...

    def context_limit(self) -> int | None:
        """Tokens a prompt and its completion may take together (None: unknown)."""
        ...

    def close(self) -> None:
        ...


def cut_at_stop(text: str, stops: tuple[str, ...]) -> str:
    """Truncate at the first stop string, as vLLM does (the stop string is not kept)."""
    cut = len(text)
    for stop in stops:
        i = text.find(stop)
        if i != -1:
            cut = min(cut, i)
    return text[:cut]
