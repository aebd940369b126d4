"""Entry point: ``python -m agent2rl_tui.grader.server --run-dir DIR (--fd N | --port N)``.

spawn_grader (grader/launch.py) starts the grader by this module name, on a listening
socket it bound itself; the secret path prefix comes in ``$AGENT2RL_GRADER_SECRET``.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import sys

from agent2rl_tui.grader.launch import SECRET_ENV
from agent2rl_tui.grader.server.config import GraderConfig, build_parser, secret_from_env
from agent2rl_tui.util.logsetup import configure_logging
from agent2rl_tui.util.procs import die_with_launcher

log = logging.getLogger("agent2rl.grader")
GRACEFUL_SHUTDOWN_S = 3
KEEP_ALIVE_S = 75


def listening_socket(fd: int | None, port: int | None) -> socket.socket:
    """The inherited socket ``fd``, or a fresh one listening on 127.0.0.1:``port``."""
    if fd is not None:
        return socket.socket(fileno=fd)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port or 0))
    sock.listen(64)
    return sock


def serve(config: GraderConfig, secret: str, sock: socket.socket) -> None:
    import uvicorn

    from agent2rl_tui.grader.server.routes import build_app

    app = build_app(config, secret)
    server = uvicorn.Server(
        # A /submit waiting on its score must not hold a stopping grader up: after 3 s the
        # lifespan shutdown runs and kills the workers.
        # proxy_headers=False: the client address is the socket's own, never a header's (the grader's
        # owner-only check asks the kernel who owns that socket; X-Forwarded-For would name another one).
        uvicorn.Config(app, log_config=None, access_log=False, lifespan="on", timeout_keep_alive=KEEP_ALIVE_S,
                       timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S, proxy_headers=False,
                       forwarded_allow_ips="")
    )
    asyncio.run(server.serve(sockets=[sock]))


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    die_with_launcher()  # a supervisor killed with kill -9 takes its grader (and so its workers) along
    configure_logging(sys.stderr, "%(levelname)s %(name)s: %(message)s")
    secret = secret_from_env()
    if not secret:
        parser.error(f"set {SECRET_ENV} to the run's secret path prefix")
    config = GraderConfig.from_run(args.run_dir, after_the_run=args.after_the_run)
    sock = listening_socket(args.fd, args.port)
    log.info("grader for %s on 127.0.0.1:%s", config.run_dir.name, sock.getsockname()[1])
    serve(config, secret, sock)
    return 0


if __name__ == "__main__":
    sys.exit(main())
