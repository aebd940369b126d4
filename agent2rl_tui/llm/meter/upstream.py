"""Where the meter forwards a call: the upstream's URL, the headers that cross, the connection.

Kept apart from the handler because these are facts of the driver API's side, whatever the
agent's side does: what an upstream URL means (scheme, host, the path prefix a request is
appended to), which headers go on (hop-by-hop ones never do), and how a request goes out over a
connection kept alive between one agent connection's calls (once more on a new connection when
the upstream had closed the old one).
"""

from __future__ import annotations

import http.client
import socket
import ssl
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection",
                        "te", "trailer", "trailers", "transfer-encoding", "upgrade"})
STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)
"""What a kept-alive connection the upstream had closed raises: the request is sent once more."""


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


def connection_listed(values: Iterable[str]) -> set[str]:
    """The header names ``Connection`` headers list (hop-by-hop for this connection only)."""
    return {t.strip().lower() for v in values for t in v.split(",")}


def forwarded_headers(headers: list[tuple[str, str]], upstream: Upstream, drop: set[str], *,
                      content_length: int | None) -> list[tuple[str, str]]:
    """The agent's request headers as the upstream gets them: hop-by-hop ones, those its
    ``Connection`` lists and ``drop`` left out; the upstream's ``Host``; identity encoding asked
    for (so the usage can be read); ``Content-Length`` when given."""
    listed = connection_listed(v for k, v in headers if k.lower() == "connection")
    send = [(k, v) for k, v in headers if k.lower() not in HOP_BY_HOP | drop | listed]
    send += [("Host", upstream.host_header), ("Accept-Encoding", "identity")]
    if content_length is not None:
        send.append(("Content-Length", str(content_length)))
    return send


class UpstreamLink:
    """One agent connection's connection to the upstream, opened at its first call and kept
    alive between its calls."""

    def __init__(self, upstream: Upstream, connect_timeout_s: float, read_timeout_s: float) -> None:
        self.upstream = upstream
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s
        self.conn: http.client.HTTPConnection | None = None

    def open(self) -> http.client.HTTPConnection:
        if self.conn is None:
            self.conn = self.upstream.connect(self.connect_timeout_s, self.read_timeout_s)
        return self.conn

    def drop(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            except OSError:
                pass
            self.conn = None

    def send(self, method: str, target: str, headers: list[tuple[str, str]], body: bytes,
             on_socket: Callable[[socket.socket | None], None]) -> http.client.HTTPResponse:
        """Send a request and return the reply's head; ``on_socket`` is told the socket it goes
        on (so a stopping meter can cut it). Raises ``OSError`` or ``http.client.HTTPException``
        when the upstream cannot be reached."""
        reused = self.conn is not None
        try:
            return self._send_once(method, target, headers, body, on_socket)
        except STALE:
            if not reused:
                raise
        return self._send_once(method, target, headers, body, on_socket)  # on a new connection

    def _send_once(self, method: str, target: str, headers: list[tuple[str, str]], body: bytes,
                   on_socket: Callable[[socket.socket | None], None]) -> http.client.HTTPResponse:
        try:
            conn = self.open()
            on_socket(conn.sock)
            conn.putrequest(method, self.upstream.target(target), skip_host=True, skip_accept_encoding=True)
            for k, v in headers:
                conn.putheader(k, v)
            conn.endheaders(body or None)
            return conn.getresponse()
        except (OSError, http.client.HTTPException):
            self.drop()
            raise
