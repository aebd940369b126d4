"""The ``slurm`` backend: a campaign's runs as Slurm jobs, through submitit; beyond one box.

With ``backend = "slurm"`` in the campaign file, each queued run is submitted as one job instead
of starting the local scheduler. The job, on its node, in the campaign folder (``--chdir``; it
must be on a file system the login node, the nodes and the TUI share), makes the run folder,
records it in campaign.db, and runs the run's supervisor until the run ends (``run_job``). Slurm
gives the job its GPUs (``gpus_per_node`` = the campaign's ``gpus_per_run``, none asked when it
is 0) and with them ``CUDA_VISIBLE_DEVICES``; Slurm, not us, decides how many run at once. What
Slurm says of the jobs (``squeue``, ``sacct``, ``scancel``) is ``run.campaign.slurm_jobs``.

The job's time limit is the run's budget, plus its grace period, plus two evaluations (the
baseline's before the budget and the last submission's after it, each at most the task's
``eval_timeout_s``), plus 10 minutes for start-up and the report. ``[slurm]`` in the
campaign file passes submitit's Slurm parameters (``partition``, ``account``, ``qos``,
``constraint``, ``mem_gb``, ``cpus_per_task``, ``additional_parameters``); ``cluster =
"local"`` runs the jobs as local processes (submitit's local executor). The tests run both:
tests/system/test_campaign_slurm_real.py on a real one-node Slurm (tests/support/slurm_cluster.py).
"""

from __future__ import annotations

import os
import signal
import sqlite3
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agent2rl_tui.record.campaign_db import CampaignRow, JobInfo
from agent2rl_tui.record.root import RunError
from agent2rl_tui.review.index import summarize
from agent2rl_tui.run.campaign import slurm_jobs
from agent2rl_tui.run.campaign.backend import Submitted
from agent2rl_tui.run.campaign.queue import CampaignQueue
from agent2rl_tui.run.campaign.spec import CampaignSpec, Cell
from agent2rl_tui.run.lifecycle import create_run, launch_supervisor, stop_run
from agent2rl_tui.run.request import RunRequest
from agent2rl_tui.tasks.registry import load_task
from agent2rl_tui.util.timeutil import iso, now, parse_duration

GENERIC = ("mem_gb", "cpus_per_task")
"""submitit parameters every cluster takes; the rest of ``[slurm]`` is passed as ``slurm_<key>``."""
MARGIN_S = 600.0
STOP_REPORT_S = 60.0


class SlurmBackend:
    name = "slurm"

    def submit(self, campaign: CampaignQueue) -> Submitted:
        return Submitted(jobs=submit_queued(campaign))

    def job_states(self, campaign: CampaignQueue, rows: Sequence[CampaignRow]) -> dict[str, JobInfo]:
        return slurm_jobs.rows_jobs(campaign, rows)

    def cancel(self, campaign: CampaignQueue, row: CampaignRow) -> None:
        if slurm_jobs.on_slurm(campaign.folder) and row.job_id:
            slurm_jobs.cancel_job(row.job_id)
        elif row.run_dir:  # cluster = "local": the job is a process of this machine, its run a local run
            stop_run(Path(row.run_dir))
        else:
            raise RunError(f"run {row.id} has no job to cancel")


def _grace_and_eval_s(spec: CampaignSpec, cell: Cell) -> tuple[float, float]:
    grace = parse_duration(str(spec.options["grace"])) if spec.options.get("grace") else 30.0
    return grace, float(spec.options.get("eval_timeout_s") or load_task(cell.task).eval_timeout_s)


