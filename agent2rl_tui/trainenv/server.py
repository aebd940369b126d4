"""The service over HTTP: routes onto ``core.TrainEnvs``, every call recorded, hostile input capped.

``python -m agent2rl_tui.trainenv --run-dir DIR (--fd N | --port N)``, the secret path prefix in
``$AGENT2RL_TRAINENV_SECRET`` (the supervisor starts it with ``grader.launch.spawn_service``).
Bodies are JSON objects of at most 64 KiB (read no further), names and texts are checked before
anything is played, an environment's calls wait on its own lock in a worker thread (a WebShop
store or a search API may take seconds), and only the run's user is served (``util.peer``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from agent2rl_tui.trainenv import SECRET_ENV
from agent2rl_tui.trainenv.core import RECORDED_TEXT, Limits, Recorder, Refusal, TrainEnvs, build
from agent2rl_tui.util.inert import one_line
from agent2rl_tui.util.logsetup import configure_logging
from agent2rl_tui.util.numbers import is_digits
from agent2rl_tui.util.peer import is_owner
from agent2rl_tui.util.procs import die_with_launcher

log = logging.getLogger("agent2rl.trainenv")
MAX_BODY = 64 << 10
MAX_ENV_ID = 1 << 31


def error(status: int, code: str, detail: str) -> JSONResponse:
    return JSONResponse({"error": code, "detail": detail}, status_code=status)


async def read_json(request: Request) -> dict[str, Any]:
    """The body as a JSON object, read no further than ``MAX_BODY``."""
    declared = request.headers.get("content-length")
    if declared is not None and (not is_digits(declared) or int(declared) > MAX_BODY):
        raise Refusal(413, "too_large", f"a request body is at most {MAX_BODY // 1024} KiB")
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY:
            raise Refusal(413, "too_large", f"a request body is at most {MAX_BODY // 1024} KiB")
    if not body:
        return {}
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        raise Refusal(400, "invalid_json", "the body is not JSON; send an object such as {\"game\": \"...\"}") from None
    if not isinstance(data, dict):
        raise Refusal(400, "invalid_json", "the body must be a JSON object")
    return data


def text_field(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise Refusal(400, f"invalid_{key}", f"{key} must be a string")
    return value


def env_id_of(request: Request) -> int:
    raw = request.path_params["env_id"]
    if not is_digits(raw) or int(raw) >= MAX_ENV_ID:
        raise Refusal(404, "no_such_env", "environment ids are the integers POST /envs answers")
    return int(raw)


class Endpoints:
    def __init__(self, envs: TrainEnvs, recorder: Recorder) -> None:
        self.envs, self.recorder = envs, recorder

    async def call(self, request: Request, op: str,
                   work: Callable[[], Awaitable[tuple[dict[str, Any], int]]]) -> JSONResponse:
        """Run one call and record it, whatever it answers."""
        started = time.monotonic()
        row: dict[str, Any] = {"at": time.time(), "op": op}
        try:
            body, status = await work()
        except Refusal as exc:
            body, status = {"error": exc.code, "detail": exc.detail}, exc.status
            row["error"] = f"{exc.code}: {exc.detail}"[:RECORDED_TEXT]
        except Exception as exc:  # noqa: BLE001 - our bug: recorded, and the agent gets a code
            log.exception("%s failed", op)
            body, status = {"error": "internal_error", "detail": "the service failed on this call; it is recorded"}, 500
            row["error"] = f"internal_error: {type(exc).__name__}: {exc}"[:RECORDED_TEXT]
        env_id = request.path_params.get("env_id")
        row |= {"status": status, "latency_s": round(time.monotonic() - started, 4),
                "env_id": body.get("env_id", int(env_id) if isinstance(env_id, str) and is_digits(env_id)
                                   and int(env_id) < MAX_ENV_ID else None),
                "game": body.get("game") or getattr(request.state, "game", None),
                "action": one_line(str(body["action"]))[:RECORDED_TEXT] if body.get("action") is not None else None,
                "reward": body.get("reward"), "done": body.get("done"), "won": body.get("won"),
                "step": body.get("step"), "searches": int(bool(body.get("searched"))),
                "judge_calls": int(body.get("judge_calls") or 0)}
        if isinstance(row["game"], str):
            row["game"] = one_line(row["game"])[:200]
        self.recorder.add(row)
        return JSONResponse(body, status_code=status)

    async def games(self, request: Request) -> JSONResponse:
        async def work() -> tuple[dict[str, Any], int]:
            return self.envs.describe(), 200
        return await self.call(request, "games", work)

    async def create(self, request: Request) -> JSONResponse:
        async def work() -> tuple[dict[str, Any], int]:
            return {"env_id": await run_in_threadpool(self.envs.create)}, 201
        return await self.call(request, "create", work)

    async def reset(self, request: Request) -> JSONResponse:
        async def work() -> tuple[dict[str, Any], int]:
            env_id = env_id_of(request)
            data = await read_json(request)
            game = text_field(data, "game")
            if not game:
                raise Refusal(400, "no_game", "give the train game to play: {\"game\": \"...\"} (GET /games lists them)")
            request.state.game = game[:200]
            return await run_in_threadpool(self.envs.reset, env_id, game, text_field(data, "reward")), 200
        return await self.call(request, "reset", work)

    async def step(self, request: Request) -> JSONResponse:
        async def work() -> tuple[dict[str, Any], int]:
            env_id = env_id_of(request)
            data = await read_json(request)
            return await run_in_threadpool(self.envs.step, env_id, text_field(data, "completion"),
                                           text_field(data, "action")), 200
        return await self.call(request, "step", work)

    async def close(self, request: Request) -> JSONResponse:
        async def work() -> tuple[dict[str, Any], int]:
            env_id = env_id_of(request)
            await run_in_threadpool(self.envs.close, env_id)
            return {"env_id": env_id, "closed": True}, 200
        return await self.call(request, "close", work)

    async def health(self, request: Request) -> JSONResponse:
        """Whether the service answers (the supervisor's readiness check: not the agent's call, not recorded)."""
        return JSONResponse({"status": "ok", "task": self.envs.task.name})

    def routes(self) -> list[Route]:
        return [Route("/health", self.health, methods=["GET"]),
                Route("/games", self.games, methods=["GET"]),
                Route("/envs", self.create, methods=["POST"]),
                Route("/envs/{env_id}/reset", self.reset, methods=["POST"]),
                Route("/envs/{env_id}/step", self.step, methods=["POST"]),
                Route("/envs/{env_id}", self.close, methods=["DELETE"])]


class OwnerOnly:
    """Only the run's user (``util.peer``): anyone else gets 403, recorded as a refused call."""

    def __init__(self, app: ASGIApp, recorder: Recorder) -> None:
        self.app, self.recorder = app, recorder

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or is_owner(scope.get("client"), scope.get("server")):
            await self.app(scope, receive, send)
            return
        self.recorder.add({"at": time.time(), "op": "refused", "status": 403, "error": "not_your_run: another user"})
        await error(403, "not_your_run", "This service serves only the user who started the run.")(scope, receive, send)


