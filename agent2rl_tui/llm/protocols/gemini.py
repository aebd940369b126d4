"""The Gemini API (Gemini CLI, through @google/genai): ``POST /v1beta/models/{model}:generateContent``,
``:streamGenerateContent?alt=sse`` and ``:countTokens``.

Stream (https://ai.google.dev/api/generate-content, and the google-genai SDKs): no event
names, each ``data:`` line a whole ``GenerateContentResponse`` (``candidates[].content.parts``
with ``text`` or a whole ``functionCall{name, args}``, ``finishReason`` on the last,
``usageMetadata`` on every chunk and complete on the last, ``modelVersion``, ``responseId``),
lines ending in CRLF. Without ``alt=sse`` the same responses come as one JSON array.
``promptTokenCount`` includes ``cachedContentTokenCount``; thinking is counted apart in
``thoughtsTokenCount`` and tool-use prompts in ``toolUsePromptTokenCount``.
"""

from __future__ import annotations

import re
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
    first_count,
    pieces,
    text_of,
)
from agent2rl_tui.llm.sse import encode
from agent2rl_tui.llm.usage import Metered, Usage, as_int

PATH = re.compile(r"^/(?:v1beta|v1|v1alpha)/models/([^/:]+):(streamGenerateContent|generateContent|countTokens)$")
STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
          429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}


def usage_json(u: Usage, final: bool = True) -> dict[str, Any]:
    if not final:  # what the API reports before the last chunk: the prompt only
        return {"promptTokenCount": u.input_tokens, "totalTokenCount": u.input_tokens}
    out: dict[str, Any] = {"promptTokenCount": u.input_tokens, "candidatesTokenCount": u.output_tokens - u.reasoning_tokens,
                           "totalTokenCount": u.input_tokens + u.output_tokens,
                           "promptTokensDetails": [{"modality": "TEXT", "tokenCount": u.input_tokens}]}
    if u.cached_tokens:
        out["cachedContentTokenCount"] = u.cached_tokens
    if u.reasoning_tokens:
        out["thoughtsTokenCount"] = u.reasoning_tokens
    return out


def read_usage(obj: dict[str, Any]) -> Usage:
    thoughts = as_int(obj.get("thoughtsTokenCount"))
    return Usage(input_tokens=as_int(obj.get("promptTokenCount")) + as_int(obj.get("toolUsePromptTokenCount")),
                 output_tokens=as_int(obj.get("candidatesTokenCount")) + thoughts,
                 cached_tokens=as_int(obj.get("cachedContentTokenCount")), reasoning_tokens=thoughts)


def field(obj: dict[str, Any], name: str) -> Any:
    """A field by its JSON name or its proto name: the API takes both (``functionDeclarations``
    or ``function_declarations``; the Python SDK sends some in snake case)."""
    if name in obj:
        return obj[name]
    return obj.get(re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), name))


def model_of(path: str) -> str:
    m = PATH.match(path)
    return m.group(1) if m else ""