def time_limit_min(spec: CampaignSpec, cell: Cell) -> int:
    """Budget + grace + two evaluations + 10 minutes, in whole minutes: what the run needs."""
    grace, eval_s = _grace_and_eval_s(spec, cell)
    return int((spec.budget_s + grace + 2 * eval_s + MARGIN_S + 59) // 60)


def stop_lead_s(spec: CampaignSpec, cell: Cell) -> int:
    """How long before its time limit Slurm warns the job (``--signal``, submitit's
    ``signal_delay_s``): enough to stop the run as a budget ends, the agent's grace, one
    evaluation (the submissions queued), a minute for the report. The job asks for this
    much time beyond what the run needs (``time_limit_min``), so a run on time never hears it."""
    grace, eval_s = _grace_and_eval_s(spec, cell)
    return int(grace + eval_s + STOP_REPORT_S)


def _time_limit_signal() -> signal.Signals:
    """The signal Slurm sends before the time limit: submitit's (``USR2``; ``SUBMITIT_PREEMPT_SIGNAL``)."""
    from submitit import JobEnvironment

    return signal.Signals["SIG" + JobEnvironment.USR_SIG.removeprefix("SIG")]


def run_job(folder: str, row_id: int) -> str:
    """What one job does on its node: make the run, record it, supervise it to its end; its status."""
    run_dir, req = _make_run(Path(folder), row_id)
    _supervise(run_dir, req)
    return summarize(run_dir).status


def _make_run(folder: Path, row_id: int) -> tuple[Path, RunRequest]:
    """Make the row's run folder and record it in campaign.db (a run it could not make: the error, recorded)."""
    with CampaignQueue(folder) as campaign:
        row = campaign.row(row_id)
        if row.run_dir:  # Slurm requeued the job (preemption, a node lost): one row, one run folder
            raise RunError(f"run {row_id} already started in {row.run_dir}; `agent2rl-tui campaign requeue` "
                           "queues it again")
        req = campaign.spec.request(Cell.of(row), row.seed, folder)
        try:
            run_dir = create_run(req)
        except RunError as exc:
            campaign.set_error(row_id, f"could not start: {exc}")
            raise
        campaign.mark_started(row_id, run_dir, os.environ.get("CUDA_VISIBLE_DEVICES"))
    return run_dir, req


def _supervise(run_dir: Path, req: RunRequest) -> None:
    """Run the run's supervisor as our child until it exits: the job lasts as long as the run.

    Slurm's warning before the job's time limit reaches every process of the job: the run's own
    (supervisor, grader, agent) inherit it ignored; here it stops the run as its budget's end
    would (end reason ``time_limit``: the agent ended, the queued submissions scored, the report
    written), instead of submitit's answer (requeue, or end this job) that would leave the run lost.
    """
    warning = _time_limit_signal()
    warned: list[int] = []
    signal.signal(warning, signal.SIG_IGN)
    pid = launch_supervisor(run_dir, req.agent_env)
    signal.signal(warning, lambda signum, frame: warned.append(signum))
    stopping = False
    while os.waitpid(pid, os.WNOHANG) == (0, 0):
        if warned and not stopping:
            stopping = True
            print(f"{iso(now())} {warning.name}: the job's time limit is near; stopping run {run_dir.name} "
                  "as a budget ends", file=sys.stderr, flush=True)
            stop_run(run_dir, reason="time_limit")
        time.sleep(0.5)


JOB_VARIABLES = ("HF_HOME", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_TOKEN", "HF_ENDPOINT", "TRANSFORMERS_CACHE",
                 "AGENT2RL_DATA", "AGENT2RL_TASKS", "AGENT2RL_AGENTS")
"""Variables every run reads where it runs: the Hugging Face cache and its switches, our data cache, extra tasks
and agent profiles."""


def job_environment(spec: CampaignSpec, env: Mapping[str, str]) -> dict[str, str]:
    """The environment of a run's job, as sbatch is told it: ``{"export": "ALL,NAME,..."}``.

    ``ALL``: the job gets the environment of the process that submits it (sbatch reads it when it
    submits; Slurm sets it on the node), so the run, its grader and its agent see what the shell of
    ``campaign start`` (or ``resume``, ``requeue``) set. Named after it, those of the variables the
    campaign's runs read that ``env`` sets: ``JOB_VARIABLES``, the key variables its options name
    (``judge.key_env``, ``search.key_env``) and its agents' key variables (their profiles'
    ``required_env`` and ``env_pass``). Names only: the values go from sbatch to Slurm, never into
    the job script (``<campaign>/slurm/<job id>/<job id>_submission.sh``) nor into submitit's pickles
    (they hold ``run_job`` and its two arguments); in the script, the names say what the runs rely
    on. An ``export`` in ``[slurm] additional_parameters`` replaces this one.
    """
    from agent2rl_tui.run.profiles import get_profile

    names = list(JOB_VARIABLES)
    for option in ("judge", "search"):
        given = spec.options.get(option)
        names.append(str(given.get("key_env") or "") if isinstance(given, dict) else "")
    for agent in dict.fromkeys(cell.agent for cell in spec.cells):
        profile = get_profile(agent)
        names += [n for group in profile.required_env for n in group] + [n for n in profile.env_pass if n != "*"]
    named = [n for n in dict.fromkeys(names) if n.isidentifier() and n.isascii() and n in env]
    return {"export": ",".join(["ALL", *named])}


def executor_for(campaign: CampaignQueue, spec: CampaignSpec, cell: Cell, table: dict[str, Any]) -> Any:
    """submitit's executor for one run's job: its time limit, its warning, its GPUs, ``[slurm]``'s parameters."""
    import submitit

    executor = submitit.AutoExecutor(folder=campaign.folder / "slurm" / "%j", cluster=table.get("cluster"))
    lead = stop_lead_s(spec, cell)  # Slurm's warning before the time limit, and the time it adds (run_job)
    params: dict[str, Any] = {"timeout_min": time_limit_min(spec, cell) + (lead + 59) // 60, "name": f"a2rl-{spec.name}",
                              "slurm_signal_delay_s": lead}
    if spec.gpus_per_run and executor.cluster != "local":  # no gres asked of a CPU-only partition
        params["gpus_per_node"] = spec.gpus_per_run
    for key, value in table.items():
        if key != "cluster":
            params[key if key in GENERIC else f"slurm_{key}"] = value
    if executor.cluster == "slurm":
        # The job starts in the campaign folder (on the shared file system), not in whatever folder
        # `campaign start` ran from, which the node may not have.
        # Its environment: the submitting shell's, the run's variables named (job_environment).
        params["slurm_additional_parameters"] = {"chdir": str(campaign.folder), **job_environment(spec, os.environ),
                                                 **dict(table.get("additional_parameters") or {})}
    else:  # the local/debug executors take the generic parameters only
        params = {k: v for k, v in params.items() if not k.startswith("slurm_")}
    executor.update_parameters(**params)
    return executor


def submit_queued(campaign: CampaignQueue) -> list[tuple[int, str]]:
    """Submit every queued run that has no job yet; (row id, job id) for each.

    A job sbatch refuses (a partition, account or gres the cluster does not have) raises
    ``RunError`` with sbatch's words; the runs submitted before it keep their jobs, the rest stay
    queued for ``campaign resume`` once the file is mended.
    """
    table = dict(campaign.spec_raw().get("slurm", {}))
    spec = campaign.spec
    out: list[tuple[int, str]] = []
    for row in campaign.rows():
        if not (row.superseded or row.run_dir or row.job_id):
            out.append((row.id, _submit(campaign, spec, row, table, len(out))))
    return out


def _submit(campaign: CampaignQueue, spec: CampaignSpec, row: CampaignRow, table: dict[str, Any], before: int) -> str:
    """Submit one row's job and record its id; the job id."""
    from submitit.core.utils import FailedJobError

    try:
        job = executor_for(campaign, spec, Cell.of(row), table).submit(run_job, str(campaign.folder), row.id)
    except FailedJobError as exc:
        words = " ".join(str(exc).split())
        hint = " (a partition without GPUs: set gpus_per_run = 0 in the campaign file)" if "gres" in words.lower() else ""
        raise RunError(f"sbatch refused run {row.id}'s job: {words}{hint}; {before} job(s) submitted before it") from None
    try:
        campaign.set_job(row.id, str(job.job_id))
    except sqlite3.OperationalError as exc:  # a locked db: say so, the job still runs
        raise RunError(f"job {job.job_id} submitted, but campaign.db could not record it: {exc}") from exc
    return str(job.job_id)