def build_app(envs: TrainEnvs, recorder: Recorder, secret: str) -> Starlette:
    async def not_found(request: Request, exc: Exception) -> JSONResponse:
        recorder.add({"at": time.time(), "op": "refused", "status": 404,
                      "error": f"not_found: {request.method} {one_line(request.url.path[-200:])}"})
        return error(404, "not_found", "Use $TRAIN_ENV_URL/games, /envs, /envs/N/reset, /envs/N/step.")

    async def not_allowed(request: Request, exc: Exception) -> JSONResponse:
        recorder.add({"at": time.time(), "op": "refused", "status": 405,
                      "error": f"method_not_allowed: {request.method} {one_line(request.url.path[-200:])}"})
        return error(405, "method_not_allowed", "GET /games; POST /envs, /envs/N/reset, /envs/N/step; DELETE /envs/N.")

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await run_in_threadpool(envs.close_all)
        recorder.close()

    app = Starlette(routes=[Mount(f"/{secret}", routes=Endpoints(envs, recorder).routes())], lifespan=lifespan,
                    exception_handlers={404: not_found, 405: not_allowed})
    app.add_middleware(OwnerOnly, recorder=recorder)
    return app


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agent2rl_tui.trainenv",
                                     description="The agent's train environments for one run, over HTTP.")
    parser.add_argument("--run-dir", type=Path, required=True)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--fd", type=int, help="an inherited listening socket")
    where.add_argument("--port", type=int, help="bind 127.0.0.1:PORT (0 picks a free one)")
    args = parser.parse_args(argv)
    die_with_launcher()  # a supervisor killed with kill -9 takes its service along
    configure_logging(sys.stderr, "%(levelname)s %(name)s: %(message)s")
    secret = os.environ.get(SECRET_ENV)
    if not secret:
        parser.error(f"set {SECRET_ENV} to the run's secret path prefix")
    import uvicorn

    from agent2rl_tui.grader.server.__main__ import listening_socket

    recorder = Recorder(args.run_dir / "run.db")
    envs = build(args.run_dir, recorder, limits_of(args.run_dir))
    sock = listening_socket(args.fd, args.port)
    if args.port is not None:
        print(f"http://127.0.0.1:{sock.getsockname()[1]}/{secret}", flush=True)
    log.info("train environments of %s (%s) on 127.0.0.1:%s", args.run_dir.name, envs.task.name, sock.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(build_app(envs, recorder, secret), log_config=None, access_log=False,
                                           lifespan="on", timeout_graceful_shutdown=3, proxy_headers=False,
                                           forwarded_allow_ips=""))
    asyncio.run(server.serve(sockets=[sock]))
    return 0


def limits_of(run_dir: Path) -> dict[str, int]:
    """The run's own limits (``config.train_env``), to go over the defaults."""
    from agent2rl_tui.record.store import RunStore

    with RunStore.of_run(run_dir) as store:
        given = store.config().train_env or {}
    return {k: int(v) for k, v in given.items() if k in Limits.__dataclass_fields__}
