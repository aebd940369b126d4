"""Token usage, one shape for the four APIs, and the incremental reader a meter feeds.

Each API counts differently (Anthropic's ``input_tokens`` leaves out cache reads and writes;
OpenAI and Gemini count them inside the prompt total; Gemini counts thinking apart from the
candidates). `Usage` is what a bill needs, the same for all: ``input_tokens`` is every prompt
token including cached ones, ``cached_tokens`` the part read from a cache, ``cache_write_tokens``
the part written to one (Anthropic bills it higher), ``output_tokens`` every generated token
including reasoning, ``reasoning_tokens`` the reasoning part, for information.

`UsageReader` takes a reply's bytes as they pass (``feed``), holds at most one bounded SSE
event or a bounded JSON body (past that it catches only the usage and model keys, see
`catcher`), and says at the end (``close``) what it read.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from agent2rl_tui.llm.catcher import KeyCatcher
from agent2rl_tui.llm.sse import SseDecoder


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass
class Metered:
    """What a reader found in one reply: its usage (None when the reply reported none), the model
    that answered, and whether the stream reached its own end (a stream cut short has none)."""

    usage: Usage | None = None
    model: str | None = None
    complete: bool = False
    events: int = 0
    errors: list[str] = field(default_factory=list)


# A protocol's reading of one parsed object (an SSE event's data, or a whole JSON body) into
# the running `Metered`. ``event`` is the SSE event's type ("message" when the stream names
# none, as SSE defines), None for a whole JSON body.
ObjectHandler = Callable[[str | None, dict, Metered], None]


class UsageReader:
    """Feed a reply's bytes in order; ``close()`` returns what was metered.

    ``streaming`` follows the reply's Content-Type (``text/event-stream``); otherwise the body
    is one JSON object, parsed whole up to ``max_body`` bytes and past that read by a
    `KeyCatcher` for ``watch`` (the protocol's usage and model keys)."""

    def __init__(self, handle: ObjectHandler, streaming: bool, watch: tuple[str, ...],
                 max_body: int = 16 << 20, max_event: int = 4 << 20) -> None:
        self._handle = handle
        self._streaming = streaming
        self._watch = watch
        self._max_body = max_body
        self.metered = Metered()
        self._sse = SseDecoder(max_event=max_event, watch=watch) if streaming else None
        self._body = bytearray()
        self._catcher: KeyCatcher | None = None
        self._closed = False

    def feed(self, chunk: bytes) -> None:
        if self._sse is not None:
            for ev in self._sse.feed(chunk):
                self._event(ev.event or "message", ev.data, ev.caught)
            return
        if self._catcher is not None:
            self._catcher.feed(chunk)
            return
        self._body += chunk
        if len(self._body) > self._max_body:
            self._catcher = KeyCatcher(self._watch)
            self._catcher.feed(bytes(self._body))
            self._body = bytearray()

    def close(self) -> Metered:
        if self._closed:
            return self.metered
        self._closed = True
        if self._sse is not None:
            for ev in self._sse.close():
                self._event(ev.event or "message", ev.data, ev.caught)
            return self.metered
        if self._catcher is not None:
            self._object(None, self._catcher.result(), caught=True)
            return self.metered
        if self._body.strip():
            try:
                obj = json.loads(self._body)
            except ValueError as exc:
                self.metered.errors.append(f"body is not JSON: {exc}")
                return self.metered
            if isinstance(obj, dict):
                self._object(None, obj)
            elif isinstance(obj, list):  # Gemini's non-SSE stream: a JSON array of responses
                for item in obj:
                    if isinstance(item, dict):
                        self._object(None, item)
        return self.metered

    def _event(self, event: str, data: str | None, caught: dict[str, object] | None) -> None:
        self.metered.events += 1
        if data is None:
            self._object(event, dict(caught or {}), caught=True)
            return
        if data.strip() == "[DONE]":
            self.metered.complete = True
            return
        try:
            obj = json.loads(data)
        except ValueError:
            self.metered.errors.append(f"event {event or '?'} is not JSON")
            return
        if isinstance(obj, dict):
            self._object(event, obj)

    def _object(self, event: str | None, obj: dict, caught: bool = False) -> None:
        if caught:
            obj = {"__caught__": True, **obj}
        self._handle(event, obj, self.metered)


def as_int(value: object) -> int:
    """A token count from JSON: ints and integral floats; anything else is 0."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return 0
