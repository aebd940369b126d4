"""The Slurm backend's former module, kept only for jobs submitted before it moved: their pickle
names ``agent2rl_tui.run.campaign_slurm.run_job``. Everything else lives in ``run.campaign.slurm``
(submitting the jobs, the job's own process) and ``run.campaign.slurm_jobs`` (what Slurm says).
"""

from __future__ import annotations

from agent2rl_tui.run.campaign.slurm import run_job

__all__ = ["run_job"]
