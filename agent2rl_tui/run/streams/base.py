"""What every transcript normalizer shares: the ``Normalizer`` base and loose-JSON readers.

Agent CLIs print JSON whose fields may be missing, mistyped or cut off, and a normalizer
must neither raise nor drop a line (see the package docstring). The readers below take any
JSON value and give back the type asked for, or a neutral value, so that the per-format
modules read events without guarding every field. ``Normalizer`` holds what a stream needs
whatever its format: line numbers, the raw-step fallback, text cut at ``TEXT_LIMIT`` and
tool names remembered by call id.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from agent2rl_tui.record.transcripts import TEXT_LIMIT, Step

_SMALL = 200  # characters kept of the detail in a system step
STDERR_LINES = 20
"""Lines of the agent's stderr quoted in the error step of an agent that failed silently."""


# --- reading loosely typed JSON -------------------------------------------------------------

def as_dict(value: Any) -> dict[str, Any]:
    """The value if it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """The value if it is a JSON array, else an empty one."""
    return value if isinstance(value, list) else []


def ident(value: Any) -> str | None:
    """An id or a name: strings as they are, numbers as text, anything else None."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def as_text(value: Any) -> str:
    """Any JSON value as text (strings as they are)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def blocks_text(content: Any) -> str:
    """Text of a content field: a string, or a list of blocks ({type: text, text} or strings)."""
    if not isinstance(content, list):
        return as_text(content)
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif isinstance(block, dict) and block.get("type") == "image":
            parts.append("[image]")
        else:
            parts.append(as_text(block))
    return "\n".join(parts)


def finite(value: Any) -> float | None:
    """A finite number as a float, else None."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def token_count(value: Any) -> int:
    """A token count; anything that is not a finite number counts 0."""
    return value if type(value) is int else int(finite(value) or 0)


def tool_args(value: Any) -> dict[str, Any] | None:
    """Tool arguments as a JSON object; anything else given is kept under "input"."""
    if value is None:
        return None
    return value if isinstance(value, dict) else {"input": value}


def iso_time(value: Any, fallback: float) -> float:
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


def epoch_ms_time(value: Any, fallback: float) -> float:
    """UNIX seconds of a stamp in epoch milliseconds; ``fallback`` when it is not a number."""
    seconds = finite(value)
    return fallback if seconds is None else seconds / 1000.0


def describe(*parts: Any, **named: Any) -> str:
    """A short one-line description: the parts, then name=value for the named values given."""
    words = [as_text(p) for p in parts if p not in (None, "")]
    words += [f"{k}={as_text(v)}" for k, v in named.items() if v not in (None, "")]
    return " ".join(words)[:_SMALL]


def joined(*parts: str) -> str:
    """The non-empty parts joined by ": "."""
    return ": ".join(p for p in parts if p)


def error_message(error: Any) -> str:
    """The message of an error object ({message} or {name, data: {message}}), else its text."""
    if isinstance(error, dict):
        message = error.get("message", as_dict(error.get("data")).get("message"))
        return as_text(message if message is not None else error.get("name", error))
    return as_text(error)


# --- the base of every normalizer -----------------------------------------------------------

class Normalizer:
    """Turns one stream into steps. Make one per stream: it remembers tool names by call id.

    Subclasses read lines in ``_line`` and give back what they hold at the end in ``_end``.
    An agent that exits non-zero without a single readable line on stdout (Gemini CLI's auth
    check: exit 41, stdout empty) gets an error step at the end quoting its stderr, once the
    supervisor has told the normalizer how it ended (``agent_exited``).
    """

    def __init__(self) -> None:
        self.lineno = 0  # lines fed so far; steps made now come from this line
        self._tools: dict[str, str] = {}  # call id -> tool name
        self.parsed = 0  # steps made from stdout that are not raw lines
        self._exit: tuple[int, Callable[[], list[str]], float] | None = None

    def feed(self, line: str, at: float) -> list[Step]:
        """One stream line (without its newline); ``at`` is when it arrived."""
        self.lineno += 1
        try:
            line = line.rstrip("\r\n") if isinstance(line, str) else str(line)
            if not line.strip():
                return []
            return self._count(self._line(line, at))
        except Exception:  # a surprise in one line must neither lose it nor stop the stream
            return [self._raw(line, at)]

    def finish(self) -> list[Step]:
        """Flush anything buffered at the end of the stream (and the error of a silent failure)."""
        try:
            steps = self._count(self._end())
        except Exception:
            steps = []
        return steps + self._exit_error()

    def agent_exited(self, code: int, stderr: Callable[[], list[str]], at: float) -> None:
        """How the agent ended: its exit code and a reader of its last stderr lines (read at
        ``finish``, once every line has been drained)."""
        self._exit = (code, stderr, at)

    def _count(self, steps: list[Step]) -> list[Step]:
        self.parsed += sum(1 for s in steps if s.kind != "raw")
        return steps

    def _exit_error(self) -> list[Step]:
        if self._exit is None or self._exit[0] == 0 or self.parsed:
            return []
        code, stderr, at = self._exit
        try:
            lines = [line for line in stderr() if line.strip()][-STDERR_LINES:]
        except Exception:
            lines = []
        said = "\n".join(lines) if lines else "(nothing on stderr either)"
        how = f"was ended by signal {-code}" if code < 0 else f"exited with code {code}"
        step = self._step("error", at, f"the agent {how} and printed nothing readable on stdout; "
                                       f"its stderr ends:\n{said}")
        step.line = 0  # from no stdout line
        return [step]

    def _end(self) -> list[Step]:
        """Steps held back until the end of the stream."""
        return []

    def _line(self, line: str, at: float) -> list[Step]:
        raise NotImplementedError

    def _step(self, kind: str, at: float, text: Any = "", *, whole_size: bool = False,
              **fields: Any) -> Step:
        """A step from the current line; text past TEXT_LIMIT is cut, ``size`` keeps its length."""
        text = as_text(text)
        size = len(text) if whole_size or len(text) > TEXT_LIMIT else None
        return Step(at=at, kind=kind, text=text[:TEXT_LIMIT], size=size, line=self.lineno, **fields)

    def _raw(self, line: Any, at: float) -> Step:
        return self._step("raw", at, line if isinstance(line, str) else repr(line))

    def _tool_call(self, at: float, tool: Any, call_id: Any, args: Any, text: Any = "") -> Step:
        tool, call_id = ident(tool), ident(call_id)
        if tool is not None and call_id is not None:
            self._tools[call_id] = tool
        return self._step("tool_call", at, text, tool=tool, call_id=call_id, args=tool_args(args))

    def _tool_result(self, at: float, tool: Any, call_id: Any, text: str,
                     prefix: str = "") -> Step:
        call_id = ident(call_id)
        tool = ident(tool) or (self._tools.get(call_id) if call_id is not None else None)
        return self._step("tool_result", at, prefix + text, whole_size=True, tool=tool,
                          call_id=call_id)


class JsonLines(Normalizer):
    """One JSON object per line; ``_event`` returns None for an object it does not understand."""

    def _line(self, line: str, at: float) -> list[Step]:
        try:
            event = json.loads(line)
        except ValueError:
            event = None
        return self._object(event, line, at)

    def _object(self, event: Any, line: str, at: float) -> list[Step]:
        """The steps of one decoded line (``event`` is None where the line is not JSON)."""
        steps = self._event(event, at) if isinstance(event, dict) else None
        return [self._raw(line, at)] if steps is None else steps

    def _event(self, event: dict[str, Any], at: float) -> list[Step] | None:
        raise NotImplementedError
