"""The scripted driver: a local server that plays the driver LLM of any of the five agent CLIs.

It speaks Anthropic Messages, OpenAI Responses, OpenAI Chat Completions and the Gemini API on
one port (the path decides, see `protocols`) and replays a script (`script`) by intent: each
reply is the next step mapped onto the tools that request offers (`intents`). Which step is
next is read from the conversation in the request (how many tool results it holds), so the
driver keeps no session: a CLI that retries a request gets the same step again, and any number
of CLIs can use one driver at once. Every reply carries deterministic usage (prompt = request
bytes // 4, output = generated text bytes // 4, at least 1; cached = ``cached_percent`` of the
prompt) and every call is recorded (`Served`), so a test can compare what a meter read with
what was served.

In process::

    with serve(load_script("s.toml")) as driver:     # driver.url = "http://127.0.0.1:PORT"
        ...                                          # driver.calls: list[Served]

As a process: ``python -m agent2rl_tui.llm.scripted --script s.toml [--port N] [--log calls.jsonl]``
prints its URL on the first line of stdout and appends one JSON line per call to the log.

Two settings make it behave more like a real API where a test needs that: ``api_key`` (a call
without that key, in any of the APIs' key headers or ``?key=``, is answered 401 and recorded:
``--api-key-env VAR`` reads it from a variable, so it is on no command line) and ``pace_s``
(``--pace``: seconds between a stream's events, as a model's tokens come).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import signal
import sys
import threading
import time
import zlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from agent2rl_tui.llm.intents import Plan, example, plan_step
from agent2rl_tui.llm.prices import STAND_IN_HEADER
from agent2rl_tui.llm.protocols import (
    COUNT_TOKENS,
    BadRequest,
    LlmRequest,
    Reply,
    ToolCall,
    WireFormat,
    error_format,
    recognise,
)
from agent2rl_tui.llm.script import Script, ScriptError, load_script
from agent2rl_tui.llm.usage import Usage

MAX_BODY = 64 << 20
ID_PREFIX = {"anthropic": "msg_scripted_", "chat": "chatcmpl-scripted-", "responses": "resp_scripted_",
             "gemini": "scripted-"}
CALL_PREFIX = {"anthropic": "toolu_scripted_"}


@dataclass
class Served:
    """One call the driver answered, as the JSONL log has it. ``step``: the script step served
    (0-based; None for a side request: a JSON-mode utility call, a request without tools, a token
    count, an error). ``usage``: the usage the reply reported (None when it reports none).
    ``offered``: the tools the request offered, by name (what a CLI's check reports)."""

    seq: int
    time: str
    method: str
    path: str
    protocol: str
    endpoint: str
    status: int
    model: str = ""
    stream: bool = False
    step: int | None = None
    intent: str = ""
    tool: str | None = None
    usage: Usage | None = None
    note: str = ""
    offered: list[str] = field(default_factory=list)  # the names of the tools the request offered

    def as_json(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["usage"] = self.usage.as_dict() if self.usage else None
        return out


@dataclass
class Answer:
    """An HTTP answer: a JSON body, or SSE events sent one by one (``streaming``)."""

    status: int
    chunks: list[bytes]
    streaming: bool = False
    content_type: str = "application/json"


@dataclass
class ScriptedDriver:
    script: Script
    log: Path | None = None
    calls: list[Served] = field(default_factory=list)
    api_key: str | None = None  # required of every call when set
    pace_s: float = 0.0  # between a stream's events
    priced: bool = False
    """Answer as a real API would, without ``STAND_IN_HEADER``: for tests of the meter's pricing."""

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._seq = 0

    # -- one call
    def respond(self, method: str, target: str, headers: Mapping[str, str], body: bytes) -> Answer:
        seq = self._next()
        route = recognise(method, target)
        path = target.split("?", 1)[0]
        if self.api_key is not None and not _carries(headers, target, self.api_key):
            fmt = route.fmt if route is not None else error_format(target, dict(headers))
            msg = "invalid x-api-key: the scripted driver was started with a key, and this call does not carry it"
            self._record(Served(seq, _now(), method, path, fmt.name, route.endpoint if route else "", 401, note=msg))
            return self._error(fmt, 401, msg)
        if route is None:
            if method in ("GET", "HEAD") and path.rstrip("/") in ("", "/health"):
                return self._plain(200, {"ok": True, "calls": len(self.calls), "steps": len(self.script.steps)})
            fmt = error_format(target, dict(headers))
            msg = f"the scripted driver has no endpoint {method} {path}"
            self._record(Served(seq, _now(), method, path, fmt.name, "", 404, note=msg))
            return self._error(fmt, 404, msg)
        fmt = route.fmt
        served = Served(seq, _now(), method, route.path, fmt.name, route.endpoint, 200)
        try:
            obj = json.loads(_decode(body, headers))
            if not isinstance(obj, dict):
                raise BadRequest("the body must be a JSON object")
            request = fmt.parse(route.endpoint, route.path, route.query, obj, len(body))
        except (ValueError, OSError, zlib.error) as exc:  # BadRequest, JSON, gzip
            served.status, served.note = 400, str(exc)[:300]
            self._record(served)
            return self._error(fmt, 400, f"scripted driver: {exc}")
        served.model, served.stream = request.model, request.stream
        served.offered = [t.name for t in request.tools]
        if request.endpoint == COUNT_TOKENS:
            served.intent = "count_tokens"
            self._record(served)
            return self._plain(200, fmt.count_tokens_json(request, request.size // 4))
        reply, plan, step = self.decide(request, seq)
        served.model, served.step, served.usage = reply.model, step, reply.usage
        served.intent, served.note = plan.intent, plan.note
        served.tool = reply.tool_call.name if reply.tool_call else None
        self._record(served)
        if request.stream and request.sse:
            return Answer(200, list(fmt.reply_events(request, reply)), True, "text/event-stream; charset=utf-8")
        return self._plain(200, fmt.reply_json(request, reply))

    def decide(self, request: LlmRequest, seq: int) -> tuple[Reply, Plan, int | None]:
        """The reply to ``request``: the step its conversation has reached, mapped onto its tools;
        a JSON object for a JSON-mode request; the final answer for a request without tools."""
        steps = self.script.steps
        step: int | None = None
        if request.json_schema is not None:
            plan = Plan("json", text=json.dumps(example(request.json_schema, text="")), note="a JSON reply was asked for")
        elif not request.tools:
            plan = Plan("no_tools", text=self.script.answer.text, note="the request offers no tools")
        else:
            step = min(request.tool_results, len(steps) - 1)
            plan = plan_step(steps[step], request, self.script.cwd)
        model = self.script.model or request.model or "scripted"
        call = None
        if plan.tool is not None:
            call_id = CALL_PREFIX.get(request.protocol, "call_scripted_") + str(seq)
            call = ToolCall(plan.tool.name, call_id, plan.arguments, plan.input, plan.tool.kind)
        generated = plan.text + (call.name + call.payload() if call else "")
        prompt = request.size // 4
        usage = Usage(input_tokens=prompt, output_tokens=max(1, len(generated.encode()) // 4),
                      cached_tokens=prompt * self.script.cached_percent // 100)
        return Reply(model, ID_PREFIX[request.protocol] + str(seq), usage, plan.text, call), plan, step

    # -- helpers
    def _next(self) -> int:
        with self._lock:
            self._seq += 1
            return self._seq

    def _record(self, served: Served) -> None:
        with self._lock:
            self.calls.append(served)
            if self.log is not None:
                with self.log.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(served.as_json(), ensure_ascii=False) + "\n")

    @staticmethod
    def _plain(status: int, obj: Any) -> Answer:
        return Answer(status, [json.dumps(obj, ensure_ascii=False).encode()])

    def _error(self, fmt: WireFormat, status: int, message: str) -> Answer:
        return self._plain(status, fmt.error_json(status, message))


def _carries(headers: Mapping[str, str], target: str, key: str) -> bool:
    """Whether a request carries ``key`` where the four APIs take one."""
    for name, value in headers.items():
        if name.lower() in ("x-api-key", "x-goog-api-key", "api-key") and value.strip() == key:
            return True
        if name.lower() == "authorization" and value.strip().removeprefix("Bearer ").strip() == key:
            return True
    query = target.partition("?")[2]
    return any(k == "key" and v == key for k, v in parse_qsl(query))


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _decode(body: bytes, headers: Mapping[str, str]) -> bytes:
    encoding = next((v for k, v in headers.items() if k.lower() == "content-encoding"), "").strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding == "gzip":
        return gzip.decompress(body)
    if encoding == "deflate":
        return zlib.decompress(body)
    raise BadRequest(f"content-encoding {encoding} is not supported")


# -- HTTP
class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # a reply's head and body go at once, as a real API's do
    server: _Server

    def do_POST(self) -> None:
        self._serve()

    do_GET = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_POST

    def _serve(self) -> None:
        try:
            body = self._body()
        except ValueError as exc:
            fmt = error_format(self.path, dict(self.headers))
            self._send(Answer(413, [json.dumps(fmt.error_json(413, str(exc))).encode()]))
            self.close_connection = True
            return
        self._send(self.server.driver.respond(self.command, self.path, dict(self.headers), body))

    def _body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            out = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(out)
                if len(out) + size > MAX_BODY:
                    raise ValueError("request body too large")
                out += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            raise ValueError("request body too large")
        return self.rfile.read(length) if length else b""

    def _send(self, answer: Answer) -> None:
        try:
            self.send_response(answer.status)
            self.send_header("Content-Type", answer.content_type)
            if not self.server.driver.priced:
                self.send_header(STAND_IN_HEADER, "scripted")  # metered, never priced as the model it names
            if answer.streaming:
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for n, chunk in enumerate(answer.chunks):
                    if n and self.server.driver.pace_s:
                        time.sleep(self.server.driver.pace_s)
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
            else:
                data = b"".join(answer.chunks)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:  # the JSONL log says it all
        return


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], driver: ScriptedDriver) -> None:
        super().__init__(address, _Handler)
        self.driver = driver


@dataclass
class RunningDriver:
    url: str
    driver: ScriptedDriver

    @property
    def calls(self) -> list[Served]:
        return self.driver.calls


@contextmanager
def serve(script: Script | str | Path, host: str = "127.0.0.1", port: int = 0,
          log: str | Path | None = None, *, api_key: str | None = None, pace_s: float = 0.0,
          priced: bool = False) -> Iterator[RunningDriver]:
    """Run the driver on ``host:port`` (0: any free port) in a thread for the ``with`` block;
    ``priced``: without the stand-in header, so the meter prices its calls by the model they name."""
    loaded = script if isinstance(script, Script) else load_script(script)
    driver = ScriptedDriver(loaded, Path(log) if log else None, api_key=api_key, pace_s=pace_s, priced=priced)
    server = _Server((host, port), driver)
    thread = threading.Thread(target=server.serve_forever, name="scripted-driver", daemon=True)
    thread.start()
    try:
        yield RunningDriver(_url(server), driver)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _url(server: _Server) -> str:
    host, port = server.server_address[:2]
    host = host.decode() if isinstance(host, bytes) else host
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agent2rl_tui.llm.scripted",
                                     description="Serve a script as the driver LLM of an agent CLI (all four APIs).")
    parser.add_argument("--script", required=True, help="the script: a .toml or .json file")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 (the default) takes a free port")
    parser.add_argument("--log", default="scripted-calls.jsonl", help="JSONL log of the calls served (appended)")
    parser.add_argument("--api-key-env", metavar="VAR",
                        help="require of every call the key in this environment variable, as a real API does")
    parser.add_argument("--pace", type=float, default=0.0, help="seconds between a stream's events")
    parser.add_argument("--priced", action="store_true",
                        help="answer without the stand-in header, so a meter prices the calls by the model they "
                             "name (for tests of pricing; by default a stand-in is never priced)")
    args = parser.parse_args(argv)
    api_key = None
    if args.api_key_env:
        api_key = os.environ.get(args.api_key_env) or None
        if api_key is None:
            print(f"error: --api-key-env {args.api_key_env}: the variable is not set", file=sys.stderr)
            return 2
    try:
        script = load_script(args.script)
    except ScriptError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    driver = ScriptedDriver(script, Path(args.log), api_key=api_key, pace_s=max(0.0, args.pace), priced=args.priced)
    try:
        server = _Server((args.host, args.port), driver)
    except OSError as exc:
        print(f"error: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    thread = threading.Thread(target=server.serve_forever, name="scripted-driver", daemon=True)
    thread.start()
    print(_url(server), flush=True)
    while not stop.wait(0.5):
        pass
    server.shutdown()
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
