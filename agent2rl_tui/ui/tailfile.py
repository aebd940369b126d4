"""Read a growing text file from its end, one bounded chunk at a time, without Textual.

Agent logs grow to gigabytes during a long run; the log pane must open one in well under a
second and must never read it whole. ``TailFile`` keeps a *window* of byte offsets
``[start_offset, end_offset)`` that always begins and ends on line boundaries:

- ``read_last`` opens the window on the last complete lines of the file;
- ``read_before`` widens it backwards by about one chunk (older lines);
- ``read_new`` widens it forwards with the complete lines appended since the last read;
- ``trim_start`` / ``trim_end`` narrow it when the caller drops lines to bound memory.

A last line without its newline is held back (not returned) until the newline arrives.
Every read is bounded: searching backwards for a line start gives up after
``max_line_bytes`` and forces a break there, so a file without newlines cannot make a read
scan the whole file. Lines are decoded as UTF-8 with ``errors="replace"``, a trailing
``\\r`` (CRLF) is dropped, a carriage-return progress line shows what follows its last
``\\r`` first (what a terminal would show) and then, marked, the text it overwrote (which a
terminal would hide), tabs are expanded, every other control character
(ANSI escapes too: colours are not interpreted) is shown as an escape
(``util.inert.one_line``: an agent's output never reaches the terminal raw), and lines are
cut at ``max_line_chars`` for display.

This module is the pure half of the log view (the toolong habit: a plain reader driven by a
cancellable worker), so it is tested without a UI.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO

from agent2rl_tui.util.inert import one_line

CHUNK_BYTES = 256 * 1024
"""Default size of one read from the end or backwards."""

MAX_LINE_BYTES = 1024 * 1024
"""A line longer than this (bytes) is broken when scanning backwards for its start."""

MAX_LINE_CHARS = 2000
"""Lines are cut to this many characters for display."""

_SCAN_BLOCK = 64 * 1024


def decode_lines(data: bytes, max_line_chars: int = MAX_LINE_CHARS) -> list[str]:
    """Split complete lines (``data`` ends at a line boundary) into display strings."""
    if not data:
        return []
    text = data.decode("utf-8", errors="replace")
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    out: list[str] = []
    for line in lines:
        if "\r" in line:
            line = line.rstrip("\r")
            if "\r" in line:  # what a terminal shows first, then what it overwrote (never hidden)
                head, last = line.rsplit("\r", 1)
                line = f"{last}  ⟨\\r over: {head[: max_line_chars]}⟩"
        if not line.isprintable():
            cut = len(line) > max_line_chars
            line = one_line(line[:max_line_chars].expandtabs(4)) + ("…" if cut else "")
        if len(line) > max_line_chars:
            line = line[: max_line_chars - 1] + "…"
        out.append(line)
    return out


class TailFile:
    """A window of complete lines over a file that may grow, shrink or be replaced."""

    def __init__(
        self,
        path: Path | str,
        *,
        max_line_bytes: int = MAX_LINE_BYTES,
        max_line_chars: int = MAX_LINE_CHARS,
    ) -> None:
        self.path = Path(path)
        self.max_line_bytes = max_line_bytes
        self.max_line_chars = max_line_chars
        self.start_offset = 0
        """Byte offset of the first line in the window."""
        self.end_offset = 0
        """Byte offset just past the last complete line in the window."""
        self.size = 0
        """File size at the last read."""
        self._read_pos = 0  # bytes consumed: end_offset + the held partial line
        self._pending = b""  # the held partial last line (its head, at most max_line_bytes)
        self._inode: tuple[int, int] | None = None

    @property
    def at_start(self) -> bool:
        """The window reaches the first byte of the file: nothing older to read."""
        return self.start_offset == 0

    @property
    def at_end(self) -> bool:
        """Everything up to the size seen at the last read is in the window or held."""
        return self._read_pos >= self.size

    @property
    def pending(self) -> str:
        """The partial last line held back until its newline arrives (for display only)."""
        return decode_lines(self._pending + b"\n", self.max_line_chars)[0] if self._pending else ""

    def read_last(self, max_bytes: int = CHUNK_BYTES) -> list[str]:
        """Reset the window to the last complete lines, reading about ``max_bytes``.

        Raises ``OSError`` (``FileNotFoundError``) when the file cannot be opened.
        """
        with open(self.path, "rb") as f:
            st = os.fstat(f.fileno())
            self._inode = (st.st_dev, st.st_ino)
            self.size = size = st.st_size
            tail_lo = max(0, size - max_bytes)
            f.seek(tail_lo)
            tail = f.read(size - tail_lo)
            nl = tail.rfind(b"\n")
            if nl != -1:
                end = tail_lo + nl + 1
            else:
                end = self._line_start(f, tail_lo)
            self._pending = self._read_head(f, end, size)
            self._read_pos = size
            self.start_offset = self.end_offset = end
            return self._read_before(f, max_bytes)

    def read_before(self, max_bytes: int = CHUNK_BYTES) -> list[str]:
        """Widen the window backwards by about ``max_bytes``; return the older lines, in order.

        Returns ``[]`` when the window already starts at the beginning of the file.
        """
        if self.start_offset == 0:
            return []
        with open(self.path, "rb") as f:
            return self._read_before(f, max_bytes)

    def read_new(self, max_bytes: int | None = None) -> list[str] | None:
        """Complete lines appended after the window (at most about ``max_bytes`` read).

        Returns ``None`` when the file shrank below what was read or was replaced by another
        file (rotation); the caller starts again with ``read_last``. A missing file also
        answers ``None``.
        """
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        if (st.st_dev, st.st_ino) != self._inode or st.st_size < self._read_pos:
            return None
        self.size = st.st_size
        if st.st_size == self._read_pos:
            return []
        want = st.st_size - self._read_pos
        if max_bytes is not None:
            want = min(want, max_bytes)
        with open(self.path, "rb") as f:
            f.seek(self._read_pos)
            data = f.read(want)
        base = self._read_pos
        self._read_pos += len(data)
        nl = data.rfind(b"\n")
        if nl == -1:
            room = self.max_line_bytes - len(self._pending)
            if room > 0:
                self._pending += data[:room]
            return []
        complete = self._pending + data[: nl + 1]
        self._pending = data[nl + 1 :][: self.max_line_bytes]
        self.end_offset = base + nl + 1
        return decode_lines(complete, self.max_line_chars)

    def backlog(self) -> int | None:
        """Bytes on disk past what was read; ``None``: the file shrank, was replaced or is gone."""
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        if (st.st_dev, st.st_ino) != self._inode or st.st_size < self._read_pos:
            return None
        return st.st_size - self._read_pos

    def trim_start(self, offset: int) -> None:
        """Forget the lines before ``offset`` (a line start inside the window)."""
        if not self.start_offset <= offset <= self.end_offset:
            raise ValueError(f"offset {offset} outside the window")
        self.start_offset = offset

    def trim_end(self, offset: int) -> None:
        """Forget the lines from ``offset`` (a line start inside the window) onwards."""
        if not self.start_offset <= offset <= self.end_offset:
            raise ValueError(f"offset {offset} outside the window")
        self.end_offset = self._read_pos = offset
        self._pending = b""

    # -- internals -----------------------------------------------------------------------

    def _read_before(self, f: BinaryIO, max_bytes: int) -> list[str]:
        start = self.start_offset
        if start == 0:
            return []
        lo = self._line_start(f, max(0, start - max(1, max_bytes)))
        f.seek(lo)
        data = f.read(start - lo)
        self.start_offset = lo
        return decode_lines(data, self.max_line_chars)

    def _line_start(self, f: BinaryIO, pos: int) -> int:
        """Offset of the start of the line that holds byte ``pos`` (bounded backward scan)."""
        floor = max(0, pos - self.max_line_bytes)
        hi = pos
        while hi > floor:
            lo = max(floor, hi - _SCAN_BLOCK)
            f.seek(lo)
            block = f.read(hi - lo)
            i = block.rfind(b"\n")
            if i != -1:
                return lo + i + 1
            hi = lo
        return floor

    def _read_head(self, f: BinaryIO, lo: int, hi: int) -> bytes:
        f.seek(lo)
        return f.read(min(hi - lo, self.max_line_bytes))
