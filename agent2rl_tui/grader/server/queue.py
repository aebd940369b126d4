"""The evaluation queue of one run's grader: its single consumer, the timeouts, the answers.

Submissions are evaluated one at a time, in order, by the run's eval worker (see
``workers``), which gets each job as one JSON line on stdin, writes ``summary.json`` to the
submission's eval folder and answers with a line. A worker that runs past the run's eval
timeout is killed, group and all, and replaced. What a previous grader of the same run left queued or half-evaluated is queued
again at start, and the baseline (submission 0) is queued first if it has no result yet.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

from agent2rl_tui.grader.server.config import GraderConfig
from agent2rl_tui.grader.server.validation import Accepted, Rejection, check_model_path
from agent2rl_tui.grader.server.workers import JobTimeout, Worker, WorkerPool
from agent2rl_tui.record.revisions import Revision, SnapshotError, Snapshotter
from agent2rl_tui.record.store import RunStore, Submission, SubStatus
from agent2rl_tui.util.timeutil import now

log = logging.getLogger("agent2rl.grader")
Result = dict[str, Any]


class Grader:
    """The queue, the consumer and the worker pool of one run's grader."""

    def __init__(self, config: GraderConfig) -> None:
        self.cfg = config
        self.store = RunStore.of_run(config.run_dir)
        self.queue: asyncio.Queue[int] = asyncio.Queue()
        self.waiters: dict[int, list[asyncio.Future[Result]]] = {}
        self.workers = WorkerPool(config.run_dir, preimport_vllm=_grades_on_vllm(config))
        self.consumer: asyncio.Task[None] | None = None
        self.snapshotter = Snapshotter(config.run_dir)
        self.engine_name = "-"

    # -- lifecycle --------------------------------------------------------------------
    async def start(self) -> None:
        await self.workers.start_spare()
        self._add_baseline()
        self._requeue_unfinished()
        self.consumer = asyncio.create_task(self._consume())

    async def stop(self) -> None:
        if self.consumer:
            self.consumer.cancel()
        await self.workers.stop()
        self.store.close()

    def _add_baseline(self) -> None:
        baseline = self.store.baseline()
        if baseline is None or baseline.status not in (SubStatus.SCORED, SubStatus.FAILED):
            self.store.add_submission(
                kind="baseline",
                status=SubStatus.QUEUED,
                model_path=str(self.cfg.base_model_dir),
                resolved_path=str(self.cfg.base_model_dir),
            )

    def _requeue_unfinished(self) -> None:
        """Anything left queued or half-evaluated by an earlier grader of this run goes again."""
        for sub in self.store.submissions():
            if sub.status in (SubStatus.QUEUED, SubStatus.EVALUATING):
                self.store.update_submission(sub.id, status=SubStatus.QUEUED)
                self.queue.put_nowait(sub.id)

    # -- intake -----------------------------------------------------------------------
    def reject(self, rej: Rejection, raw_path: str | None) -> int:
        """Record a refused submission; its id."""
        sub_id = self.store.add_submission(
            kind="agent",
            status=SubStatus.REJECTED,
            model_path=raw_path,
            finished_at=now(),
            error=f"{rej.code}: {rej.detail}",
        )
        log.info("submission %s rejected: %s", sub_id, rej.code)
        return sub_id

    def enqueue(self, sub: Accepted, revision: Revision | None) -> tuple[int, asyncio.Future[Result]]:
        """Record an accepted submission and queue it; its id and a future for its result."""
        sub_id = self.store.add_submission(
            kind="agent", status=SubStatus.QUEUED, model_path=sub.raw, resolved_path=str(sub.resolved), gpu=sub.gpu,
            revision_seq=revision.seq if revision else None, revision_sha=revision.sha if revision else None,
        )
        log.info("submission %s queued: %s", sub_id, sub.resolved)
        fut: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self.waiters.setdefault(sub_id, []).append(fut)
        self.queue.put_nowait(sub_id)
        return sub_id, fut

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

    # -- the consumer -----------------------------------------------------------------
    async def _consume(self) -> None:
        while True:
            sub_id = await self.queue.get()
            await self._evaluate_safely(sub_id)
            self._answer_waiters(sub_id)

    async def _evaluate_safely(self, sub_id: int) -> None:
        try:
            await self._evaluate(sub_id)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the grader must outlive any one eval
            log.exception("evaluation of submission %s crashed the grader's consumer", sub_id)
            try:
                self._fail(sub_id, f"grader error: {exc}", quiet=True)
            except Exception:  # noqa: BLE001 - a restarted grader re-queues it
                log.exception("could not record the failure of submission %s", sub_id)

    def _answer_waiters(self, sub_id: int) -> None:
        try:
            result = self.result_of(sub_id)
        except Exception as exc:  # noqa: BLE001 - the waiter must get an answer all the same
            log.exception("could not read the result of submission %s", sub_id)
            result = {"submission_id": sub_id, "status": "unknown",
                      "error": f"the grader could not read the result ({exc}); ask GET /submissions/{sub_id}"}
        for fut in self.waiters.pop(sub_id, []):
            if not fut.done():
                fut.set_result(result)

    # -- one evaluation ---------------------------------------------------------------
    async def _evaluate(self, sub_id: int) -> None:
        sub = self.store.submission(sub_id)
        assert sub is not None and sub.resolved_path
        out_dir = self.cfg.run_dir / "evals" / str(sub_id)
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "summary.json").unlink(missing_ok=True)
        if not self._still_valid(sub):
            return
        self.store.update_submission(sub_id, status=SubStatus.EVALUATING, started_at=now())
        log.info("evaluating submission %s: %s", sub_id, sub.resolved_path)
        worker = await self.workers.take(sub.gpu)
        log_start = worker.log_size()
        error = await self._run_job(worker, self._job(sub, out_dir))
        worker_tail = self.workers.keep_log(worker, log_start, sub_id, out_dir)
        summary = _read_summary(out_dir / "summary.json")
        error = error or _summary_error(summary, worker, worker_tail)
        if error:
            self._fail(sub_id, error)
            return
        assert summary is not None
        self._record_score(sub_id, summary)

    def _still_valid(self, sub: Submission) -> bool:
        """An agent's folder may have changed while it waited in the queue: check it again."""
        if sub.kind != "agent":
            return True
        try:
            check_model_path(sub.model_path or "", self.cfg.workspace, expected=Path(sub.resolved_path or ""))
        except Rejection as rej:
            log.warning("submission %s failed its re-check: %s", sub.id, rej.code)
            self._fail(sub.id, f"{rej.code}: {rej.detail}", quiet=True)
            return False
        return True

    def _job(self, sub: Submission, out_dir: Path) -> dict[str, Any]:
        return {
            "submission_id": sub.id,
            "model_path": sub.resolved_path,
            "task_folder": str(self.cfg.task_folder),
            "out_dir": str(out_dir),
            "limit": self.cfg.eval_limit,
            "engine": self.cfg.engine,
            "prompt_profile": self.cfg.prompt_profile,
            "judge": self.cfg.judge,
            "seed": self.cfg.seed,
            "search": self.cfg.search,
            "store": self.cfg.store,
        }

    async def _run_job(self, worker: Worker, job: dict[str, Any]) -> str | None:
        """Hand the job to the worker and wait for its answer; an error if it timed out."""
        try:
            await self.workers.run(worker, job, self.cfg.eval_timeout_s)
        except JobTimeout:
            return (
                f"evaluation timed out after {self.cfg.eval_timeout_s:g} s and was killed; "
                "check that the model generates an end-of-turn token"
            )
        return None

    def _fail(self, sub_id: int, error: str, *, quiet: bool = False) -> None:
        if not quiet:
            log.warning("submission %s failed: %s", sub_id, error)
        self.store.update_submission(sub_id, status=SubStatus.FAILED, finished_at=now(), error=error)

    def _record_score(self, sub_id: int, summary: dict[str, Any]) -> None:
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

    # -- answers ----------------------------------------------------------------------
    def result_of(self, sub_id: int) -> Result:
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
        out: Result = {
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


def _read_summary(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text()) if path.exists() else None
    except (OSError, ValueError):
        return None


def _summary_error(summary: dict[str, Any] | None, worker: Worker, worker_tail: str) -> str | None:
    """Why a worker's evaluation failed, or None if it scored."""
    if summary is None:
        return (
            f"the eval worker exited with code {worker.proc.returncode} without a result "
            "(killed, or out of memory?)" + (f"; its last output:\n{worker_tail}" if worker_tail else "")
        )
    if summary and not summary.get("ok"):
        return str(summary.get("error"))
    return None


def _grades_on_vllm(cfg: GraderConfig) -> bool:
    """Whether the run's baseline will be graded on vLLM (so a waiting worker imports it early)."""
    from agent2rl_tui.grader.engines import EngineError, engine_for
    from agent2rl_tui.tasks.registry import TaskError, engine_settings, load_task

    try:
        settings = engine_settings(load_task(cfg.task_folder).engine, cfg.engine)
        return engine_for(settings.engine, cfg.base_model_dir)[0] == "vllm"
    except (EngineError, TaskError, OSError, ValueError):
        return False
