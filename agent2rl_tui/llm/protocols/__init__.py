"""The four driver APIs in one place: which format a request speaks, how to read it, how to
answer it, and how to read the usage of a real API's reply as it passes.

    route = recognise("POST", "/v1/messages?beta=true")      # Route(fmt=Anthropic, endpoint="generate")
    request = route.fmt.parse(route.endpoint, route.path, route.query, body, len(raw))
    reader = usage_reader("anthropic", "text/event-stream")   # feed(bytes) ... close() -> Metered

One port serves all four: the path decides (``/v1/messages`` Anthropic, ``/v1/responses``
Responses, ``/v1/chat/completions`` Chat Completions, ``/v1beta/models/{m}:…`` Gemini), so a
base URL is ``http://host:port`` for Claude Code and Gemini CLI and ``http://host:port/v1`` for
the OpenAI clients. Each module cites what its framing follows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlsplit

from agent2rl_tui.llm.protocols.anthropic import Anthropic
from agent2rl_tui.llm.protocols.base import (
    COUNT_TOKENS,
    GENERATE,
    BadRequest,
    LlmRequest,
    Reply,
    Tool,
    ToolCall,
    WireFormat,
)
from agent2rl_tui.llm.protocols.chat import ChatCompletions
from agent2rl_tui.llm.protocols.gemini import Gemini
from agent2rl_tui.llm.protocols.responses import Responses
from agent2rl_tui.llm.usage import Metered, Usage, UsageReader

__all__ = ["COUNT_TOKENS", "GENERATE", "PROTOCOLS", "BadRequest", "LlmRequest", "Metered", "Reply", "Route", "Tool",
           "ToolCall", "Usage", "UsageReader", "WireFormat", "error_format", "recognise", "usage_reader"]

PROTOCOLS: dict[str, WireFormat] = {f.name: f for f in (Anthropic(), Responses(), ChatCompletions(), Gemini())}


@dataclass(frozen=True)
class Route:
    fmt: WireFormat
    endpoint: str
    path: str
    query: dict[str, str] = field(default_factory=dict)


def split(target: str) -> tuple[str, dict[str, str]]:
    """A request target's path (without a trailing slash) and its query."""
    parts = urlsplit(target)
    path = parts.path.rstrip("/") or "/"
    return path, dict(parse_qsl(parts.query))


def recognise(method: str, target: str) -> Route | None:
    """The format and endpoint of ``method target`` (target as on the request line, query
    included), or None when no driver API has that endpoint."""
    path, query = split(target)
    for fmt in PROTOCOLS.values():
        endpoint = fmt.match(method.upper(), path)
        if endpoint is not None:
            return Route(fmt, endpoint, path, query)
    return None


def error_format(target: str, headers: dict[str, str] | None = None) -> WireFormat:
    """The format whose error shape suits a request no endpoint took: Anthropic's when the path
    or headers are Anthropic's, Gemini's for ``/v1beta`` or a Google key, OpenAI's otherwise."""
    path, query = split(target)
    low = {k.lower(): v for k, v in (headers or {}).items()}
    if "anthropic-version" in low or path.startswith(("/v1/messages", "/messages")):
        return PROTOCOLS["anthropic"]
    if path.startswith(("/v1beta", "/v1alpha")) or "x-goog-api-key" in low or ":" in path or "key" in query:
        return PROTOCOLS["gemini"]
    return PROTOCOLS["chat"]


def usage_reader(protocol: str, content_type: str | None) -> UsageReader:
    """A reader for one reply of ``protocol`` (a `PROTOCOLS` key), streaming when the reply's
    Content-Type is ``text/event-stream``."""
    streaming = (content_type or "").split(";")[0].strip().lower() == "text/event-stream"
    return PROTOCOLS[protocol].usage_reader(streaming)
