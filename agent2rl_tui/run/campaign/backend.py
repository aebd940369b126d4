"""What runs a campaign's queued runs: the protocol both backends keep, ``local`` and ``slurm``.

The campaign file's ``backend`` key picks one (``run.campaign.control.backend_for``). A backend
hands queued runs to its scheduler, says what that scheduler knows of each run's job, and
cancels one run; everything else (the queue, the spec, a row's state, requeue) is shared and
knows no backend. The two backends never import each other (an import-linter contract in
pyproject.toml), and only the Slurm one runs Slurm's programs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from agent2rl_tui.record.campaign_db import CampaignRow, JobInfo
from agent2rl_tui.run.campaign.queue import CampaignQueue


@dataclass(frozen=True)
class Submitted:
    """What ``Backend.submit`` started: the local scheduler's pid, or one job per queued run."""

    scheduler_pid: int | None = None
    jobs: list[tuple[int, str]] = field(default_factory=list)
    """(row id, job id) of each job submitted, in queue order."""


class Backend(Protocol):
    name: str
    """The campaign file's ``backend`` value."""

    def submit(self, campaign: CampaignQueue) -> Submitted:
        """Hand the queued runs to the scheduler: ``local`` starts our scheduler process, which starts
        each run when a slot is free; ``slurm`` submits one job per queued run that has none."""
        ...

    def job_states(self, campaign: CampaignQueue, rows: Sequence[CampaignRow]) -> dict[str, JobInfo]:
        """What the scheduler says now of the jobs of ``rows``, by job id, recorded in campaign.db for
        the readers that cannot ask (``review.campaign_view``); {} where runs have no jobs (``local``).
        A run of ``rows`` whose job ended under it is closed as lost first, so what is then read of
        it is its end."""
        ...

    def cancel(self, campaign: CampaignQueue, row: CampaignRow) -> None:
        """Stop one run: ``local`` stops its run (SIGTERM to its supervisor); ``slurm`` cancels its
        job (``scancel``: pending, it never runs; running, the supervisor closes the run as stopped)."""
        ...
