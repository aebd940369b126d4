"""Campaign runs as Slurm jobs, through submitit: beyond one box, on an engine that exists.

With ``backend = "slurm"`` in the campaign file, ``campaign start`` submits each queued run
as one job instead of starting the local scheduler. The job, on its node, makes the run
folder (under the campaign folder: it must be on a file system the login node and the TUI
share), records it in campaign.db, and runs the run's supervisor until the run ends. Slurm
gives the job its GPUs (``gpus_per_node`` = the campaign's ``gpus_per_run``) and with them
``CUDA_VISIBLE_DEVICES``; Slurm, not us, decides how many run at once.

The job's time limit is the run's budget, plus its grace period, plus two evaluations (the
baseline's before the budget and the last submission's after it, each at most the task's
``eval_timeout_s``), plus 10 minutes for start-up and the report. ``[slurm]`` in the
campaign file passes submitit's Slurm parameters (``partition``, ``account``, ``qos``,
``constraint``, ``mem_gb``, ``cpus_per_task``, ``additional_parameters``); ``cluster =
"local"`` runs the jobs as local processes (submitit's local executor), which is how the tests
run it.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from agent2rl_tui.record.index import RunError, summarize
from agent2rl_tui.run.campaign import Campaign, CampaignSpec, Cell
from agent2rl_tui.run.lifecycle import create_run, launch_supervisor
from agent2rl_tui.tasks.registry import load_task
from agent2rl_tui.util.timeutil import now, parse_duration

GENERIC = ("mem_gb", "cpus_per_task")
"""submitit parameters every cluster takes; the rest of ``[slurm]`` is passed as ``slurm_<key>``."""
MARGIN_S = 600.0


def time_limit_min(spec: CampaignSpec, cell: Cell) -> int:
    """Budget + grace + two evaluations + 10 minutes, in whole minutes."""
    task = load_task(cell.task)
    grace = parse_duration(str(spec.options["grace"])) if spec.options.get("grace") else 30.0
    eval_s = float(spec.options.get("eval_timeout_s") or task.eval_timeout_s)
    return int((spec.budget_s + grace + 2 * eval_s + MARGIN_S + 59) // 60)


def run_job(folder: str, row_id: int) -> str:
    """What one job does on its node: make the run, record it, supervise it to its end; its status."""
    with Campaign(Path(folder)) as campaign:
        row = campaign.db.execute("SELECT * FROM runs WHERE id = ?", (row_id,)).fetchone()
        spec = campaign.spec
        cell = Cell(row["task"], row["agent"], row["driver"], row["base_model"], row["command"])
        req = spec.request(cell, row["seed"], Path(folder))
        try:
            run_dir = create_run(req)
        except RunError as exc:
            campaign.db.execute("UPDATE runs SET error = ? WHERE id = ?", (f"could not start: {exc}", row_id))
            raise
        campaign.db.execute("UPDATE runs SET run_dir = ?, started_at = ?, gpus = ? WHERE id = ?",
                            (str(run_dir), now(), os.environ.get("CUDA_VISIBLE_DEVICES"), row_id))
    pid = launch_supervisor(run_dir, req.agent_env)
    os.waitpid(pid, 0)  # the supervisor is our child: the job lasts as long as the run
    return summarize(run_dir).status


def executor_for(campaign: Campaign, spec: CampaignSpec, cell: Cell, table: dict[str, Any]) -> Any:
    import submitit

    cluster = table.get("cluster")
    executor = submitit.AutoExecutor(folder=campaign.folder / "slurm" / "%j", cluster=cluster)
    params: dict[str, Any] = {"timeout_min": time_limit_min(spec, cell), "name": f"a2rl-{spec.name}",
                              "gpus_per_node": spec.gpus_per_run if executor.cluster != "local" else 0}
    for key, value in table.items():
        if key == "cluster":
            continue
        params[key if key in GENERIC else f"slurm_{key}"] = value
    if executor.cluster != "slurm":  # the local/debug executors take the generic parameters only
        params = {k: v for k, v in params.items() if not k.startswith("slurm_")}
    executor.update_parameters(**params)
    return executor


def submit_queued(campaign: Campaign) -> list[tuple[int, str]]:
    """Submit every queued run that has no job yet; (row id, job id) for each."""
    raw = campaign.spec_raw()
    table = dict(raw.get("slurm", {}))
    spec = campaign.spec
    out = []
    for row in campaign.rows():
        if row["superseded"] or row["run_dir"] or row["job_id"]:
            continue
        cell = Cell(row["task"], row["agent"], row["driver"], row["base_model"], row["command"])
        job = executor_for(campaign, spec, cell, table).submit(run_job, str(campaign.folder), int(row["id"]))
        try:
            campaign.db.execute("UPDATE runs SET job_id = ? WHERE id = ?", (str(job.job_id), row["id"]))
        except sqlite3.OperationalError as exc:  # noqa: PERF203 - a locked db: say so, the job still runs
            raise RunError(f"job {job.job_id} submitted, but campaign.db could not record it: {exc}") from exc
        out.append((int(row["id"]), str(job.job_id)))
    return out
