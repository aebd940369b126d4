"""The HTTP API (DESIGN.md) of one run's grader: a Starlette app, every route under the
run's secret path prefix, every error a JSON object with a code and advice for the agent."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

from agent2rl_tui.grader.server import validation
from agent2rl_tui.grader.server.config import GraderConfig
from agent2rl_tui.grader.server.queue import Grader
from agent2rl_tui.grader.server.validation import Rejection
from agent2rl_tui.record.store import BASELINE_ID, Submission, SubStatus
from agent2rl_tui.util.timeutil import iso, now

log = logging.getLogger("agent2rl.grader")


def error(status: int, code: str, detail: str) -> JSONResponse:
    return JSONResponse({"error": code, "detail": detail}, status_code=status)


def submission_json(sub: Submission) -> dict[str, Any]:
    return {
        "submission_id": sub.id,
        "kind": sub.kind,
        "status": sub.status,
        "model_path": sub.model_path,
        "score": sub.score,
        "error": sub.error,
        "received_at": iso(sub.received_at),
        "started_at": iso(sub.started_at),
        "finished_at": iso(sub.finished_at),
        "eval_seconds": sub.eval_seconds,
        "n_items": sub.n_items,
        "n_correct": sub.n_correct,
        "revision": sub.revision_seq,
    }


def wants_no_wait(request: Request) -> bool:
    return request.query_params.get("wait", "1") in ("0", "false", "no")


class Endpoints:
    """The route handlers over one grader."""

    def __init__(self, grader: Grader) -> None:
        self.grader = grader

    async def submit(self, request: Request) -> JSONResponse:
        grader = self.grader
        body: Any = None
        try:
            body = validation.parse_body(await request.body())
            accepted = validation.validate(body, grader.store.run(), grader.cfg.workspace)
        except Rejection as rej:
            sub_id = grader.reject(rej, validation.model_path_given(body))
            return JSONResponse(
                {"error": rej.code, "detail": rej.detail, "submission_id": sub_id},
                status_code=rej.status,
            )
        revision = await asyncio.to_thread(grader.snapshot_for_submission)
        sub_id, fut = grader.enqueue(accepted, revision)
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
        except ValueError:
            return error(400, "invalid_id", "Submission ids are integers.")
        sub = self.grader.store.submission(sub_id)
        if sub is None:
            return error(404, "not_found", f"There is no submission {sub_id}.")
        return JSONResponse({**submission_json(sub), **self.grader.result_of(sub_id)})

    async def time(self, request: Request) -> JSONResponse:
        store = self.grader.store
        run = store.run()
        agent_subs = [s for s in store.submissions(kind="agent") if s.status != SubStatus.REJECTED]
        t = now()
        deadline = run["deadline"]
        return JSONResponse(
            {
                "start_time": run["budget_start"],
                "timeout_s": run["budget_s"],
                "end_time": deadline,
                "last_submit_time": max((s.received_at for s in agent_subs), default=None),
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


async def not_found(request: Request, exc: Exception) -> JSONResponse:
    return error(
        404,
        "not_found",
        "No such endpoint. Use $GRADING_SERVER_URL/submit, /submissions, /time or /health.",
    )


async def method_not_allowed(request: Request, exc: Exception) -> JSONResponse:
    return error(405, "method_not_allowed", "Use POST for /submit and GET for the rest.")


async def server_error(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error on %s", request.url.path)
    return error(500, "internal_error", f"The grader failed on this request: {exc}")


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
    return app
