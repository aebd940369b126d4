"""Catch the values of a few JSON keys in a byte stream too large to keep.

A meter must read the usage of a reply it only passes along: a non-streaming body of many
megabytes, or one huge SSE event (OpenAI's ``response.completed`` repeats the whole output).
Parsing it whole would hold it whole; instead `KeyCatcher` scans the bytes once for
``"usage":`` (or any key named) and keeps only the value that follows, bounded. Inside a
JSON string every quote is escaped, so the marker ``"key":`` cannot match text inside a
string value; the last occurrence of a key wins (a usage object is reported at the end).
"""

from __future__ import annotations

import json

_WS = b" \t\r\n"


class KeyCatcher:
    def __init__(self, keys: tuple[str, ...] | list[str], limit: int = 1 << 16) -> None:
        self._markers = [(k, f'"{k}":'.encode()) for k in keys]
        self._keep = max((len(m) for _, m in self._markers), default=1) - 1
        self._limit = limit
        self._tail = b""
        self._key: str | None = None
        self._value = bytearray()
        self._depth = 0
        self._in_string = False
        self._escape = False
        self._kind = b""
        self._found: dict[str, bytes] = {}

    def feed(self, data: bytes) -> None:
        if not self._markers:
            return
        buf = self._tail + data if self._tail else data
        self._tail = b""
        i, n = 0, len(buf)
        while i < n:
            if self._key is not None:
                i = self._continue(buf, i)
                continue
            best: tuple[int, str, bytes] | None = None
            for key, marker in self._markers:
                j = buf.find(marker, i)
                if j >= 0 and (best is None or j < best[0]):
                    best = (j, key, marker)
            if best is None:
                self._tail = bytes(buf[max(i, n - self._keep):])
                return
            i = best[0] + len(best[2])
            self._key, self._value, self._kind = best[1], bytearray(), b""
            self._depth, self._in_string, self._escape = 0, False, False

    def _continue(self, buf: bytes, i: int) -> int:
        n = len(buf)
        if not self._kind:
            while i < n and buf[i] in _WS:
                i += 1
            if i == n:
                return n
            self._kind = buf[i:i + 1]
        start = i
        while i < n:
            c = buf[i]
            if self._in_string:
                if self._escape:
                    self._escape = False
                elif c == 0x5C:  # backslash
                    self._escape = True
                elif c == 0x22:  # quote
                    self._in_string = False
                    if self._kind == b'"':
                        return self._finish(buf, start, i + 1)
            elif c == 0x22:
                self._in_string = True
            elif c in b"{[":
                self._depth += 1
            elif c in b"}]":
                if self._kind in (b"{", b"["):
                    self._depth -= 1
                    if self._depth == 0:
                        return self._finish(buf, start, i + 1)
                else:
                    return self._finish(buf, start, i)
            elif c in b",\r\n\t " and self._kind not in (b"{", b"[", b'"'):
                return self._finish(buf, start, i)
            i += 1
        self._value += buf[start:n]
        if len(self._value) > self._limit:
            self._key = None
        return n

    def _finish(self, buf: bytes, start: int, end: int) -> int:
        self._value += buf[start:end]
        if self._key is not None and len(self._value) <= self._limit:
            self._found[self._key] = bytes(self._value)
        self._key = None
        return end

    def result(self) -> dict[str, object]:
        """The last complete value seen for each key, parsed (values that do not parse are left out)."""
        out: dict[str, object] = {}
        for key, raw in self._found.items():
            try:
                out[key] = json.loads(raw)
            except ValueError:
                continue
        return out
