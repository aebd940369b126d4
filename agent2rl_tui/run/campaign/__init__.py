"""Campaigns: the matrix task x agent (x driver) x base model x seed, run as ordinary runs, queued.

A campaign file (TOML, ``docs/campaigns.md``) names the matrix, the options every run gets and
the backend that runs it. ``campaign start FILE`` pre-flights every cell (nothing is made if one
fails), makes the campaign folder (``<root>/campaigns/<UTC>-<name>/``: the file, ``campaign.db``,
and the run folders, so the TUI opened on it lists exactly its runs) and hands the queue to the
backend. A run that ends failed, lost or stopped is reported; ``campaign requeue`` queues it
again (a new run folder; the old one stays, marked superseded). Statistics over the seeds:
``review.campaign_view``.

The package, one concern a module:

- ``spec``: the campaign file (``CampaignSpec``, ``Cell``);
- ``queue``: the campaign folder and its queue, campaign.db (typed rows: ``record.campaign_db``);
- ``backend``: the protocol a backend keeps (submit, a job's state, cancel);
- ``local``: our scheduler process on this machine;
- ``slurm``, ``slurm_jobs``: Slurm jobs through submitit, and what Slurm says of them;
- ``control``: ``Campaign``, the queue with the backend its file names.

The names below are the package's face (the CLI imports them from here).
"""

from agent2rl_tui.record.campaign_db import CAMPAIGN_DB, CAMPAIGN_FILE, CampaignMeta, CampaignRow, JobInfo
from agent2rl_tui.run.campaign.backend import Backend, Submitted
from agent2rl_tui.run.campaign.control import JOBS_FRESH_S, Campaign, backend_for, campaign_runs
from agent2rl_tui.run.campaign.local import (
    SCHEDULER_BEAT_S,
    SCHEDULER_LOST_AFTER_S,
    LocalBackend,
    free_gpus,
    launch_scheduler,
    schedule_once,
    serve,
)
from agent2rl_tui.run.campaign.queue import CampaignQueue, create_campaign
from agent2rl_tui.run.campaign.slurm import SlurmBackend
from agent2rl_tui.run.campaign.spec import RUN_OPTIONS, CampaignSpec, Cell

__all__ = [
    "CAMPAIGN_DB", "CAMPAIGN_FILE", "JOBS_FRESH_S", "RUN_OPTIONS", "SCHEDULER_BEAT_S", "SCHEDULER_LOST_AFTER_S",
    "Backend", "Campaign", "CampaignMeta", "CampaignQueue", "CampaignRow", "CampaignSpec", "Cell", "JobInfo",
    "LocalBackend", "SlurmBackend", "Submitted", "backend_for", "campaign_runs", "create_campaign", "free_gpus",
    "launch_scheduler", "schedule_once", "serve",
]
