"""Gemini CLI's ``gemini -p … --output-format stream-json`` stream as steps.

Gemini streams an assistant reply as it is generated: one ``message`` line per chunk, each
marked ``"delta": true``. A step per chunk would cut one reply into dozens of fragments, so
the chunks of a turn are gathered into one message step, placed at the first chunk's time and
line. The reply is complete when any other line arrives (a tool call, a tool result, the
result, a user message, an unreadable line) or the stream ends. Tokens come once, from the
final ``result``'s stats.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent2rl_tui.record.transcripts import TEXT_LIMIT, Step
from agent2rl_tui.run.streams.base import (
    JsonLines,
    as_dict,
    as_text,
    describe,
    error_message,
    ident,
    iso_time,
    token_count,
)


@dataclass(slots=True)
class _Reply:
    """A message streamed in delta chunks, gathered until its turn ends."""

    role: str | None
    at: float
    line: int
    parts: list[str] = field(default_factory=list)
    length: int = 0  # characters over all chunks; only the first TEXT_LIMIT are kept

    def add(self, text: str) -> None:
        room = TEXT_LIMIT - min(self.length, TEXT_LIMIT)
        if room > 0:
            self.parts.append(text[:room])
        self.length += len(text)

    @property
    def text(self) -> str:
        return "".join(self.parts)

    @property
    def size(self) -> int | None:
        """The whole length where the text was cut, as ``Normalizer._step`` gives it."""
        return self.length if self.length > TEXT_LIMIT else None


def _is_chunk(event: dict[str, Any]) -> bool:
    return event.get("type") == "message" and event.get("delta") is True and "content" in event


class GeminiStreamJson(JsonLines):
    """``gemini -p … --output-format stream-json`` (packages/core/src/output/types.ts)."""

    def __init__(self) -> None:
        super().__init__()
        self._reply: _Reply | None = None

    def _end(self) -> list[Step]:
        return self._flush()

    def _object(self, event: Any, line: str, at: float) -> list[Step]:
        if isinstance(event, dict) and _is_chunk(event):
            return self._add_chunk(event, at)
        held = self._flush()
        try:
            return held + super()._object(event, line, at)
        except Exception:  # as ``feed`` would, but without losing the reply flushed above
            return held + [self._raw(line, at)]

    def _add_chunk(self, event: dict[str, Any], at: float) -> list[Step]:
        """Add a delta chunk to the reply; a chunk of another role first ends the reply."""
        role = ident(event.get("role"))
        held = self._flush() if self._reply is not None and self._reply.role != role else []
        if self._reply is None:
            self._reply = _Reply(role, iso_time(event.get("timestamp"), at), self.lineno)
        self._reply.add(as_text(event.get("content")))
        return held

    def _flush(self) -> list[Step]:
        """The gathered reply as one message step (none when no chunk is held)."""
        reply, self._reply = self._reply, None
        if reply is None:
            return []
        step = self._step("message", reply.at, reply.text, role=reply.role)
        step.line, step.size = reply.line, reply.size
        return [step]

    def _event(self, event: dict[str, Any], at: float) -> list[Step] | None:
        at = iso_time(event.get("timestamp"), at)
        kind = event.get("type")
        if kind == "init":
            return [self._step("system", at, describe("init", model=event.get("model"),
                                                      session=event.get("session_id")))]
        if kind == "message" and "content" in event:
            return [self._step("message", at, event.get("content"), role=ident(event.get("role")))]
        if kind == "tool_use":
            return [self._tool_call(at, event.get("tool_name"), event.get("tool_id"),
                                    event.get("parameters"))]
        if kind == "tool_result":
            return [self._result_of_tool(event, at)]
        if kind == "error":
            return [self._step("error", at, event.get("message"))]
        if kind == "result":
            return self._result(event, at)
        return None

    def _result_of_tool(self, event: dict[str, Any], at: float) -> Step:
        if event.get("status") == "error":
            return self._tool_result(at, None, event.get("tool_id"),
                                     error_message(event.get("error")), "[error] ")
        return self._tool_result(at, None, event.get("tool_id"), as_text(event.get("output")))

    def _result(self, event: dict[str, Any], at: float) -> list[Step]:
        stats, status = as_dict(event.get("stats")), ident(event.get("status")) or ""
        steps = []
        if status == "error":
            steps.append(self._step("error", at, error_message(event.get("error")) or "error"))
        result = self._step("result", at, status, tokens_in=token_count(stats.get("input_tokens")),
                            tokens_out=token_count(stats.get("output_tokens")))
        return steps + [result]
