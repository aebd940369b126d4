"""What the tests' stand-in services share: a JSON reply, serving on a free loopback port, and
starting one as a real process.

A service runs as ``python tests/<name>_server.py --port-file F ...``: it binds 127.0.0.1 on a
free port and writes the port to F (atomically) once it listens; ``start`` waits for that.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def send_json(handler: BaseHTTPRequestHandler, data: object, code: int = 200) -> None:
    raw = json.dumps(data).encode()
    handler.send_response(code)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(raw)))
    handler.end_headers()
    handler.wfile.write(raw)


class Server(ThreadingHTTPServer):
    request_queue_size = 128  # the listen backlog: an API takes more than the default 5 waiting connections


def serve(handler: type[BaseHTTPRequestHandler], port_file: Path) -> None:
    """Serve on a free 127.0.0.1 port, announced in ``port_file``, until killed."""
    server = Server(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    tmp = port_file.with_suffix(".tmp")
    tmp.write_text(str(server.server_address[1]))
    tmp.replace(port_file)
    server.serve_forever()


def start(script: str, folder: Path, *args: str) -> tuple[subprocess.Popen, int]:
    """Start ``tests/<script>`` with ``args``; its process and port once it listens."""
    port_file = folder / f"{Path(script).stem}.{time.monotonic_ns()}.port"
    proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name(script)), "--port-file", str(port_file),
                             *args])
    for _ in range(400):
        if port_file.exists():
            return proc, int(port_file.read_text())
        if proc.poll() is not None:
            raise AssertionError(f"{script} exited with {proc.returncode}")
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"{script} did not start listening")
