"""Start a run's grader as a subprocess on an inherited loopback socket.

The caller binds 127.0.0.1:0 itself and passes the listening socket down, so the port is
known before the grader starts and no other process can race for it. The per-run secret
travels in the environment, not on the command line where ``ps`` would show it.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

SECRET_ENV = "AGENT2RL_GRADER_SECRET"


@dataclass
class GraderProcess:
    popen: subprocess.Popen[bytes]
    port: int
    url: str  # http://127.0.0.1:PORT/SECRET


def spawn_grader(run_dir: Path, log_path: Path) -> GraderProcess:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        port = sock.getsockname()[1]
        secret = secrets.token_urlsafe(16)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("ab") as logfh:
            popen = subprocess.Popen(
                [sys.executable, "-m", "agent2rl_tui.grader.server", "--run-dir", str(run_dir),
                 "--fd", str(sock.fileno())],
                pass_fds=(sock.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=logfh,
                stderr=subprocess.STDOUT,
                env={**os.environ, SECRET_ENV: secret},
                start_new_session=True,
            )
    finally:
        sock.close()
    return GraderProcess(popen, port, f"http://127.0.0.1:{port}/{secret}")
