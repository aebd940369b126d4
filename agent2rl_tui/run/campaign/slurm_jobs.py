"""What Slurm says of a campaign's jobs: the one place that runs ``squeue``, ``sacct`` and ``scancel``.

Part of the ``slurm`` backend (``run.campaign.slurm`` submits the jobs). Each job's state comes
from ``squeue`` while the controller holds the job, then from ``sacct`` (the accounting database,
else the job completion log, ``sacct -c``), and is worded here as a ``JobInfo`` (ended or not, why
it waits, how it ended, the last line of the log of a job that ended before its run started).
What is read is recorded in campaign.db (``record.campaign_db.record_jobs``), so that review,
which never runs a program, reads the same. A run whose job ended under it is closed here as lost.

``cluster = "local"`` in ``[slurm]`` (submitit's local executor) has no Slurm to ask: no job states.
"""

from __future__ import annotations

import dataclasses
import sqlite3
import subprocess
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from agent2rl_tui.record import campaign_db
from agent2rl_tui.record.campaign_db import CAMPAIGN_FILE, CampaignRow, JobInfo
from agent2rl_tui.record.root import RunError
from agent2rl_tui.record.store import RunStatus
from agent2rl_tui.review.index import summarize
from agent2rl_tui.run.campaign.queue import CampaignQueue
from agent2rl_tui.run.lifecycle import reconcile
from agent2rl_tui.util.timeutil import now

ENDED_STATES = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL",
                          "DEADLINE", "PREEMPTED", "REVOKED", "SPECIAL_EXIT"})
"""Slurm's states of a job that has ended (``squeue``/``sacct``); the rest are waiting or running."""
CLIENT_TIMEOUT_S = 60


