"""OpenCode's ``opencode run --format json`` stream (one JSON event per line) as steps.

Times are the stream's own, in epoch milliseconds; tokens and cost come per step, on
``step_finish``.
"""

from __future__ import annotations

from typing import Any

from agent2rl_tui.record.transcripts import Step
from agent2rl_tui.run.streams.base import (
    JsonLines,
    as_dict,
    as_text,
    describe,
    epoch_ms_time,
    error_message,
    finite,
    token_count,
)


class OpenCodeJson(JsonLines):
    """``opencode run --format json`` (packages/opencode/src/cli/cmd/run.ts, session/message-v2.ts).

    A tool line comes once the tool has finished; its call is placed at the tool's own
    start time and its result at its end time (``part.state.time``) where given.
    """

    def _event(self, event: dict[str, Any], at: float) -> list[Step] | None:
        at = epoch_ms_time(event.get("timestamp"), at)
        kind, part = event.get("type"), as_dict(event.get("part"))
        if kind == "step_start":
            return [self._step("system", at, "step start")]
        if kind == "text" and isinstance(part.get("text"), str):
            return [self._step("message", at, part["text"], role="assistant")]
        if kind == "reasoning" and isinstance(part.get("text"), str):
            return [self._step("reasoning", at, part["text"])]
        if kind == "tool_use" and isinstance(part.get("state"), dict):
            return self._tool(part, at)
        if kind == "step_finish" and part:
            tokens = as_dict(part.get("tokens"))
            cache = as_dict(tokens.get("cache"))
            tokens_in = sum(token_count(n) for n in (tokens.get("input"), cache.get("read"),
                                                     cache.get("write")))
            tokens_out = token_count(tokens.get("output")) + token_count(tokens.get("reasoning"))
            return [self._step("usage", at, describe("step finish", part.get("reason")),
                               tokens_in=tokens_in, tokens_out=tokens_out,
                               cost_usd=finite(part.get("cost")))]
        if kind == "error":
            return [self._step("error", at, error_message(event.get("error")) or "error")]
        if kind == "done":
            return [self._step("system", at, describe("done", event.get("reason"),
                                                       rejected=event.get("rejected") or None))]
        return None

    def _tool(self, part: dict[str, Any], at: float) -> list[Step]:
        state = part["state"]
        times = as_dict(state.get("time"))
        call = self._tool_call(epoch_ms_time(times.get("start"), at), part.get("tool"),
                               part.get("callID"), state.get("input"), text=state.get("title"))
        end = epoch_ms_time(times.get("end"), at)
        failed = state.get("status") == "error"
        text = as_text(state.get("error" if failed else "output"))
        prefix = "[error] " if failed else ""
        return [call, self._tool_result(end, None, part.get("callID"), text, prefix)]
