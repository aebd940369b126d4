"""The HTTP API (docs/architecture.md, "The grader's HTTP API") of one run's grader: a Starlette app, every route under the
run's secret path prefix, every error a JSON object with a code and advice for the agent.

What the agent is sent holds status, scores, counts and codes with advice in our words, never
an error's own text (it can carry an eval prompt: ``grader.failures``). Only the user the grader
runs as is served (``peer``); a request from anyone else gets a 403 and a line in the record.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from agent2rl_tui.grader.failures import advice
from agent2rl_tui.grader.server import validation
from agent2rl_tui.grader.server.config import GraderConfig
from agent2rl_tui.grader.server.queue import Grader
from agent2rl_tui.grader.server.validation import MAX_BODY_BYTES, Rejection
from agent2rl_tui.record.store import BASELINE_ID, RunStore, Submission, SubStatus
from agent2rl_tui.util.inert import one_line
from agent2rl_tui.util.numbers import is_digits
from agent2rl_tui.util.peer import is_owner
from agent2rl_tui.util.timeutil import iso, now

log = logging.getLogger("agent2rl.grader")
MAX_SUBMISSION_ID = 1 << 62
FOREIGN_EVENTS_KEPT = 20
"""Requests from other users recorded one by one; after that every 100th (a flood must not fill run.db)."""
BAD_REQUEST_EVENTS_KEPT = 100
"""Bad requests other than a submission's (those are rows of their own) recorded one by one as
``bad_request`` events; after that every 100th, with the count so far."""


def error(status: int, code: str, detail: str) -> JSONResponse:
    return JSONResponse({"error": code, "detail": detail}, status_code=status)


def failure_fields(sub: Submission) -> dict[str, Any]:
    """``error`` (a code) and ``detail`` (advice in our words) of a refused or failed submission."""
    if sub.status == SubStatus.REJECTED:  # the rejection's detail is ours, written for the agent
        code = sub.error_code or "rejected"
        prefix = f"{code}: "
        text = sub.error or ""
        return {"error": code, "detail": text[len(prefix):] if text.startswith(prefix) else "The submission was refused."}
    if sub.status == SubStatus.FAILED:
        return {"error": sub.error_code or "evaluation_failed", "detail": advice(sub.error_code)}
    return {}


def submission_json(sub: Submission) -> dict[str, Any]:
    return {
        "submission_id": sub.id,
        "kind": sub.kind,
        "status": sub.status,
        "model_path": sub.model_path,
        "score": sub.score,
        "received_at": iso(sub.received_at),
        "started_at": iso(sub.started_at),
        "finished_at": iso(sub.finished_at),
        "eval_seconds": sub.eval_seconds,
        "n_items": sub.n_items,
        "n_correct": sub.n_correct,
        "revision": sub.revision_seq,
        **failure_fields(sub),
    }


def wants_no_wait(request: Request) -> bool:
    return request.query_params.get("wait", "1") in ("0", "false", "no")


DRAIN_BYTES = 16 << 20
"""A body a little over the limit is read to its end and dropped before the 413 goes out, so an
ordinary client still sending reads the answer instead of a broken pipe; a longer one is
answered at once (its sender may see its send fail), never read."""


async def read_body(request: Request) -> bytes:
    """The request body, kept no further than ``MAX_BODY_BYTES``: a longer one is refused, read to
    its end and dropped when it is at most ``DRAIN_BYTES``, else refused before it is read."""
    declared = request.headers.get("content-length", "")
    if is_digits(declared) and int(declared) > MAX_BODY_BYTES:
        if int(declared) <= DRAIN_BYTES:
            await drain(request, 0)
        raise validation.too_large()
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            await drain(request, len(body))
            raise validation.too_large()
    return bytes(body)


async def drain(request: Request, seen: int) -> None:
    """Read and drop the rest of a body, up to ``DRAIN_BYTES`` in all (a client gone is fine)."""
    try:
        async for chunk in request.stream():
            seen += len(chunk)
            if seen > DRAIN_BYTES:
                return
    except ClientDisconnect:
        return


class Endpoints:
    """The route handlers over one grader."""

    def __init__(self, grader: Grader) -> None:
        self.grader = grader

    async def submit(self, request: Request) -> JSONResponse:
        grader = self.grader
        received = now()
        body: Any = None
        try:
            body = validation.parse_body(await read_body(request))
            sub_id, fut = await grader.accept(body, received)
        except Rejection as rej:
            refused = grader.reject(rej, validation.model_path_given(body), received)
            return JSONResponse(
                {"error": rej.code, "detail": rej.detail, "submission_id": refused},
                status_code=rej.status,
            )
        if wants_no_wait(request):
            return JSONResponse(
                {"submission_id": sub_id, "status": SubStatus.QUEUED, "queue_position": grader.queue.qsize()},
                status_code=202,
            )
        return JSONResponse(await fut)

    async def submissions(self, request: Request) -> JSONResponse:
        subs = self.grader.store.submissions()
        return JSONResponse({"submissions": [submission_json(s) for s in subs]})

    async def submission(self, request: Request) -> JSONResponse:
        try:
            sub_id = int(request.path_params["sub_id"])
            if not 0 <= sub_id < MAX_SUBMISSION_ID:
                raise ValueError(sub_id)
        except ValueError:
            return bad_request(request, 400, "invalid_id", "Submission ids are integers from 0, as /submissions "
                               "lists them.")
        sub = self.grader.store.submission(sub_id)
        if sub is None:
            return bad_request(request, 404, "not_found", f"There is no submission {sub_id}.")
        return JSONResponse({**submission_json(sub), **self.grader.result_of(sub_id)})

    async def time(self, request: Request) -> JSONResponse:
        store = self.grader.store
        run = store.run()
        t = now()
        deadline = run.deadline
        return JSONResponse(
            {
                "start_time": run.budget_start,
                "timeout_s": run.budget_s,
                "end_time": deadline,
                "last_submit_time": store.last_submit_time(),
                "now": t,
                "remaining": max(0.0, deadline - t) if deadline else None,
            }
        )

    async def health(self, request: Request) -> JSONResponse:
        grader = self.grader
        baseline = grader.store.baseline()
        ready = baseline is not None and baseline.status in (SubStatus.SCORED, SubStatus.FAILED)
        return JSONResponse(
            {
                "status": "ok" if ready else "starting",
                "task": grader.cfg.task_folder.name,
                "engine": grader.engine_name,
                "gpus": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
                "queue": grader.queue.qsize(),
                "baseline": grader.result_of(BASELINE_ID) if baseline else None,
            }
        )

    def routes(self) -> list[Route]:
        return [
            Route("/submit", self.submit, methods=["POST"]),
            Route("/submissions", self.submissions, methods=["GET"]),
            Route("/submissions/{sub_id}", self.submission, methods=["GET"]),
            Route("/time", self.time, methods=["GET"]),
            Route("/health", self.health, methods=["GET"]),
        ]


def bad_request(request: Request, status: int, code: str, detail: str) -> JSONResponse:
    """A 4xx for a request that is not a submission, recorded (``bad_request`` events, capped)."""
    grader = request.app.state.grader
    grader.bad_requests += 1
    n = grader.bad_requests
    if n <= BAD_REQUEST_EVENTS_KEPT or n % 100 == 0:
        try:
            grader.store.event("grader", "bad_request", f"{status} {code}: {request.method} "
                               f"{one_line(request.url.path[-200:])} ({n} so far)",
                               {"status": status, "code": code, "count": n})
        except Exception:  # noqa: BLE001 - the answer goes out whatever the record does
            log.exception("could not record a bad request")
    return error(status, code, detail)


async def not_found(request: Request, exc: Exception) -> JSONResponse:
    return bad_request(request, 404, "not_found",
                       "No such endpoint. Use $GRADING_SERVER_URL/submit, /submissions, /time or /health.")


async def method_not_allowed(request: Request, exc: Exception) -> JSONResponse:
    return bad_request(request, 405, "method_not_allowed", "Use POST for /submit and GET for the rest.")


async def server_error(request: Request, exc: Exception) -> JSONResponse:
    """Our own bug: the full error goes to grader.log and the record, the agent gets a code."""
    log.exception("unhandled error on %s", request.url.path)
    try:
        with RunStore.of_run(request.app.state.grader.cfg.run_dir) as store:
            store.event("grader", "request_failed", f"{request.method} {request.url.path[-200:]}: "
                        f"{type(exc).__name__}: {exc}"[:2000])
    except Exception:  # noqa: BLE001 - the answer goes out whatever the record does
        log.exception("could not record the failed request")
    return error(500, "internal_error", "The grader failed on this request; it is recorded. Try again, and "
                 "check GET /submissions for what was taken.")


class OwnerOnly:
    """ASGI middleware: only the user this grader runs as may reach it (``peer``); anyone else gets a
    403, and the record says so (the first ``FOREIGN_EVENTS_KEPT`` times, then every 100th)."""

    def __init__(self, app: ASGIApp, grader: Grader) -> None:
        self.app = app
        self.grader = grader
        self.refused = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or is_owner(scope.get("client"), scope.get("server")):
            await self.app(scope, receive, send)
            return
        self.refused += 1
        if self.refused <= FOREIGN_EVENTS_KEPT or self.refused % 100 == 0:
            client = scope.get("client")
            log.warning("refused a request from another user (%s, %d so far)", client, self.refused)
            self.grader.store.event("grader", "foreign_request", f"refused a {scope.get('method')} from another "
                                    f"user of this machine ({self.refused} so far)",
                                    {"client": list(client) if client else None, "refused": self.refused})
        response = error(403, "not_your_run", "This grader serves only the user who started the run.")
        await response(scope, receive, send)


def build_app(config: GraderConfig, secret: str) -> Starlette:
    """The app: the grader starts (baseline queued, spare worker warming) with its lifespan."""
    grader = Grader(config)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await grader.start()
        yield
        await grader.stop()

    app = Starlette(
        routes=[Mount(f"/{secret}", routes=Endpoints(grader).routes())],
        lifespan=lifespan,
        exception_handlers={404: not_found, 405: method_not_allowed, 500: server_error},
    )
    app.state.grader = grader
    app.add_middleware(OwnerOnly, grader=grader)
    return app
