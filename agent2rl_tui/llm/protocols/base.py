"""What the four wire formats have in common: a request read into one shape, a reply to frame,
and the interface each format implements (`WireFormat`).

The scripted driver builds a `Reply` from an `LlmRequest` without knowing the format; each
format reads its own JSON into `LlmRequest` and frames a `Reply` the way its real API does.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from agent2rl_tui.llm.usage import Metered, Usage, UsageReader

GENERATE = "generate"
COUNT_TOKENS = "count_tokens"


@dataclass(frozen=True)
class Tool:
    """A tool a request offers: its name, its parameters' JSON schema, and its kind
    (``function``; ``custom`` for OpenAI's freeform tools, which take one string)."""

    name: str
    schema: dict[str, Any] = field(default_factory=dict)
    kind: str = "function"
    description: str = ""

    @property
    def properties(self) -> dict[str, Any]:
        props = self.schema.get("properties")
        return props if isinstance(props, dict) else {}

    @property
    def required(self) -> list[str]:
        req = self.schema.get("required")
        return [r for r in req if isinstance(r, str)] if isinstance(req, list) else []


@dataclass
class ToolCall:
    """One call of a tool in a reply: JSON ``arguments`` for a function tool, the ``input``
    string for a custom tool."""

    name: str
    call_id: str
    arguments: dict[str, Any] | None = None
    input: str | None = None
    kind: str = "function"

    def arguments_json(self) -> str:
        return json.dumps(self.arguments or {}, ensure_ascii=False)

    def payload(self) -> str:
        """What the model generated for this call, as text (for counting output tokens)."""
        return self.input if self.kind == "custom" and self.input is not None else self.arguments_json()


@dataclass
class LlmRequest:
    """A request as any format reads it.

    ``messages``: the conversation as the format has it (Anthropic and Chat ``messages``,
    Responses ``input`` items, Gemini ``contents``). ``tool_results``: how many tool results it
    already holds (the scripted driver's position). ``texts``: the system prompt, the messages' text and the tools'
    descriptions, in order (where a CLI states its working folder). ``json_schema``: set when
    the request asks for a JSON reply (``{}``: any object). ``size``: the body's bytes."""

    protocol: str
    endpoint: str
    model: str
    stream: bool
    tools: list[Tool]
    tool_results: int
    texts: list[str]
    size: int
    body: dict[str, Any]
    messages: list[Any] = field(default_factory=list)
    json_schema: dict[str, Any] | None = None
    stream_usage: bool = True  # Chat Completions reports usage in a stream only when asked
    sse: bool = True  # Gemini's streamGenerateContent without alt=sse answers a JSON array


@dataclass
class Reply:
    """What to answer: text and/or one tool call, its usage, and the ids it carries."""

    model: str
    id: str
    usage: Usage
    text: str = ""
    tool_call: ToolCall | None = None


class BadRequest(ValueError):
    """The body is not a request of this format (answered 400 in the format's error shape)."""


class WireFormat:
    """One driver API. Subclasses set ``name`` and ``usage_keys`` and implement the rest."""

    name: ClassVar[str]
    # Keys a bounded reader watches in replies too large to parse: usage and model.
    usage_keys: ClassVar[tuple[str, ...]]

    def match(self, method: str, path: str) -> str | None:
        """The endpoint (`GENERATE`, `COUNT_TOKENS`) that ``method path`` (no query) names, or None."""
        raise NotImplementedError

    def parse(self, endpoint: str, path: str, query: dict[str, str], body: dict[str, Any], size: int) -> LlmRequest:
        raise NotImplementedError

    def reply_json(self, request: LlmRequest, reply: Reply) -> Any:
        """The whole reply as the API answers a non-streaming request."""
        raise NotImplementedError

    def reply_events(self, request: LlmRequest, reply: Reply) -> Iterator[bytes]:
        """The reply as the API streams it: SSE events, each one ``bytes`` ready to send."""
        raise NotImplementedError

    def count_tokens_json(self, request: LlmRequest, tokens: int) -> dict[str, Any]:
        raise NotImplementedError

    def ask_for_usage(self, body: dict[str, Any]) -> bool:
        """Change a request ``body`` so that its reply reports usage; True when it changed. Only
        Chat Completions streams leave usage out unless asked."""
        return False

    def error_json(self, status: int, message: str) -> dict[str, Any]:
        raise NotImplementedError

    output_limit_keys: ClassVar[tuple[str, ...]] = ()
    """The request fields that bound a reply's output tokens, in the order the API reads them."""

    def max_output(self, body: dict[str, Any]) -> int | None:
        """The most output tokens a generation request asks for, None when it sets no bound (the
        meter then reserves all the room left under a cap)."""
        return first_count(body, self.output_limit_keys)

    def read_object(self, event: str | None, obj: dict[str, Any], metered: Metered) -> None:
        """Read one SSE event's data (``event``: its name) or a whole JSON reply (``event`` None)
        into ``metered``. An object a bounded reader caught holds only ``usage_keys`` and
        ``__caught__``."""
        raise NotImplementedError

    def usage_reader(self, streaming: bool) -> UsageReader:
        """A reader for one reply: ``streaming`` when its Content-Type is text/event-stream."""
        return UsageReader(self.read_object, streaming, self.usage_keys)


def text_of(content: Any) -> list[str]:
    """The text in a message's content: a string, or a list of parts with ``text``."""
    if isinstance(content, str):
        return [content]
    out: list[str] = []
    if isinstance(content, list):
        for part in content:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                out.append(part["text"])
    return out


def pieces(text: str, size: int) -> list[str]:
    """``text`` cut into deltas of ``size`` characters (at least one, possibly empty)."""
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def as_str(value: Any, default: str = "") -> str:
    return value if isinstance(value, str) else default


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def first_count(obj: dict[str, Any], keys: tuple[str, ...]) -> int | None:
    """The first of ``keys`` in ``obj`` that holds a whole number of at least 0."""
    for key in keys:
        value = obj.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None
