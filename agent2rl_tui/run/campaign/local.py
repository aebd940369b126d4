"""The ``local`` backend: our own scheduler, a detached process that runs a campaign on this machine.

Detached like a run's supervisor (it outlives the terminal; ``python -m agent2rl_tui.run.campaign
FOLDER``), it starts the next queued run whenever a slot is free (one run per ``gpus_per_run``
GPUs, never more than ``max_parallel``), hands each its GPUs, closes the record of a run whose
supervisor died (lost), and beats in campaign.db; it ends when nothing is queued or running.
Runs have no jobs here: what the scheduler knows of them is their own record.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from agent2rl_tui.record import campaign_db
from agent2rl_tui.record.campaign_db import CampaignRow, JobInfo
from agent2rl_tui.record.root import RunError
from agent2rl_tui.record.store import ACTIVE_STATUSES
from agent2rl_tui.review.campaign_view import JobState
from agent2rl_tui.run.campaign.backend import Submitted
from agent2rl_tui.run.campaign.queue import CampaignQueue
from agent2rl_tui.run.campaign.spec import Cell, gpu_count
from agent2rl_tui.run.lifecycle import create_run, launch_supervisor, reconcile, stop_run
from agent2rl_tui.util import procs
from agent2rl_tui.util.timeutil import now

SCHEDULER_BEAT_S = 1.0
SCHEDULER_LOST_AFTER_S = 30.0


class LocalBackend:
    name = "local"

    def submit(self, campaign: CampaignQueue) -> Submitted:
        """Start the scheduler (unless one runs already: it picks up what is queued)."""
        if scheduler_alive(campaign):
            return Submitted()
        return Submitted(scheduler_pid=launch_scheduler(campaign.folder))

    def job_states(self, campaign: CampaignQueue, rows: Sequence[CampaignRow]) -> dict[str, JobInfo]:
        return {}  # no jobs: a run's state is its own record's

    def cancel(self, campaign: CampaignQueue, row: CampaignRow) -> None:
        if not row.run_dir:
            raise RunError(f"run {row.id} has not started: nothing to cancel")
        stop_run(Path(row.run_dir))


def free_gpus(total: int, active: Sequence[CampaignRow]) -> list[str]:
    """The GPUs no active run of the campaign holds."""
    used = {g for r in active for g in (r.gpus or "").split(",") if g}
    return [str(i) for i in range(total) if str(i) not in used]


def schedule_once(campaign: CampaignQueue) -> dict[str, int]:
    """Start queued runs while slots are free; the count of runs by state."""
    rows = campaign.rows()
    states = {r.id: campaign.state_of(r) for r in rows}
    active = _settle(rows, states)
    spec, gpu_total = campaign.spec, gpu_count()
    for row in [r for r in rows if states[r.id] == JobState.QUEUED]:
        if len(active) >= spec.max_parallel:
            break
        gpus = None
        if gpu_total:
            free = free_gpus(gpu_total, active)
            if len(free) < spec.gpus_per_run:
                break
            gpus = ",".join(free[:spec.gpus_per_run])
        if _start(campaign, row, gpus):
            active.append(campaign.row(row.id))
            states[row.id] = "created"
    return dict(Counter(states.values()))


def _settle(rows: Sequence[CampaignRow], states: dict[int, str]) -> list[CampaignRow]:
    """Close now the record of each run whose supervisor died (lost, its leftovers ended), not when
    its heartbeat times out; one already seen as lost may still need closing. The runs still active."""
    unsettled = [r for r in rows if r.run_dir and states[r.id] in (*ACTIVE_STATUSES, "lost")]
    for row in unsettled:
        states[row.id] = reconcile(Path(row.run_dir or ""))
    return [r for r in unsettled if states[r.id] in ACTIVE_STATUSES]


def _start(campaign: CampaignQueue, row: CampaignRow, gpus: str | None) -> bool:
    """Make the row's run and start its supervisor on ``gpus``; False: it stays queued, and says why."""
    req = campaign.spec.request(Cell.of(row), row.seed, campaign.folder).with_config(gpus=gpus)
    try:
        run_dir = create_run(req)
        launch_supervisor(run_dir, req.agent_env)
    except (RunError, OSError, ValueError) as exc:  # `campaign status` shows why
        campaign.set_error(row.id, f"could not start: {exc}")
        return False
    campaign.mark_started(row.id, run_dir, gpus)
    return True


def serve(folder: Path) -> None:
    """The scheduler's loop: beat, start what fits, until no run is queued or active."""
    with CampaignQueue(folder) as campaign:
        campaign_db.scheduler_started(campaign.db, os.getpid(), now())
        while True:
            counts = schedule_once(campaign)
            campaign_db.scheduler_beat(campaign.db, now())
            if not any(counts.get(s, 0) for s in (JobState.QUEUED, *ACTIVE_STATUSES)) \
                    and campaign_db.end_unless_queued(campaign.db, now()):
                return
            time.sleep(SCHEDULER_BEAT_S)


def scheduler_alive(campaign: CampaignQueue) -> bool:
    """True while the scheduler loops: it has not written ``ended_at`` (it may take a second
    to exit after that), its process lives and its heartbeat is recent."""
    meta = campaign.meta()
    return bool(meta.ended_at is None and meta.scheduler_pid and procs.pid_alive(meta.scheduler_pid)
                and now() - (meta.heartbeat_at or 0) < SCHEDULER_LOST_AFTER_S)


def launch_scheduler(folder: Path) -> int:
    """Start the campaign's scheduler in a new session (it outlives the terminal); its pid."""
    log = (folder / "scheduler.log").open("ab")
    with log:
        proc = subprocess.Popen([sys.executable, "-m", "agent2rl_tui.run.campaign", str(folder)],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True, env=dict(os.environ))
    return proc.pid
