"""A campaign with its backend: what the commands and the TUI hold of one.

``Campaign`` is the queue (``run.campaign.queue``) with the backend its file names
(``backend_for``): a row's state asks the backend about the row's job when the row's run has
not started (its job may have ended: failed before its run), and ``requeue`` lets the backend
close a run whose job ended under it first. This is the one module that knows both backends;
neither knows the other.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from agent2rl_tui.record.campaign_db import CampaignRow, JobInfo
from agent2rl_tui.record.root import RunError
from agent2rl_tui.review import campaign_view
from agent2rl_tui.review.campaign_view import CampaignRun
from agent2rl_tui.run.campaign import local, slurm_jobs
from agent2rl_tui.run.campaign.backend import Backend, Submitted
from agent2rl_tui.run.campaign.queue import CampaignQueue
from agent2rl_tui.run.campaign.slurm import SlurmBackend
from agent2rl_tui.run.campaign.spec import CampaignSpec

JOBS_FRESH_S = 5.0
"""How long one answer of the scheduler serves ``Campaign.state_of`` (a status of many pending jobs asks once)."""
REQUEUEABLE = ("failed", "lost", "stopped")


def backend_for(spec: CampaignSpec) -> Backend:
    """The backend the campaign file names (``backend = "local"``, the default, or ``"slurm"``)."""
    return SlurmBackend() if spec.backend == "slurm" else local.LocalBackend()


class Campaign(CampaignQueue):
    """A campaign folder: its file, its queue (campaign.db), its run folders, and its backend."""

    def __init__(self, folder: Path) -> None:
        super().__init__(folder)
        self._jobs: tuple[float, dict[str, JobInfo]] | None = None  # the scheduler's word on the jobs, and when

    @property
    def backend(self) -> Backend:
        return backend_for(self.spec)

    def start(self) -> Submitted:
        """Hand the queued runs to the backend (``Backend.submit``)."""
        return self.backend.submit(self)

    def state_of(self, row: CampaignRow, job: JobInfo | None = None) -> str:
        """The row's state as the results read it (``review.campaign_view.run_state``); that of a row
        whose run has not started depends on its job, which the backend is asked about (``job``: given)."""
        if job is None and row.job_id and not row.run_dir and not row.superseded:
            job = self._unstarted_jobs().get(row.job_id)
        return super().state_of(row, job)

    def _unstarted_jobs(self) -> dict[str, JobInfo]:
        if self._jobs is None or time.monotonic() - self._jobs[0] > JOBS_FRESH_S:
            rows = [r for r in self.rows() if not r.run_dir]
            self._jobs = (time.monotonic(), self.backend.job_states(self, rows))
        return self._jobs[1]

    def job_states(self, rows: Sequence[CampaignRow] | None = None) -> dict[str, JobInfo]:
        """What the backend's scheduler says now of the jobs of ``rows`` (every row's by default)."""
        return self.backend.job_states(self, self.rows() if rows is None else rows)

    def requeue(self, ref: str) -> int:
        """Queue a failed, lost or stopped run's cell and seed again; the new row's id."""
        row = self.current(ref)
        if row.job_id:
            self.job_states()  # a run whose job ended under it is closed (lost) before it is superseded
            self._jobs = None
        state = self.state_of(row)
        if state not in REQUEUEABLE:
            raise RunError(f"run {ref} is {state}; only failed, lost or stopped runs are queued again")
        return self.requeue_row(row)

    def cancel(self, ref: str) -> None:
        """Stop one current run through the backend (``Backend.cancel``)."""
        self.backend.cancel(self, self.current(ref))

    def scheduler_alive(self) -> bool:
        """True while the local scheduler loops (``run.campaign.local.scheduler_alive``)."""
        return local.scheduler_alive(self)


def campaign_runs(folder: Path) -> list[CampaignRun]:
    """``review.campaign_view.read_runs`` with what the campaign's scheduler says now of the jobs of
    its runs that have not started (Slurm: ``squeue``, then ``sacct``), which review cannot ask."""
    return campaign_view.read_runs(folder, jobs=slurm_jobs.unstarted_jobs(folder))
