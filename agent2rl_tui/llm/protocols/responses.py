"""OpenAI Responses (Codex): ``POST /v1/responses``.

Stream (https://platform.openai.com/docs/api-reference/responses-streaming, the official SDK's
``ResponseStreamEvent`` types, and Codex's own parser, which needs ``response.output_item.done``
with the whole item and ``response.completed`` with the response id and usage): named events,
each data carrying its ``type`` and a ``sequence_number``: ``response.created``,
``response.in_progress``, then per output item ``response.output_item.added``, for a message
``response.content_part.added`` / ``response.output_text.delta`` / ``response.output_text.done``
/ ``response.content_part.done``, for a function call ``response.function_call_arguments.delta``
/ ``.done``, for a custom (freeform) tool call ``response.custom_tool_call_input.delta`` /
``.done``, then ``response.output_item.done``; last ``response.completed`` with the whole
response and its usage (``input_tokens`` includes ``input_tokens_details.cached_tokens``).
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
from agent2rl_tui.llm.protocols.chat import openai_error
from agent2rl_tui.llm.sse import encode
from agent2rl_tui.llm.usage import Metered, Usage, as_int

TERMINAL = ("response.completed", "response.incomplete", "response.failed")


def usage_json(u: Usage) -> dict[str, Any]:
    return {"input_tokens": u.input_tokens, "input_tokens_details": {"cached_tokens": u.cached_tokens},
            "output_tokens": u.output_tokens, "output_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
            "total_tokens": u.input_tokens + u.output_tokens}


def read_usage(obj: dict[str, Any]) -> Usage:
    given = as_dict(obj.get("input_tokens_details"))
    made = as_dict(obj.get("output_tokens_details"))
    return Usage(input_tokens=as_int(obj.get("input_tokens")), output_tokens=as_int(obj.get("output_tokens")),
                 cached_tokens=as_int(given.get("cached_tokens")), cache_write_tokens=as_int(given.get("cache_write_tokens")),
                 reasoning_tokens=as_int(made.get("reasoning_tokens")))


class Responses(WireFormat):
    name: ClassVar[str] = "responses"
    usage_keys: ClassVar[tuple[str, ...]] = ("usage", "model")
    output_limit_keys: ClassVar[tuple[str, ...]] = ("max_output_tokens",)

    def match(self, method: str, path: str) -> str | None:
        return GENERATE if method == "POST" and path in ("/v1/responses", "/responses") else None

    def parse(self, endpoint: str, path: str, query: dict[str, str], body: dict[str, Any], size: int) -> LlmRequest:
        given = body.get("input")
        if not isinstance(given, (list, str)):
            raise BadRequest("input: field required")
        texts = [as_str(body.get("instructions"))]
        results = 0
        for item in [given] if isinstance(given, str) else given:
            if isinstance(item, str):
                texts.append(item)
                continue
            item = as_dict(item)
            kind = as_str(item.get("type"), "message")
            if kind.endswith("_call_output"):
                results += 1
            elif kind == "message":
                texts += text_of(item.get("content"))
        tools = []
        for t in as_list(body.get("tools")):
            t = as_dict(t)
            kind = as_str(t.get("type"))
            if kind == "function" and isinstance(t.get("name"), str):
                tools.append(Tool(t["name"], as_dict(t.get("parameters")), "function", as_str(t.get("description"))))
            elif kind == "custom" and isinstance(t.get("name"), str):
                tools.append(Tool(t["name"], {}, "custom", as_str(t.get("description"))))
            texts.append(as_str(t.get("description")))
        fmt = as_dict(as_dict(body.get("text")).get("format"))
        schema: dict[str, Any] | None = None
        if fmt.get("type") == "json_schema":
            schema = as_dict(fmt.get("schema"))
        elif fmt.get("type") == "json_object":
            schema = {}
        return LlmRequest(self.name, endpoint, as_str(body.get("model")), bool(body.get("stream")), tools, results,
                          texts, size, body, messages=[given] if isinstance(given, str) else given, json_schema=schema)

    # -- replies
    def _items(self, reply: Reply, done: bool) -> list[dict[str, Any]]:
        status = "completed" if done else "in_progress"
        base = reply.id.removeprefix("resp_")
        items: list[dict[str, Any]] = []
        if reply.text or reply.tool_call is None:
            items.append({"id": "msg_" + base, "type": "message", "status": status, "role": "assistant",
                          "content": [{"type": "output_text", "text": reply.text, "annotations": [], "logprobs": []}]
                          if done else []})
        c = reply.tool_call
        if c is not None and c.kind == "custom":
            items.append({"id": "ctc_" + base, "type": "custom_tool_call", "status": status, "call_id": c.call_id,
                          "name": c.name, "input": (c.input or "") if done else ""})
        elif c is not None:
            items.append({"id": "fc_" + base, "type": "function_call", "status": status, "call_id": c.call_id,
                          "name": c.name, "arguments": c.arguments_json() if done else ""})
        return items

    def _response(self, request: LlmRequest, reply: Reply, done: bool) -> dict[str, Any]:
        body = request.body
        return {"id": reply.id, "object": "response", "created_at": int(time.time()),
                "status": "completed" if done else "in_progress", "error": None, "incomplete_details": None,
                "instructions": body.get("instructions"), "max_output_tokens": body.get("max_output_tokens"),
                "model": reply.model, "output": self._items(reply, done) if done else [],
                "parallel_tool_calls": bool(body.get("parallel_tool_calls", True)),
                "previous_response_id": body.get("previous_response_id"), "reasoning": body.get("reasoning"),
                "store": bool(body.get("store", False)), "temperature": body.get("temperature"),
                "text": body.get("text") or {"format": {"type": "text"}}, "tool_choice": body.get("tool_choice", "auto"),
                "tools": body.get("tools") or [], "top_p": body.get("top_p"), "truncation": "disabled",
                "usage": usage_json(reply.usage) if done else None, "metadata": {}}

    def reply_json(self, request: LlmRequest, reply: Reply) -> dict[str, Any]:
        return self._response(request, reply, done=True)

    def reply_events(self, request: LlmRequest, reply: Reply) -> Iterator[bytes]:
        seq = iter(range(1 << 30))

        def ev(kind: str, **fields: Any) -> bytes:
            return encode({"type": kind, "sequence_number": next(seq), **fields}, kind)

        yield ev("response.created", response=self._response(request, reply, done=False))
        yield ev("response.in_progress", response=self._response(request, reply, done=False))
        started, finished = self._items(reply, done=False), self._items(reply, done=True)
        for index, (item, whole) in enumerate(zip(started, finished, strict=True)):
            yield ev("response.output_item.added", output_index=index, item=item)
            ids = {"item_id": item["id"], "output_index": index}
            if item["type"] == "message":
                text = reply.text
                yield ev("response.content_part.added", **ids, content_index=0,
                         part={"type": "output_text", "text": "", "annotations": [], "logprobs": []})
                for piece in pieces(text, 24):
                    if piece:
                        yield ev("response.output_text.delta", **ids, content_index=0, delta=piece, logprobs=[])
                yield ev("response.output_text.done", **ids, content_index=0, text=text, logprobs=[])
                yield ev("response.content_part.done", **ids, content_index=0,
                         part={"type": "output_text", "text": text, "annotations": [], "logprobs": []})
            elif item["type"] == "function_call":
                args = whole["arguments"]
                for piece in pieces(args, 32):
                    yield ev("response.function_call_arguments.delta", **ids, delta=piece)
                yield ev("response.function_call_arguments.done", **ids, arguments=args)
            else:
                given = whole["input"]
                for piece in pieces(given, 32):
                    yield ev("response.custom_tool_call_input.delta", **ids, delta=piece)
                yield ev("response.custom_tool_call_input.done", **ids, input=given)
            yield ev("response.output_item.done", output_index=index, item=whole)
        yield ev("response.completed", response=self._response(request, reply, done=True))

    def count_tokens_json(self, request: LlmRequest, tokens: int) -> dict[str, Any]:
        return {"object": "response.input_tokens", "input_tokens": tokens}

    def error_json(self, status: int, message: str) -> dict[str, Any]:
        return openai_error(status, message)

    def read_object(self, event: str | None, obj: dict[str, Any], metered: Metered) -> None:
        kind = event if obj.get("__caught__") else as_str(obj.get("type"), event or "")
        response = obj if event is None or obj.get("__caught__") else as_dict(obj.get("response"))
        if isinstance(response.get("model"), str) and response["model"]:
            metered.model = response["model"]
        if isinstance(response.get("usage"), dict):
            metered.usage = read_usage(response["usage"])
        if kind in TERMINAL or event is None:
            metered.complete = True
        if kind in ("error", "response.failed"):
            err = as_dict(obj.get("error") or response.get("error"))
            metered.errors.append(as_str(err.get("message"), kind))
