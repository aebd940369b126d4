"""The engine interface the eval worker drives: load a checkpoint, generate for chats."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from agent2rl_tui.tasks.grading_rules import render_messages
from agent2rl_tui.tasks.registry import InferenceSettings

Messages = list[dict[str, str]]
TEMPLATE_TIME_LIMIT_S = 10.0
"""One chat's rendering; real templates take milliseconds. Memory is the worker's limit's job."""


class EngineError(RuntimeError):
    """The model could not be loaded or run. The message goes to the record; the agent is told
    only ``code`` (a key of ``grader.failures.ADVICE``)."""

    def __init__(self, message: str, code: str = "model_load_failed") -> None:
        super().__init__(message)
        self.code = code


class TemplateTimeout(Exception):
    """A chat template rendered past ``TEMPLATE_TIME_LIMIT_S``."""


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise ``TemplateTimeout`` in this thread after ``seconds`` (SIGALRM: the main thread only;
    elsewhere the evaluation's own timeout is the limit). Jinja templates compile to Python, so
    the alarm interrupts a template's loops."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expired(signum: int, frame: object) -> None:
        raise TemplateTimeout()

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclass
class PrefillCount:
    """Prompt tokens an engine was given and how many of them it did not compute again (a prefix
    it had cached): what each turn of an episode costs beyond its new tokens."""

    calls: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0

    @property
    def prefilled(self) -> int:
        return self.prompt_tokens - self.cached_tokens


class Engine(Protocol):
    name: str
    prefill: PrefillCount

    def load(self, model_path: Path) -> None:
        """Load weights and tokenizer from a model folder (replacing any loaded model)."""
        ...

    def render(self, messages: Messages, *, require_template: bool = False,
               enable_thinking: bool | None = None) -> str:
        """The prompt text the model sees for one chat (chat template applied, with
        ``enable_thinking`` where it is not None); a model without a template gets the turns'
        contents, one per line, or EngineError with ``require_template``."""
        ...

    def generate(self, prompts: list[str], settings: InferenceSettings,
                 progress: Callable[[int], None] | None = None) -> list[str]:
        """Completions for rendered prompts, in order, stop strings cut off; ``progress(n)`` is told
        as each n more prompts are done (the worker's progress file). A prompt that does not
        fit the context is an EngineError (``check_fit``); a completion ends at the context.
        Greedy at temperature 0; else sampled with ``top_p`` and ``top_k`` (0: no cut), seeded by
        the engine's seed so a rerun draws the same samples where the engine allows."""
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


def render_chat(tokenizer: Any, messages: Messages, require_template: bool,
                time_limit_s: float = TEMPLATE_TIME_LIMIT_S, enable_thinking: bool | None = None) -> str:
    """``messages`` through the tokenizer's chat template (``tasks.grading_rules``, the workspace's
    rules too), within ``time_limit_s``. The template is the base model's (the intake never takes a
    submission's), but it is code all the same: whatever it raises, or a missing template the
    profile requires, is an EngineError with a code, and it never runs unbounded.

    ``enable_thinking`` (not None) goes to the template as OpenCompass's ``chat_template_kwargs``
    pass it (the reference's model table turns Qwen3's thinking on so); None gives it nothing."""
    try:
        with time_limit(time_limit_s):
            text = render_messages(tokenizer, messages, require_template, enable_thinking)
    except TemplateTimeout:
        raise EngineError(f"the chat template took over {time_limit_s:g} s to render a prompt",
                          "chat_template_timeout") from None
    except MemoryError:
        raise EngineError("the chat template asked for more memory than there is", "out_of_memory") from None
    except RecursionError:
        raise EngineError("the chat template recursed too deep", "chat_template_error") from None
    except ValueError as exc:  # no template where the profile needs one, or the template's own ValueError
        raise EngineError(f"{exc}; or start the run with another --prompt-profile", "chat_template_error") from None
    except Exception as exc:  # noqa: BLE001 - jinja errors, or whatever the template raises on purpose
        raise EngineError(f"the chat template failed: {type(exc).__name__}: {exc}", "chat_template_error") from None
    if not isinstance(text, str):
        raise EngineError("the chat template did not render a string", "chat_template_error")
    return text


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
            "max_model_len), or start the run with a --prompt-profile of shorter prompts", "prompt_too_long")