class Gemini(WireFormat):
    name: ClassVar[str] = "gemini"
    usage_keys: ClassVar[tuple[str, ...]] = ("usageMetadata", "modelVersion", "finishReason")

    def max_output(self, body: dict[str, Any]) -> int | None:
        """``generationConfig.maxOutputTokens``, and a thinking budget beside it (counted as output)."""
        config = as_dict(field(body, "generationConfig"))
        most = first_count(config, ("maxOutputTokens", "max_output_tokens"))
        if most is None:
            return None
        thinking = first_count(as_dict(field(config, "thinkingConfig")), ("thinkingBudget", "thinking_budget"))
        return most + (thinking or 0)

    def match(self, method: str, path: str) -> str | None:
        m = PATH.match(path)
        if method != "POST" or m is None:
            return None
        return COUNT_TOKENS if m.group(2) == "countTokens" else GENERATE

    def parse(self, endpoint: str, path: str, query: dict[str, str], body: dict[str, Any], size: int) -> LlmRequest:
        m = PATH.match(path)
        stream = bool(m and m.group(2) == "streamGenerateContent")
        # countTokens takes {contents} or {generateContentRequest: {model, contents, ...}}.
        inner = as_dict(field(body, "generateContentRequest")) or body
        contents = inner.get("contents")
        if not isinstance(contents, list):
            raise BadRequest("contents: field required")
        texts = [t for part in as_list(as_dict(field(inner, "systemInstruction")).get("parts")) for t in text_of([part])]
        results = 0
        for content in contents:
            for part in as_list(as_dict(content).get("parts")):
                part = as_dict(part)
                if field(part, "functionResponse") is not None:
                    results += 1
                elif isinstance(part.get("text"), str):
                    texts.append(part["text"])
        tools = []
        for group in as_list(inner.get("tools")):
            for decl in as_list(field(as_dict(group), "functionDeclarations")):
                decl = as_dict(decl)
                if isinstance(decl.get("name"), str):
                    params = as_dict(field(decl, "parametersJsonSchema")) or as_dict(decl.get("parameters"))
                    tools.append(Tool(decl["name"], params, "function", as_str(decl.get("description"))))
                    texts.append(as_str(decl.get("description")))
        config = as_dict(field(inner, "generationConfig"))
        schema: dict[str, Any] | None = None
        if field(config, "responseMimeType") == "application/json":
            schema = as_dict(field(config, "responseJsonSchema")) or as_dict(field(config, "responseSchema"))
        return LlmRequest(self.name, endpoint, model_of(path), stream, tools, results, texts, size, body,
                          messages=contents, json_schema=schema, sse=query.get("alt") == "sse")

    # -- replies
    def _chunk(self, reply: Reply, parts: list[dict[str, Any]], final: bool) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
        if final:
            candidate["finishReason"] = "STOP"
        return {"candidates": [candidate], "usageMetadata": usage_json(reply.usage, final),
                "modelVersion": reply.model, "responseId": reply.id}

    def _parts(self, reply: Reply) -> list[dict[str, Any]]:
        parts: list[dict[str, Any]] = []
        if reply.text or reply.tool_call is None:
            parts.append({"text": reply.text})
        if reply.tool_call is not None:
            parts.append({"functionCall": {"name": reply.tool_call.name, "args": reply.tool_call.arguments or {}}})
        return parts

    def reply_json(self, request: LlmRequest, reply: Reply) -> Any:
        if request.stream and not request.sse:
            return self._chunks(reply)
        return self._chunk(reply, self._parts(reply), final=True)

    def _chunks(self, reply: Reply) -> list[dict[str, Any]]:
        texts = pieces(reply.text, 24) if reply.text else []
        chunks = [self._chunk(reply, [{"text": t}], final=False) for t in texts[:-1]]
        last: list[dict[str, Any]] = [{"text": texts[-1]}] if texts else []
        if reply.tool_call is not None:
            last.append({"functionCall": {"name": reply.tool_call.name, "args": reply.tool_call.arguments or {}}})
        chunks.append(self._chunk(reply, last or [{"text": ""}], final=True))
        return chunks

    def reply_events(self, request: LlmRequest, reply: Reply) -> Iterator[bytes]:
        for chunk in self._chunks(reply):
            yield encode(chunk, newline="\r\n")

    def count_tokens_json(self, request: LlmRequest, tokens: int) -> dict[str, Any]:
        return {"totalTokens": tokens, "promptTokensDetails": [{"modality": "TEXT", "tokenCount": tokens}]}

    def error_json(self, status: int, message: str) -> dict[str, Any]:
        return {"error": {"code": status, "message": message, "status": STATUS.get(status, "UNKNOWN")}}

    def read_object(self, event: str | None, obj: dict[str, Any], metered: Metered) -> None:
        if isinstance(obj.get("modelVersion"), str) and obj["modelVersion"]:
            metered.model = obj["modelVersion"]
        if isinstance(obj.get("usageMetadata"), dict):
            metered.usage = read_usage(obj["usageMetadata"])
        if obj.get("__caught__"):
            if obj.get("finishReason") or event is None:
                metered.complete = True
            return
        if any(isinstance(c, dict) and c.get("finishReason") for c in as_list(obj.get("candidates"))):
            metered.complete = True
        elif event is None and "candidates" in obj:
            metered.complete = True
        if isinstance(obj.get("error"), dict):
            metered.errors.append(as_str(obj["error"].get("message"), "error"))

