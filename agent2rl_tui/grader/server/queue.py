"""The evaluation queue of one run's grader: its single consumer, the timeouts, the answers.

Submissions are evaluated one at a time, in order, by the run's eval worker (see
``workers``), which gets each job as one JSON line on stdin, writes ``summary.json`` to the
submission's eval folder and answers with a line. What is evaluated is the grader's own copy
of the submitted folder, taken at acceptance (``intake``), and removed once scored unless
the run keeps submissions. A worker that runs past the run's eval timeout or over its memory
limit is killed, group and all, and replaced. What a previous grader of the same run left
queued or half-evaluated is queued again at start, and the baseline (submission 0) is queued
first if it has no result yet. At most ``max_queued`` submissions wait at once, so the
evaluations a run owes after its deadline are bounded.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import shutil
import sqlite3
from functools import cached_property
from pathlib import Path
from typing import Any

from agent2rl_tui.grader.failures import EvalFailure, advice
from agent2rl_tui.grader.server import intake as intake_mod
from agent2rl_tui.grader.server import validation
from agent2rl_tui.grader.server.config import GraderConfig
from agent2rl_tui.grader.server.intake import BaseModel, Intake, Manifest
from agent2rl_tui.grader.server.validation import Accepted, Rejection, recordable
from agent2rl_tui.grader.server.workers import JobOutOfMemory, JobTimeout, Worker, WorkerPool
from agent2rl_tui.record.evaljob import EvalJob, WorkerSummary
from agent2rl_tui.record.progress import EvalProgress, write_progress_quietly
from agent2rl_tui.record.revisions import Revision, SnapshotError, Snapshotter
from agent2rl_tui.record.store import RunStore, Submission, SubStatus
from agent2rl_tui.util.diskfull import disk_full_message, is_disk_full
from agent2rl_tui.util.timeutil import now

log = logging.getLogger("agent2rl.grader")
Result = dict[str, Any]
MAX_REJECTED_ROWS = 10_000
REFUSALS_RETRY_S = 5.0
"""How often refusals a full disk kept out of run.db are tried again."""


class Grader:
    """The queue, the consumer and the worker pool of one run's grader."""

    def __init__(self, config: GraderConfig) -> None:
        self.cfg = config
        self.store = RunStore.of_run(config.run_dir)
        self.queue: asyncio.Queue[int] = asyncio.Queue()
        self.waiters: dict[int, list[asyncio.Future[Result]]] = {}
        self.workers = WorkerPool(config.run_dir, preimport_vllm=_grades_on_vllm(config),
                                  script=config.scripted_worker)
        self.consumer: asyncio.Task[None] | None = None
        self.snapshotter = Snapshotter(config.run_dir)
        self.engine_name = "-"
        self.intake_dir = config.run_dir / "intake"
        self.taking = 0  # intakes in progress (they count against max_queued too)
        self.rejected = self.store.rejected_count()
        self.bad_requests = 0  # requests other than submissions answered 4xx (routes.bad_request)
        self.flood: dict[str, int] = {}
        self.unrecorded: list[dict[str, Any]] = []  # refusals a full disk kept out of run.db, in order
        self.recorder: asyncio.Task[None] | None = None

    @cached_property
    def base(self) -> BaseModel:
        """What every submission is held to: the base model's tensors, architecture and tokenizer."""
        return BaseModel.read(self.cfg.base_model_dir)

    # -- lifecycle --------------------------------------------------------------------
    async def start(self) -> None:
        for stale in self.intake_dir.glob("pending-*"):  # copies a killed grader was taking
            shutil.rmtree(stale, ignore_errors=True)
        await self.workers.start_spare()
        await self._add_baseline()
        self._requeue_unfinished()
        self.consumer = asyncio.create_task(self._consume())
        self.recorder = asyncio.create_task(self._record_refusals_meanwhile())

    async def stop(self) -> None:
        for task in (self.consumer, self.recorder):
            if task:
                task.cancel()
        await self.workers.stop()
        self.record_refusals()  # the supervisor gives back its room before it stops us: a last try
        self.store.close()

    async def _record_refusals_meanwhile(self) -> None:
        while True:
            await asyncio.sleep(REFUSALS_RETRY_S)
            if self.unrecorded:
                self.record_refusals()

    async def _add_baseline(self) -> None:
        """Queue the base model (the grader's copy of it, taken as any submission is)."""
        baseline = self.store.baseline()
        if baseline is not None and baseline.status in (SubStatus.SCORED, SubStatus.FAILED):
            return
        if baseline is not None and baseline.intake_json and Intake.from_json(baseline.intake_json).folder.is_dir():
            return  # queued by an earlier grader of this run, copy and all: requeued below
        base = self.cfg.base_model_dir
        fields: dict[str, Any] = {"model_path": str(base), "resolved_path": str(base)}
        try:
            taken = await asyncio.to_thread(self._take_into, base, None, self.intake_dir / "0")
            fields["intake_json"] = taken.to_json()
            status = SubStatus.QUEUED
        except Rejection as rej:
            status, fields = SubStatus.FAILED, {**fields, "error": f"{rej.code}: the base model: {rej.detail}",
                                                "error_code": "model_load_failed", "finished_at": now()}
        self.store.add_submission(kind="baseline", status=status, **fields)

    def _take_into(self, folder: Path, workspace: Path | None, dest: Path) -> Intake:
        """The grader's copy of ``folder`` in ``dest``; ``workspace`` None: the base model itself."""
        shutil.rmtree(dest, ignore_errors=True)  # a copy a killed grader left half made
        return intake_mod.take(folder, workspace, dest, max_bytes=self.cfg.max_submission_bytes,
                               base=None if workspace is None else self.base)

    def _requeue_unfinished(self) -> None:
        """Anything left queued or half-evaluated by an earlier grader of this run goes again."""
        for sub in self.store.submissions():
            if sub.status in (SubStatus.QUEUED, SubStatus.EVALUATING):
                self.store.update_submission(sub.id, status=SubStatus.QUEUED)
                self.queue.put_nowait(sub.id)

    # -- intake -----------------------------------------------------------------------
    async def accept(self, body: Any, received: float) -> tuple[int, asyncio.Future[Result]]:
        """Check a decoded /submit body, take the grader's copy, snapshot the code and queue it: its
        id and a future for its result, or a Rejection. The slot it takes in the queue is held from
        the first check on, so parallel requests cannot pass ``max_queued`` while one is copied."""
        waiting = self.store.pending_count() + self.taking
        if waiting >= self.cfg.max_queued:
            raise Rejection(429, "queue_full", f"{waiting} submissions are waiting to be evaluated (at most "
                            f"{self.cfg.max_queued}); wait until GET /submissions shows them scored, then submit.")
        self.taking += 1
        dest = self.intake_dir / f"pending-{secrets.token_hex(8)}"
        try:
            accepted = await asyncio.to_thread(validation.validate, body, self.store.run(), self.cfg.workspace,
                                               after_the_run=self.cfg.after_the_run)
            try:
                taken = await asyncio.to_thread(self._take_into, accepted.resolved, self.cfg.workspace, dest)
                revision = await asyncio.to_thread(self.snapshot_for_submission)
                return self.enqueue(accepted, taken, revision, received)
            except (OSError, sqlite3.Error) as exc:
                if is_disk_full(exc):  # the agent's checkpoints may have filled it: say so, and how to go on
                    full = disk_full_message(self.cfg.run_dir.parent)
                    log.error("could not take a submission: %s", full)
                    raise Rejection(507, "disk_full", f"{full}: the grader could not take its copy of the model. "
                                    "Delete checkpoints you no longer need, then submit again.") from exc
                if isinstance(exc, sqlite3.Error):
                    raise
                log.error("could not take a submission: %s: %s", type(exc).__name__, exc)  # ours, not the agent's
                raise Rejection(503, "intake_failed", "The grader could not take a copy of the model (it is "
                                "recorded); submit again in a minute.") from exc
        finally:
            self.taking -= 1
            shutil.rmtree(dest, ignore_errors=True)  # nothing there once queued (renamed to intake/<n>)

    def reject(self, rej: Rejection, raw_path: str | None, received: float) -> int | None:
        """Record a refused submission; its id. Past ``MAX_REJECTED_ROWS`` refusals, a flood of bad
        requests is counted instead (an event every 1,000, by code), so the record stays bounded."""
        self.rejected += 1
        if self.rejected > MAX_REJECTED_ROWS:
            self.flood[rej.code] = self.flood.get(rej.code, 0) + 1
            if self.rejected % 1000 == 0:
                self.store.event("grader", "rejections_counted", f"{self.rejected} submissions refused; past the "
                                 f"first {MAX_REJECTED_ROWS:,} they are counted, not recorded one by one",
                                 {"refused": self.rejected, "by_code": self.flood})
            return None
        row = {"kind": self.cfg.submission_kind, "status": SubStatus.REJECTED, "model_path": raw_path, "received_at": received,
               "finished_at": now(), "error": recordable(f"{rej.code}: {rej.detail}"), "error_code": rej.code}
        self.unrecorded.append(row)
        sub_id = self.record_refusals()
        if sub_id is not None:
            log.info("submission %s rejected: %s", sub_id, rej.code)
        return sub_id

    def record_refusals(self) -> int | None:
        """Record the refusals that wait (a full disk kept them from run.db), in order; the last one's
        id, or None while the record still refuses writes (they wait, in memory, for the next try)."""
        sub_id = None
        while self.unrecorded:
            try:
                sub_id = self.store.add_submission(**self.unrecorded[0])
            except sqlite3.OperationalError as exc:
                log.warning("%d refused submission(s) wait to be recorded: %s", len(self.unrecorded),
                            disk_full_message(self.cfg.run_dir.parent) if is_disk_full(exc) else exc)
                return None
            self.unrecorded.pop(0)
        return sub_id

    def enqueue(self, sub: Accepted, taken: Intake, revision: Revision | None,
                received: float) -> tuple[int, asyncio.Future[Result]]:
        """Record an accepted submission and queue it; its id and a future for its result."""
        self.record_refusals()  # any that waited for room go first, in the order they came
        sub_id = self.store.add_submission(
            kind=self.cfg.submission_kind, status=SubStatus.QUEUED, model_path=sub.raw, resolved_path=str(sub.resolved),
            revision_seq=revision.seq if revision else None, revision_sha=revision.sha if revision else None,
            received_at=received,
        )
        folder = self.intake_dir / str(sub_id)
        shutil.rmtree(folder, ignore_errors=True)
        taken.folder.rename(folder)
        self.store.update_submission(sub_id, intake_json=Intake(folder, taken.manifest).to_json())
        log.info("submission %s queued: %s (%d file(s), %d bytes taken in %.2f s)", sub_id, sub.resolved,
                 len(taken.manifest.files), taken.manifest.bytes, taken.manifest.copy_seconds)
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
                self._fail(sub_id, "grader_error", f"grader error: {type(exc).__name__}: {exc}")
            except Exception:  # noqa: BLE001 - a restarted grader re-queues it
                log.exception("could not record the failure of submission %s", sub_id)
        finally:
            self._discard_copy(sub_id)

    def _discard_copy(self, sub_id: int) -> None:
        """Remove the grader's copy of a submission once it is settled (``keep_submissions`` keeps it)."""
        sub = self.store.submission(sub_id)
        if self.cfg.keep_submissions or sub is None or sub.status in (SubStatus.QUEUED, SubStatus.EVALUATING):
            return
        shutil.rmtree(self.intake_dir / str(sub_id), ignore_errors=True)

    def _answer_waiters(self, sub_id: int) -> None:
        try:
            result = self.result_of(sub_id)
        except Exception:  # noqa: BLE001 - the waiter must get an answer all the same
            log.exception("could not read the result of submission %s", sub_id)
            result = {"submission_id": sub_id, "status": "unknown", "error": "grader_error",
                      "detail": f"The grader could not read the result; ask GET /submissions/{sub_id}."}
        for fut in self.waiters.pop(sub_id, []):
            if not fut.done():
                fut.set_result(result)

    # -- one evaluation ---------------------------------------------------------------
    async def _evaluate(self, sub_id: int) -> None:
        sub = self.store.submission(sub_id)
        assert sub is not None
        out_dir = self.cfg.run_dir / "evals" / str(sub_id)
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "summary.json").unlink(missing_ok=True)
        taken = Intake.from_json(sub.intake_json) if sub.intake_json else None
        if taken is None or not taken.folder.is_dir():
            self._fail(sub_id, "intake_lost", f"the grader's copy of submission {sub_id} is gone "
                       f"({taken.folder if taken else 'never taken'})")
            return
        folder, manifest = str(taken.folder), taken.manifest
        (out_dir / "manifest.json").write_text(json.dumps(manifest.to_dict(), indent=2), encoding="utf-8")
        started = now()
        self.store.update_submission(sub_id, status=SubStatus.EVALUATING, started_at=started)
        # Said at once: the worker may need seconds to start before it counts anything.
        write_progress_quietly(out_dir, EvalProgress("start", 0, self.cfg.eval_limit or 0, started, started))
        log.info("evaluating submission %s: %s", sub_id, sub.resolved_path)
        worker = await self.workers.take()
        log_start = worker.log_size()
        failure = await self._run_job(worker, self._job(sub, folder, manifest, out_dir))
        worker_tail = self.workers.keep_log(worker, log_start, sub_id, out_dir)
        summary = _read_summary(out_dir / "summary.json")
        failure = failure or _summary_failure(summary, worker, worker_tail)
        if failure:
            self._fail(sub_id, failure.code, failure.message)
            return
        assert summary is not None
        self._record_score(sub_id, summary)

    def _job(self, sub: Submission, folder: str, manifest: Manifest, out_dir: Path) -> EvalJob:
        return EvalJob(
            submission_id=sub.id,
            model_path=folder,
            weight_files=manifest.weight_names,
            task_folder=str(self.cfg.task_folder),
            out_dir=str(out_dir),
            limit=self.cfg.eval_limit,
            engine=self.cfg.engine,
            prompt_profile=self.cfg.prompt_profile,
            decoding_row=self.cfg.decoding_row,
            judge=self.cfg.judge,
            eval_seed=self.cfg.eval_seed,
            search=self.cfg.search,
            store=self.cfg.store,
        )

    async def _run_job(self, worker: Worker, job: EvalJob) -> EvalFailure | None:
        """Hand the job to the worker and wait for its answer; a failure if it was killed."""
        try:
            await self.workers.run(worker, job.to_json(), self.cfg.eval_timeout_s, self.cfg.eval_memory_bytes)
        except JobTimeout:
            return EvalFailure("eval_timeout", f"evaluation timed out after {self.cfg.eval_timeout_s:g} s and "
                               "was killed")
        except JobOutOfMemory as oom:
            return EvalFailure("out_of_memory", f"the eval worker used {oom.used / (1 << 30):.2f} GiB, over the "
                               f"limit of {oom.limit / (1 << 30):.2f} GiB, and was killed")
        return None

    def _fail(self, sub_id: int, code: str, message: str) -> None:
        log.warning("submission %s failed (%s): %s", sub_id, code, message)
        self.store.update_submission(sub_id, status=SubStatus.FAILED, finished_at=now(), error=f"{code}: {message}",
                                     error_code=code)

    def _record_score(self, sub_id: int, summary: WorkerSummary) -> None:
        assert summary.score is not None
        self.engine_name = summary.engine or "-"
        self.store.update_submission(
            sub_id,
            status=SubStatus.SCORED,
            finished_at=now(),
            score=float(summary.score),
            n_items=summary.n_items,
            n_correct=summary.n_correct,
            weights_hash=summary.weights_hash,
            engine=summary.engine,
            settings_json=summary.settings.to_settings_json(),
            timings_json=json.dumps(summary.timings),
        )
        log.info("submission %s scored %.2f", sub_id, summary.score)

    # -- answers ----------------------------------------------------------------------
    def result_of(self, sub_id: int) -> Result:
        """The /submit answer: AutoRL-Bench's fields plus status and error."""
        sub = self.store.submission(sub_id)
        assert sub is not None
        baseline = self.store.baseline()
        base_score = baseline.score if baseline and baseline.status == SubStatus.SCORED else None
        best = self.store.best()
        total = self.store.agent_submission_count()
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
            "n_items": sub.n_items,
            "n_correct": sub.n_correct,
        }
        if sub.status == SubStatus.FAILED:
            out.update(error=sub.error_code or "evaluation_failed", detail=advice(sub.error_code))
        ignored = Intake.from_json(sub.intake_json).manifest.ignored_settings if sub.intake_json else []
        if ignored:
            out["ignored_settings"] = ignored
            out["note"] = ("Decoding is the task's: these settings of the model folder were not applied. "
                           "The grader generates as the task's description says.")
        return out


def _read_summary(path: Path) -> WorkerSummary | None:
    """The worker's answer; None where it left none (or none it could have written)."""
    try:
        return WorkerSummary.from_json(json.loads(path.read_text())) if path.exists() else None
    except (OSError, ValueError, RecursionError):  # EvalJobError is a ValueError
        return None


def _summary_failure(summary: WorkerSummary | None, worker: Worker, worker_tail: str) -> EvalFailure | None:
    """Why a worker's evaluation failed, or None if it scored."""
    if summary is None:
        return EvalFailure("worker_died", f"the eval worker exited with code {worker.proc.returncode} without a "
                           "result (killed, or out of memory?)" + (f"; its last output:\n{worker_tail}"
                                                                    if worker_tail else ""))
    if not summary.ok:
        return EvalFailure(summary.error_code or "evaluation_failed", str(summary.error))
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
