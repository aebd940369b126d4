"""Agent transcripts: each CLI's headless output stream, line by line, as one list of timed steps.

The five agent CLIs print five different streams (shared/AGENT-CLIS.md gives the schemas
and their sources). The supervisor stamps every stdout line on arrival; a normalizer per
format turns those lines into ``Step``s of a few kinds, so that whatever shows or sums a
run reads one shape. Rules that hold for every format:

- Nothing raises and nothing is dropped: a line that is not JSON, is cut off, or lacks
  the fields its format needs becomes a ``raw`` step carrying the line. Blank lines are
  skipped; deliberate skips are few and named below (Codex item updates).
- Time is the stream's own where it has one (Gemini ISO stamps, OpenCode epoch
  milliseconds, OpenHands ISO stamps), else the arrival stamp given to ``feed``.
  OpenHands writes ``datetime.now().isoformat()``, local time with no zone; it is read
  as UTC, because the zone it was written in is not in the stream.
- Tokens and cost sit on steps so that summing them over a run gives its totals once
  (see ``totals``): per assistant message for Claude (once per message id, since Claude
  repeats a message over several lines), per turn for Codex, per step for OpenCode, from
  the final result for Gemini. Claude's result carries the run's cost, and its tokens only
  when no per-message usage was seen.
- Long texts keep ``TEXT_LIMIT`` characters; ``size`` keeps the original length (always
  set on tool results). Tool arguments are kept whole.

The ``Step`` they produce is the record's (record/transcripts.py); parsing is standard
library only.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from agent2rl_tui.record.transcripts import TEXT_LIMIT, Step

_SMALL = 200  # characters kept of the detail in a system step


# --- reading loosely typed JSON -------------------------------------------------------------

def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _name(value: Any) -> str | None:
    """An id or a name: strings as they are, numbers as text, anything else None."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def _text(value: Any) -> str:
    """Any JSON value as text (strings as they are)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _blocks_text(content: Any) -> str:
    """Text of a content field: a string, or a list of blocks ({type: text, text} or strings)."""
    if not isinstance(content, list):
        return _text(content)
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif isinstance(block, dict) and block.get("type") == "image":
            parts.append("[image]")
        else:
            parts.append(_text(block))
    return "\n".join(parts)


def _money(value: Any) -> float | None:
    """A finite number as a float, else None."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _count(value: Any) -> int:
    """A token count; anything that is not a finite number counts 0."""
    return value if type(value) is int else int(_money(value) or 0)


def _args(value: Any) -> dict | None:
    """Tool arguments as a JSON object; anything else given is kept under "input"."""
    if value is None:
        return None
    return value if isinstance(value, dict) else {"input": value}


def _iso_time(value: Any, fallback: float) -> float:
    """UNIX seconds of an ISO-8601 stamp; a stamp without a zone is read as UTC."""
    if not isinstance(value, str):
        return fallback
    try:
        stamp = datetime.fromisoformat(value)
        if stamp.tzinfo is None:
            stamp = stamp.replace(tzinfo=UTC)
        return stamp.timestamp()
    except (ValueError, OverflowError, OSError):
        return fallback


def _epoch_ms_time(value: Any, fallback: float) -> float:
    seconds = _money(value)
    return fallback if seconds is None else seconds / 1000.0


def _detail(*parts: Any, **named: Any) -> str:
    """A short one-line description: the parts, then name=value for the named values given."""
    words = [_text(p) for p in parts if p not in (None, "")]
    words += [f"{k}={_text(v)}" for k, v in named.items() if v not in (None, "")]
    return " ".join(words)[:_SMALL]


def _joined(*parts: str) -> str:
    return ": ".join(p for p in parts if p)


def _error_message(error: Any) -> str:
    """The message of an error object ({message} or {name, data: {message}}), else its text."""
    if isinstance(error, dict):
        message = error.get("message", _dict(error.get("data")).get("message"))
        return _text(message if message is not None else error.get("name", error))
    return _text(error)


# --- the normalizers ------------------------------------------------------------------------

