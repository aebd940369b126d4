"""Server-sent events: framing a reply, and reading a stream incrementally in bounded memory.

Every streaming driver API (Anthropic, OpenAI Responses and Chat Completions, Gemini with
``alt=sse``) frames its stream as SSE. The server side needs one encoder; the meter needs a
decoder that is fed bytes as they pass, chunk by chunk, and never holds more than one event
(and not even that when an event is huge: see `SseDecoder`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

from agent2rl_tui.llm.catcher import KeyCatcher


def encode(data: object, event: str | None = None, newline: str = "\n") -> bytes:
    """One SSE event: an optional ``event:`` line, one ``data:`` line (compact JSON, or the
    string as is), and the blank line that ends it. Gemini ends lines with CRLF."""
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    head = f"event: {event}{newline}" if event else ""
    return f"{head}data: {text}{newline}{newline}".encode()


@dataclass
class SseEvent:
    """One decoded event. ``data`` is the joined data lines; when the event was larger than the
    decoder's limit it is None and ``caught`` holds the values of the watched keys instead."""

    event: str | None
    data: str | None
    caught: dict[str, object] | None = None


class SseDecoder:
    """Feed bytes, get events. Lines may end in LF, CR or CRLF (Gemini sends CRLF).

    Memory is bounded: an event whose data grows past ``max_event`` bytes is not kept; from
    then on its bytes only pass through a `KeyCatcher` watching ``watch`` (the keys that carry
    usage and model), so a 50 MB event costs what its usage object costs. A partial line is
    kept until its end arrives, also bounded by ``max_event``.
    """

    def __init__(self, max_event: int = 4 << 20, watch: tuple[str, ...] = ()) -> None:
        self.max_event = max_event
        self.watch = watch
        self._line = bytearray()
        self._pending_cr = False
        self._event: str | None = None
        self._data: list[bytes] = []
        self._size = 0
        self._catcher: KeyCatcher | None = None
        self._has_data = False
        self._line_overflow = False

    def feed(self, chunk: bytes) -> Iterator[SseEvent]:
        start = 0
        n = len(chunk)
        if self._pending_cr and n and chunk[0:1] == b"\n":
            start = 1  # the LF of a CRLF split across chunks
        self._pending_cr = False
        while start < n:
            cut = _next_eol(chunk, start)
            if cut < 0:
                self._extend_line(chunk[start:])
                break
            self._extend_line(chunk[start:cut])
            if chunk[cut:cut + 1] == b"\r":
                if cut + 1 < n:
                    start = cut + 2 if chunk[cut + 1:cut + 2] == b"\n" else cut + 1
                else:
                    self._pending_cr = True
                    start = n
            else:
                start = cut + 1
            ev = self._end_line()
            if ev is not None:
                yield ev

    def close(self) -> Iterator[SseEvent]:
        """The stream ended: an event without its blank line is still dispatched."""
        if self._line or self._line_overflow:
            ev = self._end_line()
            if ev is not None:
                yield ev
        ev = self._dispatch()
        if ev is not None:
            yield ev

    # -- lines
    def _extend_line(self, part: bytes) -> None:
        if self._line_overflow:
            self._spill(part)
            return
        self._line += part
        if len(self._line) > self.max_event:
            # A single line past the limit: only a data line can be that long; stream it.
            line = bytes(self._line)
            self._line.clear()
            self._line_overflow = True
            if line.startswith(b"data:"):
                value = line[5:]
                self._begin_data_line(value[1:] if value.startswith(b" ") else value, streaming=True)
            else:
                self._spill(b"")

    def _end_line(self) -> SseEvent | None:
        if self._line_overflow:
            self._line_overflow = False
            return None
        line = bytes(self._line)
        self._line.clear()
        if not line:
            return self._dispatch()
        if line.startswith(b":"):
            return None
        field, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if field == b"event":
            self._event = value.decode("utf-8", "replace")
        elif field == b"data":
            self._begin_data_line(value, streaming=False)
        return None

    def _begin_data_line(self, value: bytes, streaming: bool) -> None:
        sep = b"\n" if self._has_data else b""
        self._has_data = True
        if self._catcher is not None:
            self._catcher.feed(sep + value)
            return
        self._size += len(sep) + len(value)
        if self._size > self.max_event or streaming:
            self._catcher = KeyCatcher(self.watch)
            for part in self._data:
                self._catcher.feed(part)
            self._catcher.feed(sep + value)
            self._data = []
            return
        self._data.append(sep + value)

    def _spill(self, part: bytes) -> None:
        if self._catcher is not None:
            self._catcher.feed(part)

    def _dispatch(self) -> SseEvent | None:
        if not self._has_data:
            self._event = None
            return None
        if self._catcher is not None:
            ev = SseEvent(self._event, None, self._catcher.result())
        else:
            ev = SseEvent(self._event, b"".join(self._data).decode("utf-8", "replace"))
        self._event, self._data, self._size, self._catcher, self._has_data = None, [], 0, None, False
        return ev


def _next_eol(chunk: bytes, start: int) -> int:
    lf = chunk.find(b"\n", start)
    cr = chunk.find(b"\r", start)
    if lf < 0:
        return cr
    if cr < 0:
        return lf
    return min(lf, cr)
