"""The meter's HTTP side: a request in from the agent, the reply relayed back as it comes.

Kept apart from the account and the upstream because this is the part that faces untrusted
bytes: only the run's own user is served (anyone else gets 403 and is never forwarded nor
counted), only the routes the meter meters are forwarded (the four APIs' generation and
token-count calls, and model listings; anything else is 404 naming the route), only with this
run's token (swapped for the real key, ``keys``; anything else is 401), a request body is read
whole to ``MAX_BODY`` (413 past it), at most ``MAX_CALLS`` calls are handled at once, a reply
passes in ``READ_SIZE`` reads and an error body is kept to ``MAX_ERROR_BODY``. Each reply's bytes
go to the usage reader before the agent, the call's tokens are counted before its last bytes
leave (so a cap sees them at the next call), and a reply the agent stops reading is still read
from the upstream to its end and counted (what it cost is billed all the same).
"""

from __future__ import annotations

import http.client
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import parse_qsl, urlencode, urlsplit

from agent2rl_tui.llm.meter.accounting import Call, secrets_of
from agent2rl_tui.llm.meter.bodies import Inflater, error_body, error_message, json_body
from agent2rl_tui.llm.meter.keys import NotThisRun
from agent2rl_tui.llm.meter.upstream import HOP_BY_HOP, UpstreamLink, connection_listed, forwarded_headers
from agent2rl_tui.llm.prices import STAND_IN_HEADER
from agent2rl_tui.llm.protocols import (
    COUNT_TOKENS,
    GENERATE,
    BadRequest,
    Route,
    WireFormat,
    error_format,
    recognise,
    usage_reader,
)
from agent2rl_tui.util.peer import is_owner

if TYPE_CHECKING:
    from agent2rl_tui.llm.meter.proxy import Meter

MAX_BODY = 64 << 20
MAX_CALLS = 64
READ_SIZE = 64 << 10
MAX_ERROR_BODY = 64 << 10
FOREIGN_EVENTS_KEPT = 20
"""Requests from other users recorded one by one; after that every 100th."""
DROPPED = frozenset({"host", "content-length", "accept-encoding", "expect"})
"""Request headers never forwarded as the agent sent them (the meter sets its own)."""

Framing = Literal["none", "length", "chunked", "close"]
"""How a reply's body goes to the agent: none, to its Content-Length, chunked, or until the
connection closes (an HTTP/1.0 agent)."""
LISTING = re.compile(r"^(/v1|/v1beta|/v1alpha)?/models(/[^/:]+)*$")
"""Model listings (``GET /v1/models``, ``GET /v1beta/models/gemini-2.5-pro``): free, forwarded."""


def forwarded_route(method: str, path: str, route: Route | None) -> bool:
    """Whether the meter forwards ``method path``: a call it meters, or a model listing."""
    return route is not None or (method in ("GET", "HEAD") and LISTING.match(path.rstrip("/") or "/") is not None)


def not_forwarded(method: str, path: str) -> str:
    """The 404's message: the route, and what the meter does forward."""
    return (f"agent2rl-tui's meter does not forward {method} {path[:200]}: it forwards only the model calls it "
            "meters (Anthropic /v1/messages, OpenAI /v1/responses and /v1/chat/completions, Gemini "
            ":generateContent and :streamGenerateContent, their token counts) and model listings")


class _TooLarge(ValueError):
    pass


