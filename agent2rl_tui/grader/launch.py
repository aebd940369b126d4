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

from agent2rl_tui.util.procs import DIE_WITH_ENV

SECRET_ENV = "AGENT2RL_GRADER_SECRET"


@dataclass
class GraderProcess:
    popen: subprocess.Popen[bytes]
    port: int
    url: str  # http://127.0.0.1:PORT/SECRET
    secret: str
    sock: socket.socket | None = None
    """The listening socket, when the caller keeps it to start a successor on the same URL."""


def spawn_grader(run_dir: Path, log_path: Path, *, keep_socket: bool = False, gpus: str | None = None,
                 successor_of: GraderProcess | None = None, die_with_us: bool = False,
                 after_the_run: bool = False) -> GraderProcess:
    """Start a grader; ``successor_of`` a dead one: the same socket and secret, so the agent's
    URL keeps working (connections made meanwhile wait in the socket's backlog); ``after_the_run``:
    one that grades an ended run's checkpoints for ``run grade``."""
    return spawn_service("agent2rl_tui.grader.server", SECRET_ENV, run_dir, log_path, keep_socket=keep_socket,
                         gpus=gpus, successor_of=successor_of, die_with_us=die_with_us,
                         extra_args=("--after-the-run",) if after_the_run else ())


def spawn_service(module: str, secret_env: str, run_dir: Path, log_path: Path, *, keep_socket: bool = False,
                  gpus: str | None = None, successor_of: GraderProcess | None = None,
                  die_with_us: bool = False, extra_args: tuple[str, ...] = ()) -> GraderProcess:
    """Start ``python -m MODULE --run-dir RUN --fd N`` on a loopback socket bound here, its secret in
    ``secret_env``: the grader, and the train-environment service beside it (``trainenv``).
    ``die_with_us``: it ends when this process dies, however it dies (``procs.die_with_launcher``;
    call from the main thread)."""
    if successor_of is not None and successor_of.sock is not None:
        sock, secret = successor_of.sock, successor_of.secret
    else:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        secret = secrets.token_urlsafe(16)
    keep = keep_socket or successor_of is not None
    env = {**os.environ, secret_env: secret}
    if die_with_us:
        env[DIE_WITH_ENV] = str(os.getpid())
    if gpus:
        env["CUDA_VISIBLE_DEVICES"] = gpus  # the run's GPUs only, not every GPU of the machine
    try:
        port = sock.getsockname()[1]
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("ab") as logfh:
            popen = subprocess.Popen(
                [sys.executable, "-m", module, "--run-dir", str(run_dir),
                 "--fd", str(sock.fileno()), *extra_args],
                pass_fds=(sock.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=logfh,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
    finally:
        if not keep:
            sock.close()
    return GraderProcess(popen, port, f"http://127.0.0.1:{port}/{secret}", secret, sock if keep else None)
