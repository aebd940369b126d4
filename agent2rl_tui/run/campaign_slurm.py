"""Campaign runs as Slurm jobs, through submitit: beyond one box, on an engine that exists.

With ``backend = "slurm"`` in the campaign file, ``campaign start`` submits each queued run
as one job instead of starting the local scheduler. The job, on its node, in the campaign folder
(``--chdir``; it must be on a file system the login node, the nodes and the TUI share), makes the
run folder, records it in campaign.db, and runs the run's supervisor until the run ends. Slurm
gives the job its GPUs (``gpus_per_node`` = the campaign's ``gpus_per_run``, none asked when it
is 0) and with them ``CUDA_VISIBLE_DEVICES``; Slurm, not us, decides how many run at once.
``campaign status`` reads each job's state from ``squeue``, then ``sacct`` (``job_states``).

The job's time limit is the run's budget, plus its grace period, plus two evaluations (the
baseline's before the budget and the last submission's after it, each at most the task's
``eval_timeout_s``), plus 10 minutes for start-up and the report. ``[slurm]`` in the
campaign file passes submitit's Slurm parameters (``partition``, ``account``, ``qos``,
``constraint``, ``mem_gb``, ``cpus_per_task``, ``additional_parameters``); ``cluster =
"local"`` runs the jobs as local processes (submitit's local executor). The tests run both:
tests/test_campaign_slurm_real.py on a real one-node Slurm (tests/slurm_cluster.py).
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
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
        if row["run_dir"]:  # Slurm requeued the job (preemption, a node lost): one row, one run folder
            raise RunError(f"run {row_id} already started in {row['run_dir']}; `agent2rl-tui campaign requeue` "
                           "queues it again")
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


def executor_for(campaign: Campaign, spec: CampaignSpec, cell: Cell, table: dict[str, Any]) -> Any:
    import submitit

    cluster = table.get("cluster")
    executor = submitit.AutoExecutor(folder=campaign.folder / "slurm" / "%j", cluster=cluster)
    params: dict[str, Any] = {"timeout_min": time_limit_min(spec, cell), "name": f"a2rl-{spec.name}"}
    if spec.gpus_per_run and executor.cluster != "local":  # no gres asked of a CPU-only partition
        params["gpus_per_node"] = spec.gpus_per_run
    for key, value in table.items():
        if key == "cluster":
            continue
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


def submit_queued(campaign: Campaign) -> list[tuple[int, str]]:
    """Submit every queued run that has no job yet; (row id, job id) for each.

    A job sbatch refuses (a partition, account or gres the cluster does not have) raises
    ``RunError`` with sbatch's words; the runs submitted before it keep their jobs, the rest stay
    queued for ``campaign resume`` once the file is mended.
    """
    from submitit.core.utils import FailedJobError

    raw = campaign.spec_raw()
    table = dict(raw.get("slurm", {}))
    spec = campaign.spec
    out = []
    for row in campaign.rows():
        if row["superseded"] or row["run_dir"] or row["job_id"]:
            continue
        cell = Cell(row["task"], row["agent"], row["driver"], row["base_model"], row["command"])
        try:
            job = executor_for(campaign, spec, cell, table).submit(run_job, str(campaign.folder), int(row["id"]))
        except FailedJobError as exc:
            words = " ".join(str(exc).split())
            hint = (" (a partition without GPUs: set gpus_per_run = 0 in the campaign file)"
                    if "gres" in words.lower() else "")
            raise RunError(f"sbatch refused run {row['id']}'s job: {words}{hint}; "
                           f"{len(out)} job(s) submitted before it") from None
        try:
            campaign.db.execute("UPDATE runs SET job_id = ? WHERE id = ?", (str(job.job_id), row["id"]))
        except sqlite3.OperationalError as exc:  # noqa: PERF203 - a locked db: say so, the job still runs
            raise RunError(f"job {job.job_id} submitted, but campaign.db could not record it: {exc}") from exc
        out.append((int(row["id"]), str(job.job_id)))
    return out


ENDED_STATES = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL",
                          "DEADLINE", "PREEMPTED", "REVOKED", "SPECIAL_EXIT"})
"""Slurm's states of a job that has ended (``squeue``/``sacct``); the rest are waiting or running."""


@dataclass(frozen=True)
class JobInfo:
    """What Slurm says of one job: its state (PENDING, RUNNING, COMPLETED, FAILED, CANCELLED,
    TIMEOUT ...), why a pending job waits, and an ended job's exit code."""

    state: str
    reason: str = ""
    exit_code: str = ""

    @property
    def ended(self) -> bool:
        return self.state in ENDED_STATES

    def __str__(self) -> str:
        note = self.reason if self.state == "PENDING" and self.reason not in ("", "None") else ""
        if self.ended and self.exit_code not in ("", "0:0"):
            note = f"exit {self.exit_code}"
        return self.state + (f" ({note})" if note else "")


def _slurm(*cmd: str) -> list[list[str]]:
    """A Slurm client's ``|``-separated lines, [] where it fails (not installed, no controller, unknown ids)."""
    try:
        proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if proc.returncode != 0:
        return []
    return [line.split("|") for line in proc.stdout.splitlines() if line.strip()]


def job_states(job_ids: list[str]) -> dict[str, JobInfo]:
    """Slurm's word on each job: ``squeue`` for the jobs the controller still holds (pending,
    running, and ended ones for ``MinJobAge``), then ``sacct`` for the others: the accounting
    database where there is one, else the job completion log (``sacct -c``, JobCompType).
    A job neither knows is left out."""
    ids = sorted({j for j in job_ids if j}, key=lambda j: (len(j), j))
    if not ids:
        return {}
    found: dict[str, JobInfo] = {}
    for jid, state, reason in (r for r in _slurm("squeue", "-h", "-t", "all", "-o", "%i|%T|%r", "-j", ",".join(ids))
                               if len(r) == 3):
        found[jid] = JobInfo(state, reason)
    rest = [j for j in ids if j not in found]
    if rest:
        fields = ("-n", "-P", "-X", "-o", "JobID,State,ExitCode", "-j", ",".join(rest))
        rows = _slurm("sacct", *fields) or _slurm("sacct", "-c", *fields)
        for r in rows:
            if len(r) == 3 and r[0] in rest:
                found[r[0]] = JobInfo(r[1].split()[0] if r[1] else "", exit_code=r[2])  # "CANCELLED by 0"
    return found


def campaign_jobs(campaign: Campaign) -> dict[str, JobInfo]:
    """Slurm's word on the jobs of a campaign's runs, superseded attempts' included ({} for
    ``cluster = "local"``: no Slurm)."""
    if campaign.spec_raw().get("slurm", {}).get("cluster") not in (None, "slurm"):
        return {}
    return job_states([r["job_id"] for r in campaign.rows() if r["job_id"]])


def failed_before_run(campaign: Campaign, row: sqlite3.Row, job: JobInfo | None) -> str | None:
    """Why a run's job ended before the run started (None: it has not ended, or the run started):
    what the job recorded (a run it could not make), else the last line of its log, else Slurm's state."""
    if row["run_dir"] or not row["job_id"] or job is None or not job.ended:
        return None
    why = row["error"] or _last_line(campaign.folder / "slurm" / row["job_id"] / f"{row['job_id']}_0_log.err")
    return f"job {row['job_id']} ended {job} before its run started" + (f": {why}" if why else "")


def _last_line(path: Path, limit: int = 300) -> str:
    try:
        lines = [ln.strip() for ln in path.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:limit] if lines else ""