@dataclass(eq=False)
class _Reply:
    """A reply on its way to the agent: how its body is framed, what reads it, how it ended."""

    resp: http.client.HTTPResponse
    framing: Framing
    feed: Callable[[bytes], None] | None  # the usage reader's (None: the reply is not read)
    error_buf: bytearray | None  # an error reply's first MAX_ERROR_BODY bytes
    cut: str | None = None  # why the driver API broke the reply off
    gone: bool = False  # the stopping meter recorded the call
    left: bool = False  # the agent went away: the rest is read from the upstream and counted, not sent

    @property
    def ended(self) -> bool:
        """The reply reached the agent whole (as far as the upstream sent it)."""
        return self.cut is None and not self.gone and not self.left

    def read(self) -> bytes:
        """The next bytes from the upstream; b"" at the end, or when it broke off (``cut`` says so)."""
        try:
            chunk = self.resp.read1(READ_SIZE)
        except (OSError, http.client.HTTPException, ValueError) as exc:
            self.cut = f"the driver API broke off the reply: {exc.__class__.__name__}: {exc}"
            return b""
        if not chunk and self.resp.length:  # fewer bytes than its Content-Length said
            self.cut = f"the driver API closed the connection {self.resp.length:,} bytes before the reply's end"
        return chunk

    def take(self, call: Call, chunk: bytes) -> bool:
        """Count and read ``chunk`` for the call; False when the call is already recorded (the meter
        stopped)."""
        with call.lock:
            if call.done:
                self.gone = True
                return False
            call.response_bytes += len(chunk)
            if self.feed is not None:
                self.feed(chunk)
            if self.error_buf is not None and len(self.error_buf) < MAX_ERROR_BODY:
                self.error_buf += chunk[:MAX_ERROR_BODY - len(self.error_buf)]
        return True

    def error(self) -> str | None:
        """What the row says went wrong: the error reply's message, and why the reply was cut."""
        error = None
        if self.error_buf is not None:
            error = error_message(bytes(self.error_buf), self.resp.status, self.resp.reason)
        if self.cut is not None:
            return self.cut if error is None else f"{error}; {self.cut}"
        if self.left:
            return "the agent closed the connection before the reply ended (read to its end and counted)"
        if self.gone:
            return "the meter was stopped before the reply ended"
        return error


def _usage_feed(call: Call, route: Route | None, resp: http.client.HTTPResponse,
                content_type: str | None) -> Callable[[bytes], None] | None:
    """Give a generation call its usage reader, and return what feeds it the reply's bytes (None:
    not a generation call, or a content encoding the meter cannot undo)."""
    if route is None or route.endpoint != GENERATE:
        return None
    call.reader = usage_reader(route.fmt.name, content_type)
    encoding = (resp.getheader("Content-Encoding") or "identity").strip().lower()
    if encoding in ("gzip", "deflate", "x-gzip"):
        return Inflater(call.reader).feed
    if encoding == "identity":
        return call.reader.feed
    return None


