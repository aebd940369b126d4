"""Anthropic Messages (Claude Code): ``POST /v1/messages`` and ``/v1/messages/count_tokens``.

Stream (https://docs.anthropic.com/en/api/messages-streaming, and the official SDKs' event
types): ``message_start`` (the message with empty content and the usage known at the start:
input and cache counts, output 1), ``ping``, then per content block ``content_block_start`` /
``content_block_delta`` (``text_delta``, or ``input_json_delta`` with ``partial_json`` for a
tool_use block) / ``content_block_stop``, then ``message_delta`` (stop_reason, cumulative
usage) and ``message_stop``. ``input_tokens`` counts only the uncached prompt: the prompt is
``input_tokens + cache_creation_input_tokens + cache_read_input_tokens``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, ClassVar

from agent2rl_tui.llm.protocols.base import (
    COUNT_TOKENS,
    GENERATE,
    BadRequest,
    LlmRequest,
    Reply,
    Tool,
    WireFormat,
    as_dict,
    as_list,
    as_str,
    pieces,
    text_of,
)
from agent2rl_tui.llm.sse import encode
from agent2rl_tui.llm.usage import Metered, Usage, as_int

ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
               500: "api_error", 529: "overloaded_error"}


def usage_json(u: Usage) -> dict[str, int]:
    return {"input_tokens": u.input_tokens - u.cached_tokens - u.cache_write_tokens,
            "cache_creation_input_tokens": u.cache_write_tokens,
            "cache_read_input_tokens": u.cached_tokens,
            "output_tokens": u.output_tokens}


def read_usage(obj: dict[str, Any], into: Usage) -> None:
    """Fields present in an Anthropic usage object, over what was read before (message_delta's
    counts are cumulative and replace message_start's)."""
    old_fresh = into.input_tokens - into.cached_tokens - into.cache_write_tokens
    if obj.get("cache_creation_input_tokens") is not None:
        into.cache_write_tokens = as_int(obj["cache_creation_input_tokens"])
    if obj.get("cache_read_input_tokens") is not None:
        into.cached_tokens = as_int(obj["cache_read_input_tokens"])
    fresh = as_int(obj["input_tokens"]) if obj.get("input_tokens") is not None else old_fresh
    into.input_tokens = fresh + into.cache_write_tokens + into.cached_tokens
    if "output_tokens" in obj:
        into.output_tokens = as_int(obj["output_tokens"])
    details = as_dict(obj.get("output_tokens_details"))
    if "reasoning_tokens" in details:
        into.reasoning_tokens = as_int(details["reasoning_tokens"])


class Anthropic(WireFormat):
    name: ClassVar[str] = "anthropic"
    usage_keys: ClassVar[tuple[str, ...]] = ("usage", "model")
    output_limit_keys: ClassVar[tuple[str, ...]] = ("max_tokens",)  # thinking included

    def match(self, method: str, path: str) -> str | None:
        if method != "POST":
            return None
        if path in ("/v1/messages", "/messages"):
            return GENERATE
        if path in ("/v1/messages/count_tokens", "/messages/count_tokens"):
            return COUNT_TOKENS
        return None

    def parse(self, endpoint: str, path: str, query: dict[str, str], body: dict[str, Any], size: int) -> LlmRequest:
        messages = body.get("messages")
        if not isinstance(messages, list):
            raise BadRequest("messages: field required")
        texts = text_of(body.get("system"))
        results = 0
        for m in messages:
            content = as_dict(m).get("content")
            texts += text_of(content)
            for block in as_list(content):
                if as_dict(block).get("type") == "tool_result":
                    results += 1
                    texts += text_of(as_dict(block).get("content"))
        tools = []
        for t in as_list(body.get("tools")):
            t = as_dict(t)
            if isinstance(t.get("name"), str):
                tools.append(Tool(t["name"], as_dict(t.get("input_schema")), "function", as_str(t.get("description"))))
                texts.append(as_str(t.get("description")))
        fmt = as_dict(body.get("output_format")) or as_dict(as_dict(body.get("output_config")).get("format"))
        schema = as_dict(fmt.get("schema")) if fmt.get("type") == "json_schema" else None
        return LlmRequest(self.name, endpoint, as_str(body.get("model")), bool(body.get("stream")), tools, results,
                          texts, size, body, messages=messages, json_schema=schema)

    def _content(self, reply: Reply) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        if reply.text or reply.tool_call is None:
            blocks.append({"type": "text", "text": reply.text})
        if reply.tool_call is not None:
            c = reply.tool_call
            blocks.append({"type": "tool_use", "id": c.call_id, "name": c.name, "input": c.arguments or {}})
        return blocks

    def _stop(self, reply: Reply) -> str:
        return "tool_use" if reply.tool_call is not None else "end_turn"

    def reply_json(self, request: LlmRequest, reply: Reply) -> dict[str, Any]:
        return {"id": reply.id, "type": "message", "role": "assistant", "model": reply.model,
                "content": self._content(reply), "stop_reason": self._stop(reply), "stop_sequence": None,
                "usage": usage_json(reply.usage)}

    def reply_events(self, request: LlmRequest, reply: Reply) -> Iterator[bytes]:
        start_usage = {**usage_json(reply.usage), "output_tokens": 1}
        yield encode({"type": "message_start", "message": {
            "id": reply.id, "type": "message", "role": "assistant", "model": reply.model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": start_usage}}, "message_start")
        yield encode({"type": "ping"}, "ping")
        for index, block in enumerate(self._content(reply)):
            if block["type"] == "text":
                yield encode({"type": "content_block_start", "index": index,
                              "content_block": {"type": "text", "text": ""}}, "content_block_start")
                for piece in pieces(block["text"], 24):
                    yield encode({"type": "content_block_delta", "index": index,
                                  "delta": {"type": "text_delta", "text": piece}}, "content_block_delta")
            else:
                yield encode({"type": "content_block_start", "index": index, "content_block": {
                    "type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}}, "content_block_start")
                args = json.dumps(block["input"], ensure_ascii=False)
                for piece in [""] + pieces(args, 32):
                    yield encode({"type": "content_block_delta", "index": index,
                                  "delta": {"type": "input_json_delta", "partial_json": piece}}, "content_block_delta")
            yield encode({"type": "content_block_stop", "index": index}, "content_block_stop")
        yield encode({"type": "message_delta", "delta": {"stop_reason": self._stop(reply), "stop_sequence": None},
                      "usage": usage_json(reply.usage)}, "message_delta")
        yield encode({"type": "message_stop"}, "message_stop")

    def count_tokens_json(self, request: LlmRequest, tokens: int) -> dict[str, Any]:
        return {"input_tokens": tokens}

    def error_json(self, status: int, message: str) -> dict[str, Any]:
        return {"type": "error", "error": {"type": ERROR_TYPES.get(status, "api_error"), "message": message}}

    def read_object(self, event: str | None, obj: dict[str, Any], metered: Metered) -> None:
        kind = obj.get("type", event)
        if obj.get("__caught__"):
            # Only the watched keys of an oversized object: take what they say.
            if isinstance(obj.get("model"), str):
                metered.model = obj["model"]
            if isinstance(obj.get("usage"), dict):
                read_usage(obj["usage"], metered.usage or _new(metered))
            if kind == "message_stop" or event is None:
                metered.complete = True
            return
        if kind == "message_start":
            message = as_dict(obj.get("message"))
            metered.model = as_str(message.get("model")) or metered.model
            read_usage(as_dict(message.get("usage")), _new(metered))
        elif kind == "message_delta":
            read_usage(as_dict(obj.get("usage")), metered.usage or _new(metered))
        elif kind == "message_stop":
            metered.complete = True
        elif kind == "error":
            metered.errors.append(as_str(as_dict(obj.get("error")).get("message"), "error"))
        elif event is None and kind == "message":
            metered.model = as_str(obj.get("model")) or metered.model
            read_usage(as_dict(obj.get("usage")), _new(metered))
            metered.complete = True


def _new(metered: Metered) -> Usage:
    metered.usage = Usage()
    return metered.usage
