"""The Slurm backend's former module, kept as an import path: its names now live in
``run.campaign.slurm`` (submitting the jobs, the job's own process) and ``run.campaign.slurm_jobs``
(what Slurm says of them). The CLI imports from here; so does every job submitted before the
move, whose pickle names ``agent2rl_tui.run.campaign_slurm.run_job``.
"""

from __future__ import annotations

from agent2rl_tui.record.campaign_db import CampaignRow, JobInfo
from agent2rl_tui.review import campaign_view
from agent2rl_tui.run.campaign.queue import CampaignQueue
from agent2rl_tui.run.campaign.slurm import (
    GENERIC,
    JOB_VARIABLES,
    MARGIN_S,
    STOP_REPORT_S,
    SlurmBackend,
    executor_for,
    job_environment,
    run_job,
    stop_lead_s,
    submit_queued,
    time_limit_min,
)
from agent2rl_tui.run.campaign.slurm_jobs import ENDED_STATES, campaign_jobs, close_lost_runs, job_states

__all__ = [
    "ENDED_STATES", "GENERIC", "JOB_VARIABLES", "MARGIN_S", "STOP_REPORT_S", "JobInfo", "SlurmBackend",
    "campaign_jobs", "close_lost_runs", "executor_for", "failed_before_run", "job_environment", "job_states",
    "run_job", "stop_lead_s", "submit_queued", "time_limit_min",
]


def failed_before_run(campaign: CampaignQueue, row: CampaignRow, job: JobInfo | None) -> str | None:
    """Why a run's job ended before the run started (None: it has not ended, or the run started):
    ``review.campaign_view.failed_before_run``, the rule every reader of the campaign shares."""
    return campaign_view.failed_before_run(row, job)
