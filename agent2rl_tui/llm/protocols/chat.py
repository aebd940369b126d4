"""OpenAI Chat Completions (OpenCode through @ai-sdk/openai-compatible, OpenHands through
LiteLLM): ``POST /v1/chat/completions``.

Stream (https://platform.openai.com/docs/api-reference/chat-streaming, and the official SDK's
``ChatCompletionChunk``): ``data:`` lines without event names, each a ``chat.completion.chunk``;
the first delta carries the role, a tool call arrives as ``delta.tool_calls[{index, id, type,
function{name, arguments}}]`` followed by argument fragments under the same index, the last
choice chunk carries ``finish_reason``; with ``stream_options.include_usage`` every chunk has
``usage: null`` and one more chunk with empty ``choices`` carries the usage; ``data: [DONE]``
ends the stream. Without ``include_usage`` a stream reports no usage at all.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any, ClassVar

from agent2rl_tui.llm.protocols.base import (
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

ERROR_CODES = {400: ("invalid_request_error", None), 401: ("invalid_request_error", "invalid_api_key"),
               404: ("invalid_request_error", "not_found"), 429: ("rate_limit_exceeded", "rate_limit_exceeded"),
               500: ("server_error", None)}


def openai_error(status: int, message: str) -> dict[str, Any]:
    """The error body of OpenAI's APIs (Chat Completions and Responses alike)."""
    kind, code = ERROR_CODES.get(status, ("server_error", None))
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def usage_json(u: Usage) -> dict[str, Any]:
    return {"prompt_tokens": u.input_tokens, "completion_tokens": u.output_tokens,
            "total_tokens": u.input_tokens + u.output_tokens,
            "prompt_tokens_details": {"cached_tokens": u.cached_tokens, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": u.reasoning_tokens, "audio_tokens": 0,
                                          "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}}


def read_usage(obj: dict[str, Any]) -> Usage:
    prompt = as_dict(obj.get("prompt_tokens_details"))
    completion = as_dict(obj.get("completion_tokens_details"))
    return Usage(input_tokens=as_int(obj.get("prompt_tokens")), output_tokens=as_int(obj.get("completion_tokens")),
                 cached_tokens=as_int(prompt.get("cached_tokens")),
                 cache_write_tokens=as_int(prompt.get("cache_write_tokens")),
                 reasoning_tokens=as_int(completion.get("reasoning_tokens")))


class ChatCompletions(WireFormat):
    name: ClassVar[str] = "chat"
    usage_keys: ClassVar[tuple[str, ...]] = ("usage", "model")
    output_limit_keys: ClassVar[tuple[str, ...]] = ("max_completion_tokens", "max_tokens")

    def match(self, method: str, path: str) -> str | None:
        return GENERATE if method == "POST" and path in ("/v1/chat/completions", "/chat/completions") else None

    def parse(self, endpoint: str, path: str, query: dict[str, str], body: dict[str, Any], size: int) -> LlmRequest:
        messages = body.get("messages")
        if not isinstance(messages, list):
            raise BadRequest("messages: field required")
        texts: list[str] = []
        results = 0
        for m in messages:
            m = as_dict(m)
            texts += text_of(m.get("content"))
            if m.get("role") in ("tool", "function"):
                results += 1
        tools = []
        for t in as_list(body.get("tools")):
            fn = as_dict(as_dict(t).get("function"))
            if isinstance(fn.get("name"), str):
                tools.append(Tool(fn["name"], as_dict(fn.get("parameters")), "function", as_str(fn.get("description"))))
                texts.append(as_str(fn.get("description")))
        for fn in as_list(body.get("functions")):  # the older form of tools
            fn = as_dict(fn)
            if isinstance(fn.get("name"), str):
                tools.append(Tool(fn["name"], as_dict(fn.get("parameters")), "function", as_str(fn.get("description"))))
        fmt = as_dict(body.get("response_format"))
        schema: dict[str, Any] | None = None
        if fmt.get("type") == "json_schema":
            schema = as_dict(as_dict(fmt.get("json_schema")).get("schema"))
        elif fmt.get("type") == "json_object":
            schema = {}
        stream_usage = bool(as_dict(body.get("stream_options")).get("include_usage"))
        return LlmRequest(self.name, endpoint, as_str(body.get("model")), bool(body.get("stream")), tools, results,
                          texts, size, body, messages=messages, json_schema=schema, stream_usage=stream_usage)

    def _finish(self, reply: Reply) -> str:
        return "tool_calls" if reply.tool_call is not None else "stop"

    def reply_json(self, request: LlmRequest, reply: Reply) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text if (reply.text or not reply.tool_call) else None,
                                   "refusal": None}
        if reply.tool_call is not None:
            c = reply.tool_call
            message["tool_calls"] = [{"id": c.call_id, "type": "function",
                                      "function": {"name": c.name, "arguments": c.arguments_json()}}]
        return {"id": reply.id, "object": "chat.completion", "created": int(time.time()), "model": reply.model,
                "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": self._finish(reply)}],
                "usage": usage_json(reply.usage), "system_fingerprint": None}

    def reply_events(self, request: LlmRequest, reply: Reply) -> Iterator[bytes]:
        created = int(time.time())
        extra = {"usage": None} if request.stream_usage else {}

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            return encode({"id": reply.id, "object": "chat.completion.chunk", "created": created, "model": reply.model,
                           "system_fingerprint": None,
                           "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}], **extra})

        yield chunk({"role": "assistant", "content": "", "refusal": None})
        if reply.text:
            for piece in pieces(reply.text, 24):
                yield chunk({"content": piece})
        if reply.tool_call is not None:
            c = reply.tool_call
            yield chunk({"tool_calls": [{"index": 0, "id": c.call_id, "type": "function",
                                         "function": {"name": c.name, "arguments": ""}}]})
            for piece in pieces(c.arguments_json(), 32):
                yield chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
        yield chunk({}, self._finish(reply))
        if request.stream_usage:
            yield encode({"id": reply.id, "object": "chat.completion.chunk", "created": created, "model": reply.model,
                          "system_fingerprint": None, "choices": [], "usage": usage_json(reply.usage)})
        yield encode("[DONE]")

    def count_tokens_json(self, request: LlmRequest, tokens: int) -> dict[str, Any]:
        return {"input_tokens": tokens}

    def ask_for_usage(self, body: dict[str, Any]) -> bool:
        """A streaming request without ``stream_options.include_usage`` gets it: the reply then
        ends with one more chunk (``choices: []``, the usage), which OpenAI's clients expect."""
        if not body.get("stream"):
            return False
        options = body.get("stream_options")
        if isinstance(options, dict) and options.get("include_usage"):
            return False
        body["stream_options"] = {**(options if isinstance(options, dict) else {}), "include_usage": True}
        return True

    def error_json(self, status: int, message: str) -> dict[str, Any]:
        return openai_error(status, message)

    def read_object(self, event: str | None, obj: dict[str, Any], metered: Metered) -> None:
        if isinstance(obj.get("model"), str) and obj["model"]:
            metered.model = obj["model"]
        if isinstance(obj.get("usage"), dict):
            metered.usage = read_usage(obj["usage"])
        if "error" in obj and isinstance(obj["error"], dict):
            metered.errors.append(as_str(obj["error"].get("message"), "error"))
        if event is None and self._is_body(obj):
            metered.complete = True

    @staticmethod
    def _is_body(obj: dict[str, Any]) -> bool:
        return obj.get("__caught__") is True or obj.get("object") == "chat.completion"