def on_slurm(folder: Path) -> bool:
    """True for a campaign whose runs are real Slurm jobs (``backend = "slurm"``, not ``cluster = "local"``)."""
    try:
        raw = tomllib.loads((folder / CAMPAIGN_FILE).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return False
    return raw.get("backend") == "slurm" and raw.get("slurm", {}).get("cluster") in (None, "slurm")


def _client(*cmd: str) -> subprocess.CompletedProcess[str] | None:
    """Run a Slurm client; None where it cannot run (not installed, hung)."""
    try:
        return subprocess.run(list(cmd), capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None


def _lines(*cmd: str) -> list[list[str]]:
    """A Slurm client's ``|``-separated lines, [] where it fails (not installed, no controller, unknown ids)."""
    proc = _client(*cmd)
    if proc is None or proc.returncode != 0:
        return []
    return [line.split("|") for line in proc.stdout.splitlines() if line.strip()]


def job_info(state: str, reason: str = "", exit_code: str = "") -> JobInfo:
    """Slurm's words for a job as a ``JobInfo``: a pending job's reason (``None`` is none), an ended
    job's exit code when it is not ``0:0``."""
    ended = state in ENDED_STATES
    note = reason if state == "PENDING" and reason not in ("", "None") else ""
    if ended and exit_code not in ("", "0:0"):
        note = f"exit {exit_code}"
    return JobInfo(state, ended, note)


def job_states(job_ids: Iterable[str | None]) -> dict[str, JobInfo]:
    """Slurm's word on each job: ``squeue`` for the jobs the controller still holds (pending,
    running, and ended ones for ``MinJobAge``), then ``sacct`` for the others: the accounting
    database where there is one, else the job completion log (``sacct -c``, JobCompType).
    A job neither knows is left out."""
    ids = sorted({j for j in job_ids if j}, key=lambda j: (len(j), j))
    if not ids:
        return {}
    found = {r[0]: job_info(r[1], r[2]) for r in _lines("squeue", "-h", "-t", "all", "-o", "%i|%T|%r", "-j", ",".join(ids))
             if len(r) == 3}
    rest = [j for j in ids if j not in found]
    if rest:
        fields = ("-n", "-P", "-X", "-o", "JobID,State,ExitCode", "-j", ",".join(rest))
        for r in _lines("sacct", *fields) or _lines("sacct", "-c", *fields):
            if len(r) == 3 and r[0] in rest:
                found[r[0]] = job_info(r[1].split()[0] if r[1] else "", exit_code=r[2])  # "CANCELLED by 0"
    return found


def with_details(folder: Path, rows: Sequence[CampaignRow], jobs: dict[str, JobInfo]) -> dict[str, JobInfo]:
    """``jobs``, each ended job whose run never started given the last line of its log (submitit's
    ``<campaign>/slurm/<job id>/<job id>_0_log.err``): why it ended, where the job recorded nothing."""
    out = dict(jobs)
    for row in rows:
        job = jobs.get(row.job_id or "")
        if job is not None and job.ended and not row.run_dir and row.job_id:
            out[row.job_id] = dataclasses.replace(job, detail=last_line(folder / "slurm" / row.job_id /
                                                                         f"{row.job_id}_0_log.err"))
    return out


def last_line(path: Path, limit: int = 300) -> str:
    try:
        lines = [ln.strip() for ln in path.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:limit] if lines else ""


def rows_jobs(campaign: CampaignQueue, rows: Sequence[CampaignRow]) -> dict[str, JobInfo]:
    """Slurm's word on the jobs of ``rows`` ({} off Slurm), recorded in campaign.db; a run of ``rows``
    whose job ended under it is closed as lost first (``close_lost_runs``)."""
    if not on_slurm(campaign.folder):
        return {}
    fresh = ask(campaign.folder, rows)
    jobs = remembered(campaign_db.read_jobs(campaign.db), rows, fresh)
    record(campaign.folder, fresh)
    close_lost_runs(rows, jobs)
    return jobs


def campaign_jobs(campaign: CampaignQueue) -> dict[str, JobInfo]:
    """Slurm's word on the jobs of every run of the campaign, superseded attempts' included ({} for
    ``cluster = "local"``: no Slurm); a run whose job has ended under it is closed as lost first."""
    return rows_jobs(campaign, campaign.rows())


def unstarted_jobs(folder: Path) -> dict[str, JobInfo] | None:
    """For a reader: Slurm's word now on the jobs of the campaign's current runs that have not started
    (what their state depends on), recorded; None off Slurm (the reader reads what was recorded)."""
    if not on_slurm(folder):
        return None
    db = campaign_db.connect(folder, readonly=True)
    try:
        rows = [r for r in campaign_db.read_rows(db) if not r.run_dir and not r.superseded]
        known = campaign_db.read_jobs(db)
    finally:
        db.close()
    fresh = ask(folder, rows)
    record(folder, fresh)
    return remembered(known, rows, fresh)


def ask(folder: Path, rows: Sequence[CampaignRow]) -> dict[str, JobInfo]:
    """What Slurm says now of the jobs of ``rows`` (``job_states``, ``with_details``)."""
    return with_details(folder, rows, job_states(r.job_id for r in rows))


def remembered(known: Mapping[str, JobInfo], rows: Sequence[CampaignRow], fresh: Mapping[str, JobInfo]
               ) -> dict[str, JobInfo]:
    """``fresh``, and for a job of ``rows`` Slurm no longer knows (an ended job past ``MinJobAge``
    where ``sacct`` has no record of it), what it said last (``known``: recorded)."""
    ids = {r.job_id for r in rows if r.job_id}
    return {**{k: v for k, v in known.items() if k in ids}, **fresh}


def record(folder: Path, jobs: Mapping[str, JobInfo]) -> None:
    """Record ``jobs`` in the campaign's campaign.db, if it can be written (a copy under review may not)."""
    if not jobs:
        return
    try:
        db = campaign_db.connect(folder)
        try:
            campaign_db.record_jobs(db, jobs, now())
        finally:
            db.close()
    except (OSError, sqlite3.Error):
        pass


def close_lost_runs(rows: Sequence[CampaignRow], jobs: Mapping[str, JobInfo]) -> list[int]:
    """Close the record of each current run whose job has ended (killed hard: ``scancel --signal=KILL``,
    a node lost, the job's time limit passed) while its record still says it runs; the row ids.

    Its supervisor ran on the job's node, so its pid means nothing here: the run is lost when Slurm
    says the job has ended and its heartbeat has stopped (``review.index.effective_status``: none for
    ``LOST_AFTER_S``). A supervisor still closing its run (a job cancelled a moment ago, its
    processes in Slurm's ``KillWait``) keeps beating, and is left to finish. The record is closed
    as ``reconcile`` closes a local run: marked lost, its pending submissions failed, its report written.
    """
    closed = []
    for row in rows:
        job = jobs.get(row.job_id or "")
        if row.superseded or not row.run_dir or job is None or not job.ended:
            continue
        try:
            status = summarize(Path(row.run_dir)).status
        except Exception:  # noqa: BLE001, S112 - an unreadable run folder reads as failed, nothing to close
            continue
        if status == RunStatus.LOST:
            why = f"its Slurm job {row.job_id} ended {job} while the run was running (killed, or its node lost)"
            reconcile(Path(row.run_dir), gone=why)
            closed.append(row.id)
    return closed


def cancel_job(job_id: str) -> None:
    """``scancel`` the job: pending, it never runs; running, Slurm signals every process of it."""
    proc = _client("scancel", job_id)
    if proc is None or proc.returncode != 0:
        words = " ".join((proc.stderr if proc else "scancel could not run").split())
        raise RunError(f"scancel {job_id}: {words}")
