"""The grader service: DESIGN.md's HTTP API on 127.0.0.1, one evaluation at a time.

Every ``POST /submit`` that reaches the server becomes a row in run.db before anything
else happens, so no submission is lost: bad input is recorded as ``rejected`` with the
error the agent got back, accepted ones are ``queued`` and then evaluated in order by a
single consumer, each in a fresh eval worker process (started ahead of need) with a
timeout. The baseline (the base model, submission 0) goes through the same path when the
server starts, before the agent's budget begins. All routes live under a per-run secret
path prefix, so only the run's agent (who got the URL) can submit.

Run as ``python -m agent2rl_tui.grader.server --run-dir DIR (--fd N | --port N)``, with
the secret in ``$AGENT2RL_GRADER_SECRET``. Heavy imports stay out of this process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import socket
import sys
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent2rl_tui.grader.launch import SECRET_ENV
from agent2rl_tui.record.revisions import Revision, SnapshotError, Snapshotter
from agent2rl_tui.record.store import BASELINE_ID, RunStore, Submission, SubStatus
from agent2rl_tui.tasks.modelfiles import check_model_folder, files_leaving
from agent2rl_tui.util.timeutil import iso, now

log = logging.getLogger("agent2rl.grader")
MAX_BODY_BYTES = 1 << 20
WORKER_LOG_TAIL = 1500  # characters of a failed worker's output quoted to the agent


def _tail(path: Path, limit: int = WORKER_LOG_TAIL) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - limit))
            return fh.read().decode("utf-8", "replace").strip()
    except OSError:
        return ""


@dataclass
class Rejection(Exception):
    """A request the grader refuses, with the HTTP status and advice for the agent."""

    status: int
    code: str
    detail: str


@dataclass(frozen=True)
class GraderConfig:
    run_dir: Path
    workspace: Path
    task_folder: Path
    base_model_dir: Path
    eval_timeout_s: float
    eval_limit: int | None = None

    @classmethod
    def from_run(cls, run_dir: Path) -> GraderConfig:
        with RunStore.of_run(run_dir) as store:
            run = store.run()
        cfg = json.loads(run["config_json"])
        workspace = (run_dir / "workspace").resolve()
        return cls(
            run_dir=run_dir.resolve(),
            workspace=workspace,
            task_folder=Path(cfg["task_folder"]),
            base_model_dir=workspace / "models" / run["base_model"],
            eval_timeout_s=float(cfg.get("eval_timeout_s", 1800)),
            eval_limit=cfg.get("eval_limit"),
        )


class Grader:
    """The queue, the consumer and the worker pool of one run's grader."""

    def __init__(self, config: GraderConfig) -> None:
        self.cfg = config
        self.store = RunStore.of_run(config.run_dir)
        self.queue: asyncio.Queue[int] = asyncio.Queue()
        self.waiters: dict[int, list[asyncio.Future[dict[str, Any]]]] = {}
        self.spare: asyncio.subprocess.Process | None = None
        self.current: asyncio.subprocess.Process | None = None
        self.consumer: asyncio.Task[None] | None = None
        self.log_path = config.run_dir / "logs" / "grader.log"
        self.snapshotter = Snapshotter(config.run_dir)
        self.engine_name = "-"
        self.worker_logs: dict[int, Path] = {}  # worker pid -> its output file
        self.workers_started = 0

    # -- lifecycle --------------------------------------------------------------------
    async def start(self) -> None:
        await self._spawn_spare()
        baseline = self.store.baseline()
        if baseline is None or baseline.status not in (SubStatus.SCORED, SubStatus.FAILED):
            self.store.add_submission(
                kind="baseline",
                status=SubStatus.QUEUED,
                model_path=str(self.cfg.base_model_dir),
                resolved_path=str(self.cfg.base_model_dir),
            )
        # Anything left queued or half-evaluated by an earlier grader of this run goes again.
        for sub in self.store.submissions():
            if sub.status in (SubStatus.QUEUED, SubStatus.EVALUATING):
                self.store.update_submission(sub.id, status=SubStatus.QUEUED)
                self.queue.put_nowait(sub.id)
        self.consumer = asyncio.create_task(self._consume())

    async def stop(self) -> None:
        if self.consumer:
            self.consumer.cancel()
        for proc in (self.current, self.spare):
            if proc and proc.returncode is None:
                _kill_group(proc.pid)
                await proc.wait()
        self.store.close()

    # -- workers ----------------------------------------------------------------------
    async def _start_worker(self, gpu: str | None = None) -> asyncio.subprocess.Process:
        env = dict(os.environ)
        env.pop(SECRET_ENV, None)
        env.setdefault("TOKENIZERS_PARALLELISM", "false")
        # vLLM in a worker that imported torch: spawn its engine processes, never fork.
        env.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")
        if gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = gpu
        self.workers_started += 1
        log_path = self.cfg.run_dir / "logs" / "workers" / f"worker-{self.workers_started}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("ab") as logfh:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "agent2rl_tui.grader.worker", stdin=asyncio.subprocess.PIPE,
                stdout=logfh, stderr=logfh, start_new_session=True, env=env,
            )
        self.worker_logs[proc.pid] = log_path
        return proc

    def _keep_worker_log(self, proc: asyncio.subprocess.Process, sub_id: int, out_dir: Path) -> str:
        """Move a used worker's output to evals/<n>/worker.log; its last lines."""
        path = self.worker_logs.pop(proc.pid, None)
        if path is None or not path.exists():
            return ""
        kept = out_dir / "worker.log"
        try:
            path.replace(kept)
        except OSError:
            kept = path
        log.info("submission %s: eval worker output in %s", sub_id, kept.relative_to(self.cfg.run_dir))
        return _tail(kept)

    async def _spawn_spare(self) -> None:
        self.spare = await self._start_worker()

    async def _take_worker(self, gpu: str | None = None) -> asyncio.subprocess.Process:
        """The warm spare for this job (its successor starts importing at once); a submission
        that names its GPUs gets a worker started with them."""
        if gpu is not None:
            return await self._start_worker(gpu)
        if self.spare is None or self.spare.returncode is not None:
            await self._spawn_spare()
        proc = self.spare
        assert proc is not None
        await self._spawn_spare()
        return proc

    # -- evaluation -------------------------------------------------------------------
    async def _consume(self) -> None:
        while True:
            sub_id = await self.queue.get()
            try:
                await self._evaluate(sub_id)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the grader must outlive any one eval
                log.exception("evaluation of submission %s crashed the grader's consumer", sub_id)
                try:
                    self.store.update_submission(
                        sub_id, status=SubStatus.FAILED, finished_at=now(), error=f"grader error: {exc}"
                    )
                except Exception:  # noqa: BLE001 - a restarted grader re-queues it
                    log.exception("could not record the failure of submission %s", sub_id)
            try:
                result: dict[str, Any] = self.result_of(sub_id)
            except Exception as exc:  # noqa: BLE001 - the waiter must get an answer all the same
                log.exception("could not read the result of submission %s", sub_id)
                result = {"submission_id": sub_id, "status": "unknown",
                          "error": f"the grader could not read the result ({exc}); ask GET /submissions/{sub_id}"}
            for fut in self.waiters.pop(sub_id, []):
                if not fut.done():
                    fut.set_result(result)

    async def _evaluate(self, sub_id: int) -> None:
        sub = self.store.submission(sub_id)
        assert sub is not None and sub.resolved_path
        out_dir = self.cfg.run_dir / "evals" / str(sub_id)
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "summary.json").unlink(missing_ok=True)
        if sub.kind == "agent":  # the folder may have changed while it waited in the queue
            try:
                self.check_model_path(sub.model_path or "", expected=Path(sub.resolved_path))
            except Rejection as rej:
                log.warning("submission %s failed its re-check: %s", sub_id, rej.code)
                self.store.update_submission(sub_id, status=SubStatus.FAILED, finished_at=now(),
                                             error=f"{rej.code}: {rej.detail}")
                return
        self.store.update_submission(sub_id, status=SubStatus.EVALUATING, started_at=now())
        log.info("evaluating submission %s: %s", sub_id, sub.resolved_path)
        proc = await self._take_worker(sub.gpu)
        self.current = proc
        job = {
            "submission_id": sub_id,
            "model_path": sub.resolved_path,
            "task_folder": str(self.cfg.task_folder),
            "out_dir": str(out_dir),
            "limit": self.cfg.eval_limit,
        }
        error: str | None = None
        try:
            assert proc.stdin is not None
            proc.stdin.write((json.dumps(job) + "\n").encode())
            await proc.stdin.drain()
            proc.stdin.close()
            await asyncio.wait_for(proc.wait(), timeout=self.cfg.eval_timeout_s)
        except TimeoutError:
            _kill_group(proc.pid)
            await proc.wait()
            error = (
                f"evaluation timed out after {self.cfg.eval_timeout_s:g} s and was killed; "
                "check that the model generates an end-of-turn token"
            )
        except (BrokenPipeError, ConnectionResetError):
            await proc.wait()
        finally:
            self.current = None
        worker_tail = self._keep_worker_log(proc, sub_id, out_dir)
        summary_path = out_dir / "summary.json"
        try:
            summary = json.loads(summary_path.read_text()) if summary_path.exists() else None
        except (OSError, ValueError):
            summary = None
        if error is None and summary is None:
            error = (
                f"the eval worker exited with code {proc.returncode} without a result "
                "(killed, or out of memory?)" + (f"; its last output:\n{worker_tail}" if worker_tail else "")
            )
        if error is None and summary and not summary.get("ok"):
            error = str(summary.get("error"))
        if error:
            log.warning("submission %s failed: %s", sub_id, error)
            self.store.update_submission(sub_id, status=SubStatus.FAILED, finished_at=now(), error=error)
            return
        assert summary is not None
        self.engine_name = summary["engine"]
        self.store.update_submission(
            sub_id,
            status=SubStatus.SCORED,
            finished_at=now(),
            score=float(summary["score"]),
            n_items=int(summary["n_items"]),
            n_correct=int(summary["n_correct"]),
            weights_hash=summary["weights_hash"],
            engine=summary["engine"],
            settings_json=json.dumps(summary["settings"]),
            timings_json=json.dumps(summary["timings"]),
        )
        log.info("submission %s scored %.2f", sub_id, summary["score"])

    def snapshot_for_submission(self) -> Revision | None:
        """The code as it stands when a model is submitted (a snapshot, forced now)."""
        try:
            revision, _ = self.snapshotter.snapshot("submission")
            return revision
        except SnapshotError as exc:
            log.warning("could not snapshot the workspace for a submission: %s", exc)
            with RunStore.of_run(self.cfg.run_dir) as store:
                store.event("grader", "snapshot_failed", f"submission snapshot failed: {exc}")
            return None

    # -- answers ----------------------------------------------------------------------
    def result_of(self, sub_id: int) -> dict[str, Any]:
        """The /submit answer: AutoRL-Bench's fields plus status and error."""
        sub = self.store.submission(sub_id)
        assert sub is not None
        baseline = self.store.baseline()
        base_score = baseline.score if baseline and baseline.status == SubStatus.SCORED else None
        best = self.store.best()
        total = sum(1 for s in self.store.submissions(kind="agent") if s.status != SubStatus.REJECTED)
        improvement = (
            round(sub.score - base_score, 6)
            if sub.score is not None and base_score is not None
            else None
        )
        out: dict[str, Any] = {
            "submission_id": sub.id,
            "status": sub.status,
            "score": sub.score,
            "baseline_score": base_score,
            "improvement": improvement,
            "best": {"submission_id": best.id, "score": best.score} if best else None,
            "total_submissions": total,
            "eval_seconds": sub.eval_seconds,
        }
        if sub.error:
            out["error"] = sub.error
        return out

    def validate(self, body: Any) -> tuple[str, Path, str | None]:
        """The model path as given, its resolved folder and the gpu field, or a Rejection."""
        run = self.store.run()
        if run["deadline"] is None:
            raise Rejection(409, "not_started", "The run's budget has not started yet.")
        if now() > run["deadline"]:
            raise Rejection(
                409,
                "deadline_passed",
                f"The time budget ended at {iso(run['deadline'])}; no more submissions are taken.",
            )
        if not isinstance(body, dict):
            raise Rejection(400, "invalid_json", 'Send a JSON object: {"model_path": "output/v1"}.')
        raw = body.get("model_path")
        if not isinstance(raw, str) or not raw.strip():
            raise Rejection(
                400,
                "missing_model_path",
                'The JSON body needs "model_path": the folder of the saved model, '
                'e.g. {"model_path": "output/v1"} (relative to the workspace) or an absolute path.',
            )
        gpu = body.get("gpu")
        if gpu is not None and not isinstance(gpu, (str, int)):
            raise Rejection(400, "invalid_gpu", '"gpu" must be a string such as "0" or "0,1".')
        resolved = self.check_model_path(raw)
        return raw, resolved, None if gpu is None else str(gpu)

    def check_model_path(self, raw: str, expected: Path | None = None) -> Path:
        """The real folder of ``raw``: inside the workspace, every file in it too, a full model.

        Run when a submission arrives and again when its evaluation starts (``expected``:
        the folder it resolved to then), so a folder swapped for a symlink in between is
        caught.
        """
        if "\x00" in raw:
            raise Rejection(400, "invalid_path", "model_path contains a NUL byte.")
        path = Path(raw)
        if not path.is_absolute():
            path = self.cfg.workspace / path
        resolved = Path(os.path.realpath(path))
        if not resolved.is_relative_to(self.cfg.workspace):
            raise Rejection(
                403,
                "outside_workspace",
                f"{raw} resolves to {resolved}, which is outside the workspace "
                f"{self.cfg.workspace}. Save models under $OUTPUT_DIR and submit that path; "
                "symlinks and '..' that leave the workspace are refused.",
            )
        if expected is not None and resolved != expected:
            raise Rejection(409, "path_changed",
                            f"{raw} resolved to {expected} when submitted and to {resolved} now; "
                            "keep a submitted folder in place until it is scored.")
        problem = check_model_folder(resolved)
        if problem:
            raise Rejection(404 if problem.code == "not_found" else 422, problem.code, problem.detail)
        leaving = files_leaving(resolved, self.cfg.workspace)
        if leaving:
            raise Rejection(
                403,
                "outside_workspace",
                f"{leaving[0]} in {raw} is a link to a file outside the workspace"
                f"{f' (and {len(leaving) - 1} more)' if len(leaving) > 1 else ''}. "
                "Copy the files into the model folder instead of linking them.",
            )
        return resolved


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _submission_json(sub: Submission) -> dict[str, Any]:
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