class Normalizer:
    """Turns one stream into steps. Make one per stream: it remembers tool names by call id."""

    def __init__(self) -> None:
        self.lineno = 0  # lines fed so far; steps made now come from this line
        self._tools: dict[str, str] = {}  # call id -> tool name

    def feed(self, line: str, at: float) -> list[Step]:
        """One stream line (without its newline); ``at`` is when it arrived."""
        self.lineno += 1
        try:
            line = line.rstrip("\r\n") if isinstance(line, str) else str(line)
            if not line.strip():
                return []
            return self._line(line, at)
        except Exception:  # a surprise in one line must neither lose it nor stop the stream
            return [self._raw(line, at)]

    def finish(self) -> list[Step]:
        """Flush anything buffered at the end of the stream."""
        return []

    def _line(self, line: str, at: float) -> list[Step]:
        raise NotImplementedError

    def _step(self, kind: str, at: float, text: Any = "", *, whole_size: bool = False,
              **fields: Any) -> Step:
        """A step from the current line; text past TEXT_LIMIT is cut, ``size`` keeps its length."""
        text = _text(text)
        size = len(text) if whole_size or len(text) > TEXT_LIMIT else None
        return Step(at=at, kind=kind, text=text[:TEXT_LIMIT], size=size, line=self.lineno, **fields)

    def _raw(self, line: Any, at: float) -> Step:
        return self._step("raw", at, line if isinstance(line, str) else repr(line))

    def _tool_call(self, at: float, tool: Any, call_id: Any, args: Any, text: Any = "") -> Step:
        tool, call_id = _name(tool), _name(call_id)
        if tool is not None and call_id is not None:
            self._tools[call_id] = tool
        return self._step("tool_call", at, text, tool=tool, call_id=call_id, args=_args(args))

    def _tool_result(self, at: float, tool: Any, call_id: Any, text: str,
                     prefix: str = "") -> Step:
        call_id = _name(call_id)
        tool = _name(tool) or (self._tools.get(call_id) if call_id is not None else None)
        return self._step("tool_result", at, prefix + text, whole_size=True, tool=tool,
                          call_id=call_id)


class _JsonLines(Normalizer):
    """One JSON object per line; ``_event`` returns None for an object it does not understand."""

    def _line(self, line: str, at: float) -> list[Step]:
        try:
            event = json.loads(line)
        except ValueError:
            return [self._raw(line, at)]
        steps = self._event(event, at) if isinstance(event, dict) else None
        return [self._raw(line, at)] if steps is None else steps

    def _event(self, event: dict, at: float) -> list[Step] | None:
        raise NotImplementedError


class ClaudeStreamJson(_JsonLines):
    """``claude -p --output-format stream-json --verbose`` (Agent SDK ``SDKMessage`` lines)."""

    def __init__(self) -> None:
        super().__init__()
        self._counted_ids: set[str] = set()
        self._saw_usage = False

    def _event(self, event: dict, at: float) -> list[Step] | None:
        kind = event.get("type")
        if kind == "system":
            return [self._step("system", at, _detail(event.get("subtype"), model=event.get("model"),
                                                     session=event.get("session_id")))]
        if kind == "assistant":
            return self._assistant(event, at)
        if kind == "user":
            return self._user(event, at)
        if kind == "result":
            return self._result(event, at)
        if kind == "stream_event":
            inner = _dict(event.get("event"))
            delta = _dict(inner.get("delta")).get("type")
            return [self._step("system", at, _detail("stream_event", inner.get("type"), delta))]
        if kind == "rate_limit_event":
            info = _dict(event.get("rate_limit_info"))
            detail = _detail("rate_limit_event", status=info.get("status"))
            return [self._step("system", at, detail)]
        return None

    def _assistant(self, event: dict, at: float) -> list[Step] | None:
        message = event.get("message")
        if not isinstance(message, dict):
            return None
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        steps = [self._assistant_block(block, at) for block in _list(content)]
        if event.get("error"):
            said = next((s.text for s in steps if s.kind == "message"), "")
            steps.append(self._step("error", at, _joined(_text(event["error"]), said)))
        if not steps:
            return None
        usage, message_id = message.get("usage"), _name(message.get("id"))
        if isinstance(usage, dict) and message_id not in self._counted_ids:
            if message_id is not None:
                self._counted_ids.add(message_id)
            self._saw_usage = True
            steps[0].tokens_in, steps[0].tokens_out = _claude_tokens(usage)
        return steps

    def _assistant_block(self, block: Any, at: float) -> Step:
        kind = _dict(block).get("type")
        if kind == "text":
            return self._step("message", at, block.get("text"), role="assistant")
        if kind == "thinking":
            return self._step("reasoning", at, block.get("thinking"))
        if kind == "redacted_thinking":
            return self._step("reasoning", at, "[redacted]")
        if kind in ("tool_use", "server_tool_use", "mcp_tool_use"):
            return self._tool_call(at, block.get("name"), block.get("id"), block.get("input"))
        return self._raw(_text(block), at)

    def _user(self, event: dict, at: float) -> list[Step] | None:
        message = event.get("message")
        if not isinstance(message, dict):
            return None
        content = message.get("content")
        if isinstance(content, str):
            return [self._step("message", at, content, role="user")]
        steps = []
        for block in _list(content):
            kind = _dict(block).get("type")
            if kind == "tool_result":
                prefix = "[error] " if block.get("is_error") is True else ""
                steps.append(self._tool_result(at, None, block.get("tool_use_id"),
                                               _blocks_text(block.get("content")), prefix))
            elif kind == "text":
                steps.append(self._step("message", at, block.get("text"), role="user"))
            else:
                steps.append(self._raw(_text(block), at))
        return steps or None

    def _result(self, event: dict, at: float) -> list[Step]:
        subtype, text = _name(event.get("subtype")), event.get("result")
        steps = []
        if event.get("is_error") is True:
            errors = "; ".join(_text(e) for e in _list(event.get("errors")))
            detail = text if isinstance(text, str) and text else errors
            steps.append(self._step("error", at, _joined(subtype or "error", detail)))
        result = self._step("result", at, text if isinstance(text, str) else subtype or "",
                            cost_usd=_money(event.get("total_cost_usd")))
        if not self._saw_usage and isinstance(event.get("usage"), dict):
            result.tokens_in, result.tokens_out = _claude_tokens(event["usage"])
        return steps + [result]


