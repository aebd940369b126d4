"""Bodies the meter reads or writes itself: a request's JSON, a compressed reply for the usage
reader, an error reply's message, and the meter's own answers in each API's error shape.

Kept apart from the handler: these are pure functions of bytes (no socket, no record), each
bounded in what it keeps.
"""

from __future__ import annotations

import json
import zlib
from typing import Any

from agent2rl_tui.llm.protocols import WireFormat
from agent2rl_tui.llm.usage import UsageReader

INFLATE_STEP = 1 << 20  # a compressed reply reaches the usage reader at most this many bytes at a time


def error_body(fmt: WireFormat, status: int, message: str, *, quota: bool = False) -> bytes:
    """An answer of the meter's own, in the API's error shape."""
    obj = fmt.error_json(status, message)
    err = obj.get("error") if isinstance(obj, dict) else None
    if isinstance(err, dict):
        if fmt.name in ("chat", "responses") and quota:
            err["type"] = err["code"] = "insufficient_quota"  # what OpenAI answers past a budget: not retried
        if fmt.name == "gemini" and status in (502, 503):
            err["status"] = "UNAVAILABLE"
    return json.dumps(obj).encode()


def error_message(body: bytes, status: int, reason: str) -> str:
    """What an error reply says (``error.message`` of any of the four shapes), else its status."""
    try:
        obj = json.loads(body)
    except ValueError:
        text = body.decode("utf-8", "replace").strip()
        return f"HTTP {status} {reason}" + (f": {text[:300]}" if text else "")
    if isinstance(obj, list) and obj and isinstance(obj[0], dict):
        obj = obj[0]
    if isinstance(obj, dict):
        err = obj.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return f"HTTP {status}: {err['message']}"
        if isinstance(err, str):
            return f"HTTP {status}: {err}"
        if isinstance(obj.get("message"), str):
            return f"HTTP {status}: {obj['message']}"
    return f"HTTP {status} {reason}"


class Inflater:
    """Feeds a gzip or deflate reply to the reader decompressed, 1 MiB at a time."""

    def __init__(self, reader: UsageReader) -> None:
        self.reader = reader
        self.d = zlib.decompressobj(47)  # gzip or zlib, by their headers

    def feed(self, data: bytes) -> None:
        out = self.d.decompress(data, INFLATE_STEP)
        self.reader.feed(out)
        while self.d.unconsumed_tail:
            self.reader.feed(self.d.decompress(self.d.unconsumed_tail, INFLATE_STEP))


def json_body(body: bytes, content_encoding: str | None) -> dict[str, Any] | None:
    """A request body as a JSON object (gzip or deflate undone), or None when it is not one."""
    encoding = (content_encoding or "").strip().lower()
    try:
        if encoding == "gzip":
            body = zlib.decompress(body, 47)
        elif encoding == "deflate":
            body = zlib.decompress(body)
        elif encoding not in ("", "identity"):
            return None
        obj = json.loads(body)
    except (ValueError, zlib.error):
        return None
    return obj if isinstance(obj, dict) else None