def build_app(config: GraderConfig, secret: str):  # -> Starlette
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Mount, Route

    grader = Grader(config)

    def error(status: int, code: str, detail: str) -> JSONResponse:
        return JSONResponse({"error": code, "detail": detail}, status_code=status)

    async def submit(request: Request) -> JSONResponse:
        body_bytes = await request.body()
        body: Any = None
        raw_path: str | None = None
        try:
            if len(body_bytes) > MAX_BODY_BYTES:
                raise Rejection(413, "too_large", "The request body is over 1 MB; send only model_path.")
            try:
                body = json.loads(body_bytes or b"null")
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise Rejection(
                    400,
                    "invalid_json",
                    f'The body is not valid JSON ({exc}). Send {{"model_path": "output/v1"}} '
                    "with Content-Type: application/json.",
                ) from None
            if isinstance(body, dict) and isinstance(body.get("model_path"), str):
                raw_path = body["model_path"]
            raw, resolved, gpu = grader.validate(body)
        except Rejection as rej:
            sub_id = grader.store.add_submission(
                kind="agent",
                status=SubStatus.REJECTED,
                model_path=raw_path,
                finished_at=now(),
                error=f"{rej.code}: {rej.detail}",
            )
            log.info("submission %s rejected: %s", sub_id, rej.code)
            return JSONResponse(
                {"error": rej.code, "detail": rej.detail, "submission_id": sub_id},
                status_code=rej.status,
            )
        revision = await asyncio.to_thread(grader.snapshot_for_submission)
        sub_id = grader.store.add_submission(
            kind="agent", status=SubStatus.QUEUED, model_path=raw, resolved_path=str(resolved), gpu=gpu,
            revision_seq=revision.seq if revision else None, revision_sha=revision.sha if revision else None,
        )
        log.info("submission %s queued: %s", sub_id, resolved)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        grader.waiters.setdefault(sub_id, []).append(fut)
        grader.queue.put_nowait(sub_id)
        if request.query_params.get("wait", "1") in ("0", "false", "no"):
            return JSONResponse(
                {"submission_id": sub_id, "status": SubStatus.QUEUED, "queue_position": grader.queue.qsize()},
                status_code=202,
            )
        return JSONResponse(await fut)

    async def submissions(request: Request) -> JSONResponse:
        subs = grader.store.submissions()
        return JSONResponse({"submissions": [_submission_json(s) for s in subs]})

    async def submission(request: Request) -> JSONResponse:
        try:
            sub_id = int(request.path_params["sub_id"])
        except ValueError:
            return error(400, "invalid_id", "Submission ids are integers.")
        sub = grader.store.submission(sub_id)
        if sub is None:
            return error(404, "not_found", f"There is no submission {sub_id}.")
        return JSONResponse({**_submission_json(sub), **grader.result_of(sub_id)})

    async def time_(request: Request) -> JSONResponse:
        run = grader.store.run()
        agent_subs = [s for s in grader.store.submissions(kind="agent") if s.status != SubStatus.REJECTED]
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

    async def health(request: Request) -> JSONResponse:
        baseline = grader.store.baseline()
        ready = baseline is not None and baseline.status in (SubStatus.SCORED, SubStatus.FAILED)
        return JSONResponse(
            {
                "status": "ok" if ready else "starting",
                "task": config.task_folder.name,
                "engine": grader.engine_name,
                "gpus": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
                "queue": grader.queue.qsize(),
                "baseline": grader.result_of(BASELINE_ID) if baseline else None,
            }
        )

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

    @asynccontextmanager
    async def lifespan(app: Starlette):  # type: ignore[no-untyped-def]
        await grader.start()
        yield
        await grader.stop()

    routes = [
        Route("/submit", submit, methods=["POST"]),
        Route("/submissions", submissions, methods=["GET"]),
        Route("/submissions/{sub_id}", submission, methods=["GET"]),
        Route("/time", time_, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
    ]
    app = Starlette(
        routes=[Mount(f"/{secret}", routes=routes)],
        lifespan=lifespan,
        exception_handlers={404: not_found, 405: method_not_allowed, 500: server_error},
    )
    app.state.grader = grader
    return app


def configure_logging() -> None:
    import time as _time

    handler = logging.StreamHandler(sys.stderr)
    fmt = logging.Formatter("%(asctime)s.%(msecs)03dZ %(levelname)s %(name)s: %(message)s", "%Y-%m-%dT%H:%M:%S")
    fmt.converter = _time.gmtime
    handler.setFormatter(fmt)
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)


def main(argv: list[str] | None = None) -> int:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", type=Path, required=True)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--fd", type=int, help="an inherited listening socket")
    where.add_argument("--port", type=int, help="bind 127.0.0.1:PORT (0 picks a free one)")
    args = parser.parse_args(argv)
    configure_logging()
    secret = os.environ.get(SECRET_ENV)
    if not secret:
        parser.error(f"set {SECRET_ENV} to the run's secret path prefix")
    config = GraderConfig.from_run(args.run_dir)
    if args.fd is not None:
        sock = socket.socket(fileno=args.fd)
    else:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", args.port))
        sock.listen(64)
    log.info("grader for %s on 127.0.0.1:%s", config.run_dir.name, sock.getsockname()[1])
    app = build_app(config, secret)
    server = uvicorn.Server(
        # A /submit waiting on its score must not hold a stopping grader up: after 3 s the
        # lifespan shutdown runs and kills the workers.
        uvicorn.Config(app, log_config=None, access_log=False, lifespan="on", timeout_keep_alive=75,
                       timeout_graceful_shutdown=3)
    )
    asyncio.run(server.serve(sockets=[sock]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