def _claude_tokens(usage: dict) -> tuple[int, int]:
    """Anthropic usage: input counts fresh, cache-written and cache-read tokens."""
    tokens_in = sum(_count(usage.get(k)) for k in
                    ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
    return tokens_in, _count(usage.get("output_tokens"))


class CodexJsonl(_JsonLines):
    """``codex exec --json`` (codex-rs/exec/src/exec_events.rs).

    A command or MCP call becomes its tool_call when it starts (so a live view sees it
    running, and a run cut off mid-command still shows it) and its tool_result when it
    completes; a completed item never seen starting gets both. Other ``item.started`` and
    all ``item.updated`` lines are skipped: the completed item carries the final state.
    """

    _RUNS = ("command_execution", "mcp_tool_call")
    _PHASES = ("item.started", "item.updated", "item.completed")

    def __init__(self) -> None:
        super().__init__()
        self._started: set[str] = set()

    def _event(self, event: dict, at: float) -> list[Step] | None:
        kind = event.get("type")
        if kind == "thread.started":
            return [self._step("system", at, _detail("thread started", event.get("thread_id")))]
        if kind == "turn.started":
            return [self._step("system", at, "turn started")]
        if kind == "turn.completed" and isinstance(event.get("usage"), dict):
            usage = event["usage"]
            detail = _detail("turn completed", cached=usage.get("cached_input_tokens"))
            return [self._step("usage", at, detail, tokens_in=_count(usage.get("input_tokens")),
                               tokens_out=_count(usage.get("output_tokens")))]
        if kind == "turn.failed":
            return [self._step("error", at, _error_message(event.get("error")) or "turn failed")]
        if kind == "error" and "message" in event:
            return [self._step("error", at, event.get("message"))]
        if kind in self._PHASES and isinstance(event.get("item"), dict):
            return self._item(kind, event["item"], at)
        if kind == "item.plan.delta":
            return [self._step("system", at, _detail("plan delta", event.get("delta")))]
        if kind == "request_user_input":
            return [self._step("system", at, _detail("request_user_input", event.get("questions")))]
        return None

    def _item(self, phase: str, item: dict, at: float) -> list[Step] | None:
        kind, item_id = item.get("type"), _name(item.get("id"))
        if phase != "item.completed":
            if phase == "item.started" and kind in self._RUNS and item_id not in self._started:
                if item_id is not None:
                    self._started.add(item_id)
                return [self._run_call(item, at)]
            return []
        if kind == "agent_message":
            return [self._step("message", at, item.get("text"), role="assistant")]
        if kind == "reasoning":
            return [self._step("reasoning", at, item.get("text"))]
        if kind in self._RUNS:
            steps = [] if item_id in self._started else [self._run_call(item, at)]
            self._started.discard(item_id)
            return steps + [self._run_result(item, at)]
        if kind == "file_change":
            return [self._tool_call(at, "file_change", item_id, {"changes": item.get("changes")},
                                    text=item.get("status"))]
        if kind == "web_search":
            return [self._tool_call(at, "web_search", item_id, {"query": item.get("query")})]
        if kind == "collab_tool_call":
            return [self._tool_call(at, f"collab/{_text(item.get('tool'))}", item_id,
                                    {"prompt": item.get("prompt"),
                                     "receivers": item.get("receiver_thread_ids")})]
        if kind == "todo_list":
            todo = [f"[{'x' if _dict(t).get('completed') else ' '}] {_text(_dict(t).get('text'))}"
                    for t in _list(item.get("items"))]
            return [self._step("system", at, "\n".join(["todo list"] + todo))]
        if kind == "plan":
            return [self._step("system", at, "plan\n" + _text(item.get("text")))]
        if kind == "error":
            return [self._step("error", at, item.get("message"))]
        return None

    def _run_call(self, item: dict, at: float) -> Step:
        if item.get("type") == "command_execution":
            return self._tool_call(at, "shell", item.get("id"), {"command": item.get("command")})
        tool = "/".join(filter(None, [_name(item.get("server")), _name(item.get("tool"))]))
        return self._tool_call(at, tool or None, item.get("id"), item.get("arguments"))

    def _run_result(self, item: dict, at: float) -> Step:
        if item.get("type") == "command_execution":
            code = item.get("exit_code")
            note = f"[exit code {code}]" if code is not None else f"[{_text(item.get('status'))}]"
            return self._tool_result(at, None, item.get("id"), _text(item.get("aggregated_output")),
                                     note + "\n")
        if item.get("error"):
            message = _error_message(item["error"])
            return self._tool_result(at, None, item.get("id"), message, "[error] ")
        result = _dict(item.get("result"))
        text = _blocks_text(result.get("content")) or _text(result.get("structured_content"))
        return self._tool_result(at, None, item.get("id"), text)


class GeminiStreamJson(_JsonLines):
    """``gemini -p … --output-format stream-json`` (packages/core/src/output/types.ts)."""

    def _event(self, event: dict, at: float) -> list[Step] | None:
        at = _iso_time(event.get("timestamp"), at)
        kind = event.get("type")
        if kind == "init":
            return [self._step("system", at, _detail("init", model=event.get("model"),
                                                     session=event.get("session_id")))]
        if kind == "message" and "content" in event:
            return [self._step("message", at, event.get("content"), role=_name(event.get("role")))]
        if kind == "tool_use":
            return [self._tool_call(at, event.get("tool_name"), event.get("tool_id"),
                                    event.get("parameters"))]
        if kind == "tool_result":
            if event.get("status") == "error":
                return [self._tool_result(at, None, event.get("tool_id"),
                                          _error_message(event.get("error")), "[error] ")]
            return [self._tool_result(at, None, event.get("tool_id"), _text(event.get("output")))]
        if kind == "error":
            return [self._step("error", at, event.get("message"))]
        if kind == "result":
            return self._result(event, at)
        return None

    def _result(self, event: dict, at: float) -> list[Step]:
        stats, status = _dict(event.get("stats")), _name(event.get("status")) or ""
        steps = []
        if status == "error":
            steps.append(self._step("error", at, _error_message(event.get("error")) or "error"))
        result = self._step("result", at, status, tokens_in=_count(stats.get("input_tokens")),
                            tokens_out=_count(stats.get("output_tokens")))
        return steps + [result]


class OpenCodeJson(_JsonLines):
    """``opencode run --format json`` (packages/opencode/src/cli/cmd/run.ts, session/message-v2.ts).

    A tool line comes once the tool has finished; its call is placed at the tool's own
    start time and its result at its end time (``part.state.time``) where given.
    """

    def _event(self, event: dict, at: float) -> list[Step] | None:
        at = _epoch_ms_time(event.get("timestamp"), at)
        kind, part = event.get("type"), _dict(event.get("part"))
        if kind == "step_start":
            return [self._step("system", at, "step start")]
        if kind == "text" and isinstance(part.get("text"), str):
            return [self._step("message", at, part["text"], role="assistant")]
        if kind == "reasoning" and isinstance(part.get("text"), str):
            return [self._step("reasoning", at, part["text"])]
        if kind == "tool_use" and isinstance(part.get("state"), dict):
            return self._tool(part, at)
        if kind == "step_finish" and part:
            tokens = _dict(part.get("tokens"))
            cache = _dict(tokens.get("cache"))
            tokens_in = sum(_count(n) for n in (tokens.get("input"), cache.get("read"),
                                                cache.get("write")))
            tokens_out = _count(tokens.get("output")) + _count(tokens.get("reasoning"))
            return [self._step("usage", at, _detail("step finish", part.get("reason")),
                               tokens_in=tokens_in, tokens_out=tokens_out,
                               cost_usd=_money(part.get("cost")))]
        if kind == "error":
            return [self._step("error", at, _error_message(event.get("error")) or "error")]
        if kind == "done":
            return [self._step("system", at, _detail("done", event.get("reason"),
                                                     rejected=event.get("rejected") or None))]
        return None

    def _tool(self, part: dict, at: float) -> list[Step]:
        state = part["state"]
        times = _dict(state.get("time"))
        call = self._tool_call(_epoch_ms_time(times.get("start"), at), part.get("tool"),
                               part.get("callID"), state.get("input"), text=state.get("title"))
        end = _epoch_ms_time(times.get("end"), at)
        failed = state.get("status") == "error"
        text = _text(state.get("error" if failed else "output"))
        prefix = "[error] " if failed else ""
        return [call, self._tool_result(end, None, part.get("callID"), text, prefix)]


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_JSON_LINE_STARTS = tuple('"{}[]-0123456789tfn')  # how a line inside pretty-printed JSON starts
_SOURCE_ROLES = {"agent": "assistant", "user": "user"}


class OpenHandsJson(Normalizer):
    """``openhands --headless --json`` (OpenHands-CLI openhands_cli/utils.py ``json_callback``).

    Not JSONL: each event is a line ``--JSON Event--`` and then the event's ``model_dump()``
    pretty-printed over many lines, with prose (banner, ``Goodbye!``, ``Conversation ID:``)
    around. Lines after a marker are gathered until their brackets balance, then parsed; a
    line that cannot continue JSON (prose) or a new marker ends a broken event, which
    becomes one raw step. Steps of an event carry the marker's line number.
    """

    MARKER = "--JSON Event--"

    def __init__(self) -> None:
        super().__init__()
        self._lines: list[str] | None = None  # the event being gathered; None outside one
        self._depth = 0
        self._event_at = 0.0
        self._event_line = 0

    def _line(self, line: str, at: float) -> list[Step]:
        stripped = line.strip()
        if self._lines is None:
            return self._outside(stripped, line, at)
        continues = stripped.startswith(_JSON_LINE_STARTS if self._lines else "{")
        if stripped == self.MARKER or not continues:
            return self._flush() + self._outside(stripped, line, at)
        self._lines.append(line)
        bare = _JSON_STRING.sub("", line)
        self._depth += bare.count("{") + bare.count("[") - bare.count("}") - bare.count("]")
        return self._close() if self._depth <= 0 else []

    def finish(self) -> list[Step]:
        try:
            return self._flush()
        except Exception:
            return []

    def _outside(self, stripped: str, line: str, at: float) -> list[Step]:
        if stripped == self.MARKER:
            self._lines, self._depth = [], 0
            self._event_at, self._event_line = at, self.lineno
            return []
        if stripped.startswith("Conversation ID:"):
            return [self._step("system", at, stripped)]
        return [self._raw(line, at)]

    def _flush(self) -> list[Step]:
        """The event being gathered, cut short, as one raw step (marker included)."""
        if self._lines is None:
            return []
        lines, self._lines = self._lines, None
        return self._on_marker_line([self._raw("\n".join([self.MARKER] + lines), self._event_at)])

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
            steps = [self._raw("\n".join([self.MARKER, text]), self._event_at)]
        return self._on_marker_line(steps)

    def _on_marker_line(self, steps: list[Step]) -> list[Step]:
        for step in steps:
            step.line = self._event_line
        return steps

    def _event(self, event: dict, at: float) -> list[Step] | None:
        at = _iso_time(event.get("timestamp"), at)
        kind = event.get("kind")
        if kind == "ActionEvent":
            return self._action(event, at)
        if kind == "ObservationEvent":
            observation = _dict(event.get("observation"))
            text = _blocks_text(observation.get("content")) or _text(
                observation.get("output", observation.get("text", observation.get("error"))))
            prefix = "[error] " if observation.get("is_error") is True else ""
            return [self._tool_result(at, event.get("tool_name"), event.get("tool_call_id"), text,
                                      prefix)]
        if kind == "UserRejectObservation":
            return [self._tool_result(at, event.get("tool_name"), event.get("tool_call_id"),
                                      _text(event.get("rejection_reason")), "[rejected] ")]
        if kind == "MessageEvent":
            llm = _dict(event.get("llm_message"))
            role = _SOURCE_ROLES.get(_name(event.get("source"))) or _name(llm.get("role"))
            steps = self._reasoning(at, llm.get("reasoning_content"))
            return steps + [self._step("message", at, _blocks_text(llm.get("content")), role=role)]
        if kind == "AgentErrorEvent":
            return [self._step("error", at, event.get("error"), tool=_name(event.get("tool_name")),
                               call_id=_name(event.get("tool_call_id")))]
        if isinstance(kind, str):
            detail = _detail(kind, event.get("key"), event.get("value"), event.get("reason"))
            return [self._step("system", at, detail)]
        return None

    def _action(self, event: dict, at: float) -> list[Step]:
        steps = self._reasoning(at, event.get("reasoning_content"), event.get("thought"))
        action = event.get("action")
        if isinstance(action, dict):
            args = {k: v for k, v in action.items() if k != "kind" and v is not None}
        else:  # the model's call could not be parsed into an action: keep what it sent
            args = _parsed(_dict(event.get("tool_call")).get("arguments"))
        steps.append(self._tool_call(at, event.get("tool_name"), event.get("tool_call_id"), args,
                                     text=event.get("summary")))
        return steps

    def _reasoning(self, at: float, *contents: Any) -> list[Step]:
        texts = (_blocks_text(c) for c in contents if c)
        return [self._step("reasoning", at, t) for t in texts if t.strip()]


def _parsed(value: Any) -> Any:
    """A JSON string decoded where it decodes, else the value itself."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


class PlainText(Normalizer):
    """Agents without a machine stream: every non-blank line is a message of unknown role."""

    def _line(self, line: str, at: float) -> list[Step]:
        return [self._step("message", at, line)]


FORMATS: dict[str, type[Normalizer]] = {
    "claude-stream-json": ClaudeStreamJson,
    "codex-jsonl": CodexJsonl,
    "gemini-stream-json": GeminiStreamJson,
    "opencode-json": OpenCodeJson,
    "openhands-json": OpenHandsJson,
    "text": PlainText,
}


def make_normalizer(fmt: str) -> Normalizer:
    """A fresh normalizer for one stream of format ``fmt``."""
    cls = FORMATS.get(fmt) if isinstance(fmt, str) else None
    if cls is None:
        raise ValueError(f"unknown transcript format {fmt!r}; known: {', '.join(FORMATS)}")
    return cls()


def normalize_lines(fmt: str, lines: Iterable[tuple[str, float]]) -> list[Step]:
    """Feed every (line, arrival time) of a whole stream, then finish it."""
    normalizer = make_normalizer(fmt)
    steps: list[Step] = []
    for line, at in lines:
        steps.extend(normalizer.feed(line, at))
    steps.extend(normalizer.finish())
    return steps


def totals(steps: Iterable[Step]) -> dict:
    """Run totals: tokens, cost (None when no step had one), step count and count per kind."""
    tokens_in = tokens_out = count = 0
    cost: float | None = None
    by_kind: dict[str, int] = {}
    for step in steps:
        count += 1
        by_kind[step.kind] = by_kind.get(step.kind, 0) + 1
        tokens_in += step.tokens_in or 0
        tokens_out += step.tokens_out or 0
        if step.cost_usd is not None:
            cost = (cost or 0.0) + step.cost_usd
    return {"tokens_in": tokens_in, "tokens_out": tokens_out, "cost_usd": cost, "steps": count,
            "by_kind": by_kind}
