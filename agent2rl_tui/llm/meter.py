"""The meter: a loopback proxy between a run's agent and its driver API that records every call.

What an agent CLI says about its own tokens is not a record: some report usage only at their
end (a run killed at its deadline loses it), some count it wrongly, none can be made to stop at
a budget. The meter sits on 127.0.0.1 where the agent's base URL points, forwards each request
to the real endpoint (or the scripted driver) and streams the answer back as it comes, chunk by
chunk, while it reads the usage from the bytes passing (``protocols.usage_reader``). Each call
becomes one row of ``llm_calls`` in run.db: protocol, endpoint, model, status, latency, tokens
(input, output, cached, cache writes, reasoning), cost from the price table (``prices``),
whether the reply reached its own end, and why not.

- Headers pass through both ways, hop-by-hop ones dropped; the API key passes through and is
  written nowhere (paths are recorded without their query, error texts with every key the
  request carried replaced by ``[key]``). The upstream is asked for identity encoding so the
  usage can be read; a gzip or deflate reply is still read (decompressed beside the bytes that
  pass unchanged).
- A Chat Completions stream that did not ask for usage is made to (``fmt.ask_for_usage``): its
  reply then ends with one more chunk (``choices: []`` and the usage), which the OpenAI clients
  read as the usage chunk they asked for.
- Memory is bounded whatever the upstream sends: replies pass in 64 KiB reads, the reader keeps
  at most one bounded event (``usage``), an error body is kept to 64 KiB; a request body is
  read whole to 64 MiB (413 past it), and at most 64 calls are handled at once.
- Caps (`Caps`): once the run's tokens (input + output, every recorded call) or its cost reach
  the cap, each further generation call is answered 429 in the API's own error shape, with
  ``x-should-retry: false`` (the Anthropic and OpenAI SDKs then do not retry; OpenAI's shape
  says ``insufficient_quota``), and recorded as refused. A call's tokens count before its
  reply's last bytes reach the agent, so the next call is checked against them. Calls already
  under way finish, so a cap can be passed by what was in flight when it was reached.
- The upstream unreachable: 502 in the API's error shape, recorded.
- Stopped (SIGTERM, or `Meter.stop`): no new connections; calls under way get a few seconds to
  end, then each is recorded as it stood (tokens as far as the reply came, ``complete`` 0).

Rows are written by one thread through `record.store.RunStore` (each row its own short
transaction, a busy timeout: the supervisor and the grader write the same run.db).

As a process (the first line of stdout is its base URL)::

    python -m agent2rl_tui.llm.meter --run-dir DIR --upstream URL [--port 0] [--max-tokens N]
                                     [--max-cost USD] [--prices FILE]

In process::

    with serve_meter(run_dir, upstream_url, caps=Caps(max_tokens=10_000)) as meter:
        meter.url        # base URL: http://127.0.0.1:PORT (point the agent's base-URL variable here)
        meter.flush()    # wait until every finished call is in run.db
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import queue
import signal
import socket
import sqlite3
import ssl
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import parse_qsl, urlsplit

from agent2rl_tui.llm.prices import PriceError, PriceTable, load_prices
from agent2rl_tui.llm.protocols import COUNT_TOKENS, GENERATE, BadRequest, WireFormat, error_format, recognise, usage_reader
from agent2rl_tui.llm.usage import Metered, Usage, UsageReader
from agent2rl_tui.record.store import RunStore, StoreError
from agent2rl_tui.util.peer import is_owner

HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection",
                        "te", "trailer", "trailers", "transfer-encoding", "upgrade"})
SECRET_HEADERS = ("authorization", "x-api-key", "x-goog-api-key", "api-key", "openai-api-key")
SECRET_QUERY = ("key", "api_key", "api-key")
MAX_BODY = 64 << 20
MAX_CALLS = 64
READ_SIZE = 64 << 10
MAX_ERROR_BODY = 64 << 10
NO_REPLY = 0  # the status of a call that ended before any reply reached the agent
FOREIGN_EVENTS_KEPT = 20
"""Requests from other users recorded one by one; after that every 100th."""


@dataclass(frozen=True)
class Caps:
    """A run's limits, None for none: tokens (input + output of every recorded call) and cost (USD,
    the priced calls; a call of a model without a price counts nothing towards it)."""

    max_tokens: int | None = None
    max_cost_usd: float | None = None

    def as_json(self) -> dict[str, Any]:
        return {"max_tokens": self.max_tokens, "max_cost_usd": self.max_cost_usd}


@dataclass(frozen=True)
class Upstream:
    """Where calls go: ``https://api.anthropic.com``, ``http://127.0.0.1:8123``, ``https://host/api/v1``.

    A request's path is appended to the upstream's path; when the upstream ends with the
    segment the path starts with (``…/v1`` and ``/v1/chat/completions``) it is not repeated,
    so an OpenAI-compatible base URL can be given as its users know it."""

    scheme: str
    host: str
    port: int
    prefix: str

    @classmethod
    def parse(cls, url: str) -> Upstream:
        parts = urlsplit(url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"the upstream must be an http:// or https:// URL (got {url!r})")
        if parts.username or parts.password or parts.query or parts.fragment:
            raise ValueError("the upstream URL takes no user, password, query or fragment: keys travel in the "
                             "agent's own headers")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return cls(parts.scheme, parts.hostname, port, parts.path.rstrip("/"))

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"

    @property
    def display(self) -> str:
        return f"{self.scheme}://{self.host_header}{self.prefix}"

    def target(self, target: str) -> str:
        if not self.prefix:
            return target
        last = self.prefix.rsplit("/", 1)[-1]
        if last and (target == f"/{last}" or target.startswith((f"/{last}/", f"/{last}?"))):
            target = target[len(last) + 1:] or "/"
        return self.prefix + target

    def connect(self, connect_timeout: float, read_timeout: float) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection
        if self.scheme == "https":
            conn = http.client.HTTPSConnection(self.host, self.port, timeout=connect_timeout,
                                               context=ssl.create_default_context())
        else:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=connect_timeout)
        conn.connect()
        if conn.sock is not None:
            conn.sock.settimeout(read_timeout)
        return conn


class _TooLarge(ValueError):
    pass


@dataclass(eq=False)
class _Call:
    """One call under way: what the row will say, guarded by ``lock`` (the handler feeds the
    reader under it; a stopping meter records the call under it)."""

    at: float
    started: float  # monotonic
    method: str
    path: str
    secrets: tuple[str, ...]
    protocol: str | None = None
    endpoint: str | None = None
    model: str | None = None  # as asked for
    status: int = NO_REPLY
    ttfb_s: float | None = None
    streamed: bool = False
    reader: UsageReader | None = None
    metered: Metered | None = None  # the reader's result, once closed before the reply's last bytes
    counted: bool = False  # its tokens and cost already in the run's totals
    request_bytes: int = 0
    response_bytes: int = 0
    done: bool = False
    upstream_sock: socket.socket | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Recorder:
    """Writes rows and events to run.db from one thread, in order."""

    def __init__(self, db: Path, log: TextIO | None) -> None:
        self.store = RunStore(db)  # migrates an older run.db to this schema
        self.log = log
        self.queue: queue.Queue[tuple[str, dict[str, Any]] | None] = queue.Queue()
        self.thread = threading.Thread(target=self._run, name="meter-recorder", daemon=True)
        self.thread.start()

    def row(self, row: dict[str, Any]) -> None:
        self.queue.put(("row", row))

    def event(self, kind: str, message: str, data: dict[str, Any]) -> None:
        self.queue.put(("event", {"kind": kind, "message": message, "data": data}))

    def flush(self) -> None:
        self.queue.join()

    def close(self) -> None:
        self.queue.put(None)
        self.thread.join(timeout=60)
        self.store.close()

    def _run(self) -> None:
        while True:
            item = self.queue.get()
            try:
                if item is None:
                    return
                self._write(*item)
            finally:
                self.queue.task_done()

    def _write(self, what: str, item: dict[str, Any]) -> None:
        for attempt in range(8):
            try:
                if what == "row":
                    self.store.add_llm_call(**item)
                else:
                    self.store.event("meter", item["kind"], item["message"], item["data"])
                return
            except sqlite3.OperationalError as exc:  # locked past the busy timeout, or a full disk
                if attempt == 7:
                    self._say(f"meter: could not record a {what} in run.db: {exc}: {json.dumps(item)[:500]}")
                    return
                time.sleep(0.5 * (attempt + 1))

    def _say(self, line: str) -> None:
        if self.log is not None:
            print(line, file=self.log, flush=True)


class Meter:
    """The proxy and its record. ``start`` listens and returns the base URL; ``stop`` ends it."""

    def __init__(self, db: Path, upstream: str, *, caps: Caps | None = None, prices: PriceTable | None = None,
                 host: str = "127.0.0.1", port: int = 0, connect_timeout_s: float = 30.0,
                 read_timeout_s: float = 900.0, log: TextIO | None = None) -> None:
        self.upstream = Upstream.parse(upstream)
        self.caps = caps or Caps()
        self.prices = prices if prices is not None else load_prices()
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s
        self.log = log
        self.recorder = _Recorder(Path(db), log)
        totals = self.recorder.store.llm_totals()  # a restarted meter goes on with the run's own sums
        self._tokens = totals.input_tokens + totals.output_tokens
        self._cost = totals.cost_usd or 0.0
        self._calls = 0  # recorded by this meter
        self._lock = threading.Lock()
        self._inflight: set[_Call] = set()
        self._slots = threading.BoundedSemaphore(MAX_CALLS)
        self._server = _Server((host, port), self)
        self._thread: threading.Thread | None = None
        self._stopped = False
        self.foreign = 0  # requests refused from other users of the machine

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else host
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    def start(self) -> str:
        self.recorder.event("meter", f"metering calls to {self.upstream.display} at {self.url}", {
            "metered": True, "url": self.url, "upstream": self.upstream.display, "caps": self.caps.as_json(),
            "prices": self.prices.files, "pid": os.getpid()})
        self._thread = threading.Thread(target=self._server.serve_forever, name="meter", daemon=True)
        self._thread.start()
        return self.url

    def flush(self) -> None:
        """Wait until every call recorded so far is written."""
        self.recorder.flush()

    def stop(self, grace_s: float = 5.0) -> None:
        """Take no new connections, give the calls under way ``grace_s`` to end, record the rest as
        they stand, and close the record."""
        if self._stopped:
            return
        self._stopped = True
        if self._thread is not None:
            self._server.shutdown()
        self._server.server_close()
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            with self._lock:
                if not self._inflight:
                    break
            time.sleep(0.02)
        with self._lock:
            left = list(self._inflight)
        for call in left:
            self.abandon(call, "the meter was stopped before the reply ended")
        with self._lock:
            calls, tokens, cost = self._calls, self._tokens, self._cost
        self.recorder.event("meter_stopped", "the meter stopped", {"abandoned": len(left), "tokens": tokens,
                                                                   "cost_usd": round(cost, 6), "calls": calls})
        self.recorder.close()

    # -- accounting -------------------------------------------------------------------------
    def refusal(self) -> str | None:
        """Why a generation call must be refused now (a cap reached), else None."""
        with self._lock:
            tokens, cost = self._tokens, self._cost
        if self.caps.max_tokens is not None and tokens >= self.caps.max_tokens:
            return (f"agent2rl-tui: this run's token cap is reached ({tokens:,} of {self.caps.max_tokens:,} tokens "
                    "used); no further model calls are allowed in this run")
        if self.caps.max_cost_usd is not None and cost >= self.caps.max_cost_usd:
            return (f"agent2rl-tui: this run's cost cap is reached (${cost:.4f} of ${self.caps.max_cost_usd:.4f} "
                    "used); no further model calls are allowed in this run")
        return None

    def track(self, call: _Call) -> None:
        with self._lock:
            self._inflight.add(call)

    def untrack(self, call: _Call) -> None:
        with self._lock:
            self._inflight.discard(call)

    def abandon(self, call: _Call, why: str) -> None:
        """Record a call that is still under way as it stands, and cut it."""
        with call.lock:
            if call.done:
                return
            call.done = True
            metered = call.reader.close() if call.reader is not None else call.metered
            sock = call.upstream_sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.record(call, metered, complete=False, error=why)

    def _priced(self, call: _Call, metered: Metered | None) -> tuple[Usage | None, str | None, float | None]:
        usage = metered.usage if metered is not None and call.endpoint == GENERATE else None
        model = (metered.model if metered is not None and metered.model else None) or call.model or None
        cost = self.prices.cost(model, usage)
        if cost is None and usage is not None and call.model and call.model != model:
            cost = self.prices.cost(call.model, usage)
        return usage, model, cost

    def count(self, call: _Call, metered: Metered | None) -> None:
        """Add a call's tokens and cost to the run's totals now, before its reply's last bytes
        reach the agent: an agent that calls again the moment a reply ends is checked against
        totals that include it (the row is written after)."""
        usage, _, cost = self._priced(call, metered)
        with self._lock:
            self._add(call, usage, cost)

    def _add(self, call: _Call, usage: Usage | None, cost: float | None) -> None:
        """A call's tokens and cost into the run's totals, once (under ``_lock``)."""
        if call.counted:
            return
        call.counted = True
        if usage is not None:
            self._tokens += usage.input_tokens + usage.output_tokens
        self._cost += cost or 0.0

    def record(self, call: _Call, metered: Metered | None, *, complete: bool, error: str | None,
               refused: bool = False) -> None:
        usage, model, cost = self._priced(call, metered)
        row = {
            "at": call.at, "protocol": call.protocol, "endpoint": call.endpoint, "method": call.method,
            "path": call.path[:2000], "model": model, "status": call.status,
            "latency_s": round(time.monotonic() - call.started, 4), "ttfb_s": call.ttfb_s, "streamed": int(call.streamed),
            "input_tokens": usage.input_tokens if usage else None, "output_tokens": usage.output_tokens if usage else None,
            "cached_tokens": usage.cached_tokens if usage else None,
            "cache_write_tokens": usage.cache_write_tokens if usage else None,
            "reasoning_tokens": usage.reasoning_tokens if usage else None,
            "cost_usd": cost, "complete": int(complete), "refused": int(refused),
            "error": scrub(error, call.secrets) if error else None,
            "request_bytes": call.request_bytes, "response_bytes": call.response_bytes,
        }
        with self._lock:
            self._calls += 1
            self._add(call, usage, cost)
        self.recorder.row(row)
        if self.log is not None:
            tokens = f" in={usage.input_tokens} out={usage.output_tokens}" if usage else ""
            cut = "" if complete else " CUT"
            print(f"meter: {call.method} {call.path} {call.status} {model or '-'}{tokens} {row['latency_s']:.2f}s"
                  f"{' REFUSED' if refused else ''}{cut}", file=self.log, flush=True)


def scrub(text: str, secrets: tuple[str, ...]) -> str:
    for secret in secrets:
        text = text.replace(secret, "[key]")
    return text[:1000]


def secrets_of(headers: list[tuple[str, str]], target: str) -> tuple[str, ...]:
    """Every credential a request carries (header values, the bearer token alone, a ``key`` in the
    query), longest first, so none of them is ever written."""
    found: set[str] = set()
    for name, value in headers:
        if name.lower() in SECRET_HEADERS and value:
            found.add(value.strip())
            parts = value.strip().split(None, 1)
            if len(parts) == 2:
                found.add(parts[1].strip())
    if "?" in target:
        for k, v in parse_qsl(target.split("?", 1)[1]):
            if k.lower() in SECRET_QUERY and v:
                found.add(v)
    return tuple(sorted((s for s in found if len(s) >= 4), key=len, reverse=True))


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


class _Inflater:
    """Feeds a gzip or deflate reply to the reader decompressed, 1 MiB at a time."""

    def __init__(self, reader: UsageReader) -> None:
        self.reader = reader
        self.d = zlib.decompressobj(47)  # gzip or zlib, by their headers

    def feed(self, data: bytes) -> None:
        out = self.d.decompress(data, 1 << 20)
        self.reader.feed(out)
        while self.d.unconsumed_tail:
            self.reader.feed(self.d.decompress(self.d.unconsumed_tail, 1 << 20))


def _json_body(body: bytes, content_encoding: str | None) -> dict[str, Any] | None:
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


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    _upstream_conn: http.client.HTTPConnection | None = None

    def do_GET(self) -> None:
        self._proxy()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = do_GET

    def log_message(self, format: str, *args: Any) -> None:  # the record says it all
        return

    def finish(self) -> None:
        self._drop_upstream()
        super().finish()

    # -- one call ---------------------------------------------------------------------------
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
        call = _Call(time.time(), time.monotonic(), self.command, target.split("?", 1)[0], secrets_of(headers, target))
        route = recognise(self.command, target)
        fmt = route.fmt if route is not None else error_format(target, dict(self.headers))
        if route is not None:
            call.protocol, call.endpoint = route.fmt.name, route.endpoint
        with meter._slots:
            meter.track(call)
            try:
                self._handle(meter, call, route, fmt, target, headers)
            finally:
                meter.untrack(call)

    def _handle(self, meter: Meter, call: _Call, route: Any, fmt: WireFormat, target: str,
                headers: list[tuple[str, str]]) -> None:
        try:
            body = self._body()
        except _TooLarge as exc:
            self.close_connection = True
            self._answer(meter, call, fmt, 413, str(exc))
            return
        except (OSError, ValueError) as exc:  # the client broke off while sending
            self.close_connection = True
            with call.lock:
                call.done = True
            meter.record(call, None, complete=False, error=f"the request could not be read: {exc}")
            return
        call.request_bytes = len(body)
        drop = {"host", "content-length", "accept-encoding", "expect"}
        if route is not None and route.endpoint in (GENERATE, COUNT_TOKENS):
            obj = _json_body(body, self.headers.get("Content-Encoding"))
            if obj is not None:
                if route.endpoint == GENERATE and route.fmt.ask_for_usage(obj):
                    body = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()
                    drop.add("content-encoding")
                try:
                    request = route.fmt.parse(route.endpoint, route.path, route.query, obj, len(body))
                    call.model = request.model or None
                except (BadRequest, ValueError, TypeError, AttributeError):
                    pass  # forwarded as it is: the API says what is wrong with it
        if route is not None and route.endpoint == GENERATE:
            why = meter.refusal()
            if why is not None:
                self._answer(meter, call, fmt, 429, why, refused=True)
                return
        self._forward(meter, call, route, fmt, target, headers, body, drop)

    def _forward(self, meter: Meter, call: _Call, route: Any, fmt: WireFormat, target: str,
                 headers: list[tuple[str, str]], body: bytes, drop: set[str]) -> None:
        up = meter.upstream
        listed = {t.strip().lower() for k, v in headers if k.lower() == "connection" for t in v.split(",")}
        send = [(k, v) for k, v in headers if k.lower() not in HOP_BY_HOP | drop | listed]
        send += [("Host", up.host_header), ("Accept-Encoding", "identity")]
        if body or self.command in ("POST", "PUT", "PATCH"):
            send.append(("Content-Length", str(len(body))))
        resp: http.client.HTTPResponse | None = None
        for attempt in (0, 1):
            reused = self._upstream_conn is not None
            try:
                conn = self._upstream(meter)
                call.upstream_sock = conn.sock
                conn.putrequest(self.command, up.target(target), skip_host=True, skip_accept_encoding=True)
                for k, v in send:
                    conn.putheader(k, v)
                conn.endheaders(body or None)
                resp = conn.getresponse()
                break
            except (OSError, http.client.HTTPException) as exc:
                self._drop_upstream()
                stale = isinstance(exc, (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError))
                if reused and stale and attempt == 0:
                    continue  # a kept-alive connection the upstream had closed: once more on a new one
                self._answer(meter, call, fmt, 502, f"the meter could not reach the driver API at {up.display}: "
                                                    f"{exc.__class__.__name__}: {exc}")
                return
        assert resp is not None
        self._relay(meter, call, route, resp)

    def _relay(self, meter: Meter, call: _Call, route: Any, resp: http.client.HTTPResponse) -> None:
        call.status = resp.status
        call.ttfb_s = round(time.monotonic() - call.started, 4)
        content_type = resp.getheader("Content-Type")
        call.streamed = (content_type or "").split(";")[0].strip().lower() == "text/event-stream"
        no_body = self.command == "HEAD" or resp.status in (204, 304) or 100 <= resp.status < 200
        feed: Callable[[bytes], None] | None = None
        if route is not None and route.endpoint == GENERATE and not no_body:
            call.reader = usage_reader(route.fmt.name, content_type)
            encoding = (resp.getheader("Content-Encoding") or "identity").strip().lower()
            if encoding in ("gzip", "deflate", "x-gzip"):
                feed = _Inflater(call.reader).feed
            elif encoding == "identity":
                feed = call.reader.feed
        error_buf = bytearray() if resp.status >= 400 else None

        listed = {t.strip().lower() for t in (resp.getheader("Connection") or "").split(",")}
        self.send_response_only(resp.status, resp.reason)
        for k, v in resp.getheaders():
            low = k.lower()
            if low in HOP_BY_HOP or low in listed or (low == "content-length" and not no_body):
                continue
            self.send_header(k, v)
        if no_body:
            mode = "none"
        elif resp.length is not None:
            mode = "length"
            self.send_header("Content-Length", str(resp.length))
        elif self.request_version == "HTTP/1.1":
            mode = "chunked"
            self.send_header("Transfer-Encoding", "chunked")
        else:
            mode = "close"
            self.send_header("Connection", "close")
        try:
            self.end_headers()
        except OSError:
            self._drop_upstream()
            self.close_connection = True
            self._finish(meter, call, complete=False, error="the agent closed the connection before the reply began")
            return

        cut: str | None = None
        gone = False
        while mode != "none":
            try:
                chunk = resp.read1(READ_SIZE)
            except (OSError, http.client.HTTPException, ValueError) as exc:
                cut = f"the driver API broke off the reply: {exc.__class__.__name__}: {exc}"
                break
            if not chunk:
                if resp.length:  # fewer bytes than its Content-Length said
                    cut = f"the driver API closed the connection {resp.length:,} bytes before the reply's end"
                break
            with call.lock:
                if call.done:  # the meter stopped and recorded this call
                    gone = True
                    break
                call.response_bytes += len(chunk)
                if feed is not None:
                    feed(chunk)
                if error_buf is not None and len(error_buf) < MAX_ERROR_BODY:
                    error_buf += chunk[:MAX_ERROR_BODY - len(error_buf)]
            if mode == "length" and resp.length == 0:
                self._settle(meter, call)  # these are the reply's last bytes
            try:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk) if mode == "chunked" else chunk)
            except OSError:
                gone = True
                break
        if mode == "chunked" and cut is None and not gone:
            self._settle(meter, call)
            try:
                self.wfile.write(b"0\r\n\r\n")
            except OSError:
                gone = True
        if cut is not None or gone or mode == "close" or resp.will_close or not resp.isclosed():
            self._drop_upstream()
        if cut is not None or gone or mode == "close":
            self.close_connection = True

        error: str | None = None
        if error_buf is not None:
            error = error_message(bytes(error_buf), resp.status, resp.reason)
        if cut is not None:
            error = cut if error is None else f"{error}; {cut}"
        elif gone:
            error = "the agent closed the connection before the reply ended"
        self._finish(meter, call, complete=cut is None and not gone, error=error, check_end=True)

    def _settle(self, meter: Meter, call: _Call) -> None:
        """Read the call's usage and count it before the reply's last bytes go to the agent."""
        with call.lock:
            if call.done or call.reader is None:
                return
            call.metered, call.reader = call.reader.close(), None
        meter.count(call, call.metered)

    def _finish(self, meter: Meter, call: _Call, *, complete: bool, error: str | None, check_end: bool = False) -> None:
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
        meter.record(call, metered, complete=complete, error=error)

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

    def _answer(self, meter: Meter, call: _Call, fmt: WireFormat, status: int, message: str, *,
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
        meter.record(call, None, complete=True, error=message, refused=refused)

    # -- helpers ----------------------------------------------------------------------------
    def _upstream(self, meter: Meter) -> http.client.HTTPConnection:
        if self._upstream_conn is None:
            self._upstream_conn = meter.upstream.connect(meter.connect_timeout_s, meter.read_timeout_s)
        return self._upstream_conn

    def _drop_upstream(self) -> None:
        if self._upstream_conn is not None:
            try:
                self._upstream_conn.close()
            except OSError:
                pass
            self._upstream_conn = None

    def _body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
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
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            raise _TooLarge(f"the request body is over the meter's limit of {MAX_BODY >> 20} MiB")
        if length < 0:
            raise ValueError("a negative Content-Length")
        data = self.rfile.read(length) if length else b""
        if len(data) < length:
            raise ValueError(f"the body ended after {len(data)} of {length} bytes")
        return data


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], meter: Meter) -> None:
        super().__init__(address, _Handler)
        self.meter = meter


@contextmanager
def serve_meter(run_dir: Path, upstream: str, *, caps: Caps | None = None, prices: PriceTable | None = None,
                host: str = "127.0.0.1", port: int = 0, grace_s: float = 5.0) -> Iterator[Meter]:
    """A meter for ``run_dir`` (its run.db must exist) in this process, for the ``with`` block."""
    meter = Meter(Path(run_dir) / "run.db", upstream, caps=caps, prices=prices, host=host, port=port)
    meter.start()
    try:
        yield meter
    finally:
        meter.stop(grace_s)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agent2rl_tui.llm.meter",
                                     description="Meter a run's calls to its driver API: a loopback proxy that "
                                                 "records each call in the run's run.db.")
    parser.add_argument("--run-dir", required=True, type=Path, help="the run folder (its run.db is written)")
    parser.add_argument("--upstream", required=True, help="the driver API's base URL (or the scripted driver's)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 (the default) takes a free port")
    parser.add_argument("--max-tokens", type=int, help="refuse generation calls once the run has used this many "
                                                        "tokens (input + output)")
    parser.add_argument("--max-cost", type=float, help="refuse generation calls once the run has cost this many USD")
    parser.add_argument("--prices", type=Path, help="a price file over the package's table and the user's own")
    parser.add_argument("--grace", type=float, default=5.0, help="seconds calls under way get when the meter stops")
    parser.add_argument("--read-timeout", type=float, default=900.0, help="seconds of silence from the driver API "
                                                                          "before a call is cut")
    args = parser.parse_args(argv)
    if not (args.run_dir / "run.db").is_file():
        print(f"error: {args.run_dir / 'run.db'} does not exist: is this a run folder?", file=sys.stderr)
        return 2
    for name, value in (("--max-tokens", args.max_tokens), ("--max-cost", args.max_cost)):
        if value is not None and value < 0:
            print(f"error: {name} must not be negative", file=sys.stderr)
            return 2
    try:
        prices = load_prices(args.prices)
        meter = Meter(args.run_dir / "run.db", args.upstream, caps=Caps(args.max_tokens, args.max_cost),
                      prices=prices, host=args.host, port=args.port, read_timeout_s=args.read_timeout, log=sys.stderr)
    except (PriceError, ValueError, StoreError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    print(meter.start(), flush=True)
    while not stop.wait(0.5):
        pass
    meter.stop(args.grace)
    return 0


if __name__ == "__main__":
    sys.exit(main())
