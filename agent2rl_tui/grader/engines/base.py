"""The engine interface the eval worker drives: load a checkpoint, generate for chats."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from agent2rl_tui.tasks.grading_rules import render_messages
from agent2rl_tui.tasks.registry import InferenceSettings

Messages = list[dict[str, str]]


class EngineError(RuntimeError):
    """The model could not be loaded or run; the message is shown to the agent."""


class Engine(Protocol):
    name: str

    def load(self, model_path: Path) -> None:
        """Load weights and tokenizer from a model folder (replacing any loaded model)."""
        ...

    def render(self, messages: Messages, *, require_template: bool = False) -> str:
        """The prompt text the model sees for one chat (chat template applied); a model without a
        template gets the turns' contents, one per line, or EngineError with ``require_template``."""
        ...

    def generate(self, prompts: list[str], settings: InferenceSettings) -> list[str]:
        """Completions for rendered prompts, in order, stop strings cut off. A prompt that does not
        fit the context is an EngineError (``check_fit``); a completion ends at the context."""
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


def render_chat(tokenizer: Any, messages: Messages, require_template: bool) -> str:
    """``messages`` through the tokenizer's chat template (``tasks.grading_rules``, the workspace's
    rules too); a missing template the profile requires is an EngineError."""
    try:
        return render_messages(tokenizer, messages, require_template)
    except ValueError as exc:
        raise EngineError(f"{exc}; or start the run with another --prompt-profile") from None


def check_fit(lengths: list[int], limit: int | None, settings: InferenceSettings) -> None:
    """Every prompt leaves room for at least one new token in the context, or EngineError: a
    prompt is never truncated to fit (vLLM refuses such a prompt too)."""
    if not limit:
        return
    too_long = [n for n in lengths if n >= limit]
    if too_long:
        raise EngineError(
            f"{len(too_long)} of {len(lengths)} prompts do not fit the model's context of {limit} tokens (the "
            f"longest is {max(too_long)} tokens; prompt profile {settings.prompt_profile!r}); nothing was "
            "truncated. Use a model with a longer context (its max_position_embeddings, and the engine's "
            "max_model_len), or start the run with a --prompt-profile of shorter prompts")