def _read_call(call: Call, route: Route, body: bytes, content_encoding: str | None) -> tuple[bytes, bool]:
    """The model a generation or count-tokens request asks for, into the call; the body to forward,
    and whether it was re-encoded (a Chat Completions stream made to ask for its usage: sent plain)."""
    obj = json_body(body, content_encoding)
    if obj is None:
        return body, False
    if route.endpoint == GENERATE:
        call.max_output = route.fmt.max_output(obj)
    reencoded = route.endpoint == GENERATE and route.fmt.ask_for_usage(obj)
    if reencoded:
        body = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()
    try:
        request = route.fmt.parse(route.endpoint, route.path, route.query, obj, len(body))
        call.model = request.model or None
    except (BadRequest, ValueError, TypeError, AttributeError):
        pass  # forwarded as it is: the API says what is wrong with it
    return body, reencoded


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # a reply's head and body go at once, not 40 ms apart
    server: MeterServer
    _link: UpstreamLink

    def setup(self) -> None:
        super().setup()
        meter = self.server.meter
        self._link = UpstreamLink(meter.upstream, meter.connect_timeout_s, meter.read_timeout_s)

    def do_GET(self) -> None:
        self._proxy()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = do_GET

    def log_message(self, format: str, *args: Any) -> None:  # the record says it all
        return

    def finish(self) -> None:
        self._link.drop()
        super().finish()

    # -- the request ------------------------------------------------------------------------
    def _proxy(self) -> None:
        meter = self.server.meter
        host, port = self.server.server_address[:2]  # a TCP server's: (str, int)
        if not is_owner(self.client_address[:2], (str(host), port)):
            self._foreign(meter)
            return
        target = self.path
        if target.startswith(("http://", "https://")):  # absolute form: keep the path and query
            parts = urlsplit(target)
            target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        headers = list(self.headers.items())
        call = Call(time.time(), time.monotonic(), self.command, target.split("?", 1)[0],
                    secrets_of(headers, target) + meter.keys.secrets)
        route = recognise(self.command, target)
        fmt = route.fmt if route is not None else error_format(target, dict(self.headers))
        if route is not None:
            call.protocol, call.endpoint = route.fmt.name, route.endpoint
        with meter.under_way(call):
            self._handle(meter, call, route, fmt, target, headers)

    def _handle(self, meter: Meter, call: Call, route: Route | None, fmt: WireFormat, target: str,
                headers: list[tuple[str, str]]) -> None:
        body = self._read_request(meter, call, fmt)
        if body is None:
            return
        call.request_bytes = len(body)
        if not forwarded_route(self.command, call.path, route):
            self._answer(meter, call, fmt, 404, not_forwarded(self.command, call.path))
            return
        try:
            headers, target = self._with_keys(meter, headers, target)
        except NotThisRun as exc:
            self._answer(meter, call, fmt, 401, f"agent2rl-tui's meter: {exc}")
            return
        drop = set(DROPPED)
        if route is not None and route.endpoint in (GENERATE, COUNT_TOKENS):
            body, reencoded = _read_call(call, route, body, self.headers.get("Content-Encoding"))
            if reencoded:
                drop.add("content-encoding")
        if route is not None and route.endpoint == GENERATE:
            why = meter.ledger.admit(call, len(body), gone=lambda: call.done)
            if why is not None:
                self._answer(meter, call, fmt, 429, why, refused=True)
                return
        self._forward(meter, call, route, fmt, target, headers, body, drop)

    def _with_keys(self, meter: Meter, headers: list[tuple[str, str]], target: str
                   ) -> tuple[list[tuple[str, str]], str]:
        """The headers and target with this run's token swapped for the key the meter holds
        (``keys.KeyRing``); raises `NotThisRun` for a request without one."""
        if not meter.keys.holds:
            return headers, target
        path, _, query = target.partition("?")
        pairs = parse_qsl(query, keep_blank_values=True)
        headers, swapped = meter.keys.swap(headers, pairs)
        if swapped != pairs:
            target = f"{path}?{urlencode(swapped)}"
        return headers, target

    def _read_request(self, meter: Meter, call: Call, fmt: WireFormat) -> bytes | None:
        """The request's body; None when it is too large (answered 413) or could not be read
        (recorded)."""
        try:
            return self._body()
        except _TooLarge as exc:
            self.close_connection = True
            self._answer(meter, call, fmt, 413, str(exc))
        except (OSError, ValueError) as exc:  # the client broke off while sending
            self.close_connection = True
            with call.lock:
                call.done = True
            meter.ledger.record(call, None, complete=False, error=f"the request could not be read: {exc}")
        return None

    def _body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            return self._chunked_body()
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            raise _TooLarge(f"the request body is over the meter's limit of {MAX_BODY >> 20} MiB")
        if length < 0:
            raise ValueError("a negative Content-Length")
        data = self.rfile.read(length) if length else b""
        if len(data) < length:
            raise ValueError(f"the body ended after {len(data)} of {length} bytes")
        return data

    def _chunked_body(self) -> bytes:
        out = bytearray()
        while True:
            size = int(self.rfile.readline(1024).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                    pass
                return bytes(out)
            if len(out) + size > MAX_BODY:
                raise _TooLarge(f"the request body is over the meter's limit of {MAX_BODY >> 20} MiB")
            out += self.rfile.read(size)
            self.rfile.readline(1024)

    def _forward(self, meter: Meter, call: Call, route: Route | None, fmt: WireFormat, target: str,
                 headers: list[tuple[str, str]], body: bytes, drop: set[str]) -> None:
        with_length = bool(body) or self.command in ("POST", "PUT", "PATCH")
        send = forwarded_headers(headers, meter.upstream, drop, content_length=len(body) if with_length else None)
        try:
            resp = self._link.send(self.command, target, send, body, call.attach)
        except (OSError, http.client.HTTPException) as exc:
            self._answer(meter, call, fmt, 502, f"the meter could not reach the driver API at {meter.upstream.display}: "
                                                f"{exc.__class__.__name__}: {exc}")
            return
        self._relay(meter, call, route, resp)

    # -- the reply --------------------------------------------------------------------------
    def _relay(self, meter: Meter, call: Call, route: Route | None, resp: http.client.HTTPResponse) -> None:
        """The upstream's reply to the agent as it comes, its usage read on the way; the call recorded."""
        call.status = resp.status
        call.stand_in = bool(resp.getheader(STAND_IN_HEADER))
        call.ttfb_s = round(time.monotonic() - call.started, 4)
        content_type = resp.getheader("Content-Type")
        call.streamed = (content_type or "").split(";")[0].strip().lower() == "text/event-stream"
        no_body = self.command == "HEAD" or resp.status in (204, 304) or 100 <= resp.status < 200
        feed = None if no_body else _usage_feed(call, route, resp, content_type)
        reply = _Reply(resp, self._reply_head(resp, no_body), feed, bytearray() if resp.status >= 400 else None)
        try:
            self.end_headers()
        except OSError:
            reply.left = True  # still read to its end and counted
        self._pass_body(meter, call, reply)
        self._end_reply(meter, call, reply)
        self._finish(meter, call, complete=reply.ended, error=reply.error(), check_end=True)

    def _reply_head(self, resp: http.client.HTTPResponse, no_body: bool) -> Framing:
        """The reply's status and headers (hop-by-hop ones dropped) for the agent; how its body goes."""
        listed = connection_listed([resp.getheader("Connection") or ""])
        self.send_response_only(resp.status, resp.reason)
        for k, v in resp.getheaders():
            low = k.lower()
            if low in HOP_BY_HOP or low in listed or (low == "content-length" and not no_body):
                continue
            self.send_header(k, v)
        if no_body:
            return "none"
        if resp.length is not None:
            self.send_header("Content-Length", str(resp.length))
            return "length"
        if self.request_version == "HTTP/1.1":
            self.send_header("Transfer-Encoding", "chunked")
            return "chunked"
        self.send_header("Connection", "close")
        return "close"

    def _pass_body(self, meter: Meter, call: Call, reply: _Reply) -> None:
        """The reply's body to the agent read by read, each read counted and fed to the usage reader
        first; a reply of known length counted before its last bytes go."""
        while reply.framing != "none":
            chunk = reply.read()
            if not chunk or not reply.take(call, chunk):
                return
            if reply.framing == "length" and reply.resp.length == 0:
                self._settle(meter, call)  # these are the reply's last bytes
            if reply.left:
                continue
            try:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk) if reply.framing == "chunked" else chunk)
            except OSError:
                reply.left = True

    def _end_reply(self, meter: Meter, call: Call, reply: _Reply) -> None:
        """A chunked reply's last chunk (the call counted first); the connections that cannot be kept
        dropped."""
        if reply.framing == "chunked" and reply.ended:
            self._settle(meter, call)
            try:
                self.wfile.write(b"0\r\n\r\n")
            except OSError:
                reply.left = True
        lost = not reply.ended or reply.framing == "close"
        if lost or reply.resp.will_close or not reply.resp.isclosed():
            self._link.drop()
        if lost:
            self.close_connection = True

    def _settle(self, meter: Meter, call: Call) -> None:
        """Read the call's usage and count it before the reply's last bytes go to the agent."""
        with call.lock:
            if call.done or call.reader is None:
                return
            call.metered, call.reader = call.reader.close(), None
        meter.ledger.count(call, call.metered)

    def _finish(self, meter: Meter, call: Call, *, complete: bool, error: str | None, check_end: bool = False) -> None:
        with call.lock:
            if call.done:
                return
            call.done = True
            metered = call.reader.close() if call.reader is not None else call.metered
        if check_end and complete and metered is not None and 200 <= call.status < 300 and not metered.complete:
            complete = False
            error = error or "the reply ended before its own end (no final event)"
        if metered is not None and call.status < 400 and metered.errors:
            error = error or "; ".join(metered.errors)[:500]
        meter.ledger.record(call, metered, complete=complete, error=error)

    # -- the meter's own answers ------------------------------------------------------------
    def _foreign(self, meter: Meter) -> None:
        """Another user of the machine: 403, never forwarded nor counted as the run's call (it could
        spend the run's caps or forge its tokens); the first ones recorded as events."""
        meter.foreign += 1
        if meter.foreign <= FOREIGN_EVENTS_KEPT or meter.foreign % 100 == 0:
            meter.recorder.event("foreign_request", f"refused a {self.command} from another user of this machine "
                                 f"({meter.foreign} so far)", {"refused": meter.foreign})
        data = b'{"error": {"type": "permission_error", "message": "this meter serves only the user of its run"}}'
        self.close_connection = True
        try:
            self.send_response_only(403)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass

    def _answer(self, meter: Meter, call: Call, fmt: WireFormat, status: int, message: str, *,
                refused: bool = False) -> None:
        """An answer of the meter's own (a cap, an unreachable upstream, a body too large), recorded."""
        data = error_body(fmt, status, message, quota=refused)
        call.status = status
        call.ttfb_s = round(time.monotonic() - call.started, 4)
        try:
            self.send_response_only(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if refused:
                self.send_header("x-should-retry", "false")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
        except OSError:
            self.close_connection = True
        with call.lock:
            if call.done:
                return
            call.done = True
        call.response_bytes = len(data)
        meter.ledger.record(call, None, complete=True, error=message, refused=refused)


class MeterServer(ThreadingHTTPServer):
    """The meter's listening socket: one thread per agent connection, each a `Handler`."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], meter: Meter) -> None:
        super().__init__(address, Handler)
        self.meter = meter
