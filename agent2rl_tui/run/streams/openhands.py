"""OpenHands' ``openhands --headless --json`` output (JSON events amid prose) as steps.

Two forms are read, in one stream or mixed: each event pretty-printed over many lines after a
``--JSON Event--`` marker (the CLI's source), which the normalizer gathers itself before
reading it, and each event as one compact JSON line with no marker (what OpenHands CLI 1.16.0
printed when it ran here).
"""

from __future__ import annotations

import json
import re
from typing import Any

from agent2rl_tui.record.transcripts import Step
from agent2rl_tui.run.streams.base import (
    Normalizer,
    as_dict,
    as_text,
    blocks_text,
    describe,
    ident,
    iso_time,
)

_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_JSON_LINE_STARTS = tuple('"{}[]-0123456789tfn')  # how a line inside pretty-printed JSON starts
_SOURCE_ROLES: dict[str | None, str] = {"agent": "assistant", "user": "user"}  # looked up by ident(): maybe None
MAX_EVENT_CHARS = 8 * 2**20
"""An event gathered past this size is given up as a raw step: brackets that never balance
must not hold the stream's lines in memory."""


class OpenHandsJson(Normalizer):
    """``openhands --headless --json`` (OpenHands-CLI openhands_cli/utils.py ``json_callback``).

    Not JSONL, as the source has it: each event is a line ``--JSON Event--`` and then the
    event's ``model_dump()`` pretty-printed over many lines, with prose (banner, ``Goodbye!``,
    ``Conversation ID:``) around. Lines after a marker (or a line that is just ``{``) are
    gathered until their brackets balance, then parsed; a line that cannot continue JSON
    (prose) or a new marker ends a broken event, which becomes one raw step. Steps of an
    event carry the marker's line number. OpenHands CLI 1.16.0 printed each event as one
    compact JSON line instead, without a marker: a line outside an event that is a whole JSON
    object is read as an event on its own.
    """

    MARKER = "--JSON Event--"

    def __init__(self) -> None:
        super().__init__()
        self._lines: list[str] | None = None  # the event being gathered; None outside one
        self._depth = 0
        self._size = 0  # characters gathered in the event
        self._event_at = 0.0
        self._event_line = 0
        self._marked = False  # the event being gathered came after a marker line

    def _line(self, line: str, at: float) -> list[Step]:
        stripped = line.strip()
        if self._lines is None:
            return self._outside(stripped, line, at)
        continues = stripped.startswith(_JSON_LINE_STARTS if self._lines else "{")
        if stripped == self.MARKER or not continues:
            return self._flush() + self._outside(stripped, line, at)
        self._lines.append(line)
        self._size += len(line)
        bare = _JSON_STRING.sub("", line)
        self._depth += bare.count("{") + bare.count("[") - bare.count("}") - bare.count("]")
        if self._size > MAX_EVENT_CHARS:
            return self._flush()
        return self._close() if self._depth <= 0 else []

    def _end(self) -> list[Step]:
        try:
            return self._flush()
        except Exception:
            return []

    def _outside(self, stripped: str, line: str, at: float) -> list[Step]:
        if stripped == self.MARKER:
            self._lines, self._depth, self._size, self._marked = [], 0, 0, True
            self._event_at, self._event_line = at, self.lineno
            return []
        if stripped == "{":  # a pretty-printed event without its marker
            self._lines, self._depth, self._size, self._marked = [], 0, 0, False
            self._event_at, self._event_line = at, self.lineno
            return self._line(line, at)
        if stripped.startswith("{") and stripped.endswith("}"):  # one event on one line
            try:
                event = json.loads(stripped)
            except ValueError:
                event = None
            steps = self._event(event, at) if isinstance(event, dict) else None
            if steps is not None:
                return steps
        if stripped.startswith("Conversation ID:"):
            return [self._step("system", at, stripped)]
        return [self._raw(line, at)]

    def _flush(self) -> list[Step]:
        """The event being gathered, cut short, as one raw step (marker included)."""
        if self._lines is None:
            return []
        lines, self._lines = self._lines, None
        return self._on_marker_line([self._raw("\n".join(self._head() + lines), self._event_at)])

    def _head(self) -> list[str]:
        return [self.MARKER] if self._marked else []

    def _close(self) -> list[Step]:
        lines, self._lines = self._lines or [], None
        text = "\n".join(lines)
        try:
            event = json.loads(text)
        except ValueError:
            event = None
        try:
            steps = self._event(event, self._event_at) if isinstance(event, dict) else None
        except Exception:  # keep the gathered lines, as for any event not understood
            steps = None
        if steps is None:
            steps = [self._raw("\n".join([*self._head(), text]), self._event_at)]
        return self._on_marker_line(steps)

    def _on_marker_line(self, steps: list[Step]) -> list[Step]:
        for step in steps:
            step.line = self._event_line
        return steps

    def _event(self, event: dict[str, Any], at: float) -> list[Step] | None:
        at = iso_time(event.get("timestamp"), at)
        kind = event.get("kind")
        if kind == "ActionEvent":
            return self._action(event, at)
        if kind == "ObservationEvent":
            observation = as_dict(event.get("observation"))
            text = blocks_text(observation.get("content")) or as_text(
                observation.get("output", observation.get("text", observation.get("error"))))
            prefix = "[error] " if observation.get("is_error") is True else ""
            return [self._tool_result(at, event.get("tool_name"), event.get("tool_call_id"), text,
                                      prefix)]
        if kind == "UserRejectObservation":
            return [self._tool_result(at, event.get("tool_name"), event.get("tool_call_id"),
                                      as_text(event.get("rejection_reason")), "[rejected] ")]
        if kind == "MessageEvent":
            llm = as_dict(event.get("llm_message"))
            role = _SOURCE_ROLES.get(ident(event.get("source"))) or ident(llm.get("role"))
            steps = self._reasoning(at, llm.get("reasoning_content"))
            return steps + [self._step("message", at, blocks_text(llm.get("content")), role=role)]
        if kind == "AgentErrorEvent":
            return [self._step("error", at, event.get("error"), tool=ident(event.get("tool_name")),
                               call_id=ident(event.get("tool_call_id")))]
        if isinstance(kind, str):
            detail = describe(kind, event.get("key"), event.get("value"), event.get("reason"))
            return [self._step("system", at, detail)]
        return None

    def _action(self, event: dict[str, Any], at: float) -> list[Step]:
        steps = self._reasoning(at, event.get("reasoning_content"), event.get("thought"))
        action = event.get("action")
        if isinstance(action, dict):
            args = {k: v for k, v in action.items() if k != "kind" and v is not None}
        else:  # the model's call could not be parsed into an action: keep what it sent
            args = _parsed(as_dict(event.get("tool_call")).get("arguments"))
        steps.append(self._tool_call(at, event.get("tool_name"), event.get("tool_call_id"), args,
                                     text=event.get("summary")))
        return steps

    def _reasoning(self, at: float, *contents: Any) -> list[Step]:
        texts = (blocks_text(c) for c in contents if c)
        return [self._step("reasoning", at, t) for t in texts if t.strip()]


def _parsed(value: Any) -> Any:
    """A JSON string decoded where it decodes, else the value itself."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value
