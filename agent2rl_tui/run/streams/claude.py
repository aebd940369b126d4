"""Claude Code's ``claude -p --output-format stream-json --verbose`` stream as steps.

Each line is one Agent SDK ``SDKMessage``. Claude repeats an assistant message over several
lines (one content block each), so its usage is counted once per message id. That usage is
the message's as it started (Claude Code 2.1 prints ``output_tokens: 1`` there: 5 of 100
output tokens were all a run's messages said), so the final ``result``, whose ``usage`` holds
the true totals, carries what the messages left out: the run's sums are ``result.usage``, and
a live view still sees tokens as messages arrive. The result carries the run's cost too. A run
cut off before its result keeps the messages' counts (docs/agent-clis.md).
"""

from __future__ import annotations

from typing import Any

from agent2rl_tui.record.transcripts import Step
from agent2rl_tui.run.streams.base import (
    JsonLines,
    as_dict,
    as_list,
    as_text,
    blocks_text,
    describe,
    finite,
    ident,
    joined,
    token_count,
)


class ClaudeStreamJson(JsonLines):
    """``claude -p --output-format stream-json --verbose`` (Agent SDK ``SDKMessage`` lines)."""

    def __init__(self) -> None:
        super().__init__()
        self._counted_ids: set[str] = set()
        self._since_result = [0, 0]  # tokens in and out put on steps since the last result

    def _event(self, event: dict[str, Any], at: float) -> list[Step] | None:
        kind = event.get("type")
        if kind == "system":
            return [self._step("system", at, describe(event.get("subtype"), model=event.get("model"),
                                                       session=event.get("session_id")))]
        if kind == "assistant":
            return self._assistant(event, at)
        if kind == "user":
            return self._user(event, at)
        if kind == "result":
            return self._result(event, at)
        if kind == "stream_event":
            inner = as_dict(event.get("event"))
            delta = as_dict(inner.get("delta")).get("type")
            return [self._step("system", at, describe("stream_event", inner.get("type"), delta))]
        if kind == "rate_limit_event":
            info = as_dict(event.get("rate_limit_info"))
            detail = describe("rate_limit_event", status=info.get("status"))
            return [self._step("system", at, detail)]
        return None

    def _assistant(self, event: dict[str, Any], at: float) -> list[Step] | None:
        message = event.get("message")
        if not isinstance(message, dict):
            return None
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        steps = [self._assistant_block(block, at) for block in as_list(content)]
        if event.get("error"):
            said = next((s.text for s in steps if s.kind == "message"), "")
            steps.append(self._step("error", at, joined(as_text(event["error"]), said)))
        if not steps:
            return None
        usage, message_id = message.get("usage"), ident(message.get("id"))
        if isinstance(usage, dict) and message_id not in self._counted_ids:
            if message_id is not None:
                self._counted_ids.add(message_id)
            steps[0].tokens_in, steps[0].tokens_out = _claude_tokens(usage)
            self._since_result[0] += steps[0].tokens_in
            self._since_result[1] += steps[0].tokens_out
        return steps

    def _assistant_block(self, block: Any, at: float) -> Step:
        kind = as_dict(block).get("type")
        if kind == "text":
            return self._step("message", at, block.get("text"), role="assistant")
        if kind == "thinking":
            return self._step("reasoning", at, block.get("thinking"))
        if kind == "redacted_thinking":
            return self._step("reasoning", at, "[redacted]")
        if kind in ("tool_use", "server_tool_use", "mcp_tool_use"):
            return self._tool_call(at, block.get("name"), block.get("id"), block.get("input"))
        return self._raw(as_text(block), at)

    def _user(self, event: dict[str, Any], at: float) -> list[Step] | None:
        message = event.get("message")
        if not isinstance(message, dict):
            return None
        content = message.get("content")
        if isinstance(content, str):
            return [self._step("message", at, content, role="user")]
        steps = []
        for block in as_list(content):
            kind = as_dict(block).get("type")
            if kind == "tool_result":
                prefix = "[error] " if block.get("is_error") is True else ""
                steps.append(self._tool_result(at, None, block.get("tool_use_id"),
                                               blocks_text(block.get("content")), prefix))
            elif kind == "text":
                steps.append(self._step("message", at, block.get("text"), role="user"))
            else:
                steps.append(self._raw(as_text(block), at))
        return steps or None

    def _result(self, event: dict[str, Any], at: float) -> list[Step]:
        subtype, text = ident(event.get("subtype")), event.get("result")
        steps = []
        if event.get("is_error") is True:
            errors = "; ".join(as_text(e) for e in as_list(event.get("errors")))
            detail = text if isinstance(text, str) and text else errors
            steps.append(self._step("error", at, joined(subtype or "error", detail)))
        result = self._step("result", at, text if isinstance(text, str) else subtype or "",
                            cost_usd=finite(event.get("total_cost_usd")))
        if isinstance(event.get("usage"), dict):  # the query's totals: what its messages left out
            total_in, total_out = _claude_tokens(event["usage"])
            seen_in, seen_out = self._since_result
            result.tokens_in, result.tokens_out = max(0, total_in - seen_in), max(0, total_out - seen_out)
        self._since_result = [0, 0]  # a result ends its query, whether it gave totals or not
        return steps + [result]


def _claude_tokens(usage: dict[str, Any]) -> tuple[int, int]:
    """Anthropic usage: input counts fresh, cache-written and cache-read tokens."""
    tokens_in = sum(token_count(usage.get(k)) for k in
                    ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
    return tokens_in, token_count(usage.get("output_tokens"))
