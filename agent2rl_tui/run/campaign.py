"""Campaigns: the matrix task x agent (x driver) x base model x seed, run as ordinary runs, queued.

A campaign file (TOML) names the matrix and the options every run gets::

    name = "gsm8k-variance"
    tasks = ["gsm8k", "arith"]
    base_models = ["/models/Qwen2.5-1.5B-Instruct"]
    seeds = [0, 1, 2]
    budget = "2h"
    max_parallel = 2          # runs at once (default: one per GPU, else 1)
    gpus_per_run = 1          # GPUs each run gets (on a machine with GPUs)

    [[agents]]
    agent = "claude-code"
    drivers = ["claude-sonnet-4-5", "claude-opus-4-1"]

    [[agents]]
    agent = "command"
    command = "python my_trainer.py"

    [options]                 # any run's options: eval_limit, prompt_profile, env, judge, search, ...
    eval_limit = 200
    env = { MY_VAR = "1" }

``campaign start FILE`` pre-flights every cell (nothing is made if one fails), makes the
campaign folder (``<root>/campaigns/<UTC>-<name>/``: the file, ``campaign.db``, and the run
folders, so the TUI opened on it lists exactly its runs) and starts the scheduler, a detached
process like a run's supervisor: it starts the next queued run whenever a slot is free (one
run per ``gpus_per_run`` GPUs, never more than ``max_parallel``), assigns its GPUs, and keeps a
heartbeat. A run that ends failed or lost is reported; ``campaign requeue`` queues it again
(a new run folder; the old one stays, marked superseded). Statistics over the seeds:
``review.campaign_view``.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
import subprocess
import sys
import time
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent2rl_tui.record.root import RunError, default_root
from agent2rl_tui.record.store import ACTIVE_STATUSES
from agent2rl_tui.review.campaign_view import JobInfo, JobState, read_summary, run_state, slurm_jobs
from agent2rl_tui.run.lifecycle import create_run, launch_supervisor, reconcile
from agent2rl_tui.run.options import CAMPAIGN_OPTIONS, request_fields_from_campaign
from agent2rl_tui.run.preflight import preflight_run
from agent2rl_tui.run.request import RunRequest
from agent2rl_tui.util import procs
from agent2rl_tui.util.timeutil import compact_utc, now, parse_duration

CAMPAIGN_FILE = "campaign.toml"
CAMPAIGN_DB = "campaign.db"
SCHEDULER_BEAT_S = 1.0
SCHEDULER_LOST_AFTER_S = 30.0
JOBS_FRESH_S = 5.0
"""How long one ``squeue`` answer serves ``Campaign.state_of`` (a status of many pending jobs asks once)."""
RUN_OPTIONS = tuple(CAMPAIGN_OPTIONS)
"""The ``[options]`` keys a campaign file may give: ``run.options`` declares them."""


@dataclass(frozen=True)
class Cell:
    task: str
    agent: str
    driver: str | None
    base_model: str
    command: str | None = None

    @property
    def key(self) -> str:
        return f"{self.task} · {self.agent} · {self.driver or '-'} · {Path(self.base_model).name}"


@dataclass(frozen=True)
class CampaignSpec:
    name: str
    cells: list[Cell]
    seeds: list[int]
    budget_s: float
    max_parallel: int
    gpus_per_run: int
    options: dict[str, Any] = field(default_factory=dict)
    backend: str = "local"
    """``local`` (our scheduler on this machine) or ``slurm`` (one submitit job per run)."""

    @classmethod
    def from_toml(cls, text: str, *, gpus: int = 0) -> CampaignSpec:
        try:
            raw = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise RunError(f"campaign file: {exc}") from None
        missing = [k for k in ("name", "tasks", "base_models", "agents") if not raw.get(k)]
        if missing:
            raise RunError(f"campaign file: give {', '.join(missing)} (see `agent2rl-tui campaign --help`)")
        unknown = sorted(set(raw.get("options", {})) - set(RUN_OPTIONS))
        if unknown:
            raise RunError(f"campaign file: unknown [options] {unknown}; known: {', '.join(RUN_OPTIONS)}")
        agents = []
        for entry in raw["agents"]:
            if "agent" not in entry:
                raise RunError("campaign file: each [[agents]] needs agent = \"NAME\"")
            for driver in entry.get("drivers") or [None]:
                agents.append((entry["agent"], driver, entry.get("command")))
        cells = [Cell(task, agent, driver, str(Path(model).expanduser()), command)
                 for task, (agent, driver, command), model in itertools.product(raw["tasks"], agents, raw["base_models"])]
        gpus_per_run = int(raw.get("gpus_per_run", 1))
        backend = str(raw.get("backend", "local"))
        if backend not in ("local", "slurm"):
            raise RunError(f"campaign file: backend {backend!r}: use \"local\" or \"slurm\"")
        default_parallel = max(1, gpus // gpus_per_run) if gpus and gpus_per_run else 1
        return cls(name=str(raw["name"]), cells=cells, seeds=[int(s) for s in raw.get("seeds", [0])],
                   budget_s=parse_duration(str(raw.get("budget", "1h"))),
                   max_parallel=int(raw.get("max_parallel", default_parallel)), gpus_per_run=gpus_per_run,
                   options=dict(raw.get("options", {})), backend=backend)

    def request(self, cell: Cell, seed: int, root: Path) -> RunRequest:
        """The run of ``cell`` with ``seed``: the matrix's fields, then the ``[options]`` (``run.options``)."""
        return RunRequest.of(task=cell.task, agent=cell.agent, model=Path(cell.base_model), budget_s=self.budget_s,
                             driver=cell.driver, seed=seed, command=cell.command, root=root,
                             **request_fields_from_campaign(self.options))


class Campaign:
    """A campaign folder: its file, its queue (campaign.db) and its run folders."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        if not (folder / CAMPAIGN_DB).is_file():
            raise RunError(f"{folder} is not a campaign folder (no {CAMPAIGN_DB})")
        self.db = sqlite3.connect(folder / CAMPAIGN_DB, timeout=30, isolation_level=None)
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA journal_mode=WAL")
        self._jobs: tuple[float, dict[str, JobInfo]] | None = None  # Slurm's word on the jobs, and when

    @property
    def spec(self) -> CampaignSpec:
        return CampaignSpec.from_toml((self.folder / CAMPAIGN_FILE).read_text(encoding="utf-8"),
                                      gpus=_gpu_count())

    def spec_raw(self) -> dict[str, Any]:
        return tomllib.loads((self.folder / CAMPAIGN_FILE).read_text(encoding="utf-8"))

    def rows(self) -> list[sqlite3.Row]:
        return self.db.execute("SELECT * FROM runs ORDER BY id").fetchall()

    def meta(self) -> sqlite3.Row:
        return self.db.execute("SELECT * FROM campaign").fetchone()

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Campaign:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def state_of(self, row: sqlite3.Row) -> str:
        """The row's state as the results read it (``review.campaign_view.run_state``); on Slurm, that
        of a row whose run has not started depends on its job (ended: failed before its run)."""
        job = None
        if row["job_id"] and not row["run_dir"] and not row["superseded"]:
            if self._jobs is None or time.monotonic() - self._jobs[0] > JOBS_FRESH_S:
                self._jobs = (time.monotonic(), slurm_jobs(self.folder, [r for r in self.rows() if not r["run_dir"]]))
            job = self._jobs[1].get(row["job_id"])
        return run_state(row, read_summary(row), job)

    def requeue(self, ref: str) -> int:
        """Queue a failed, lost or stopped run's cell and seed again; the new row's id."""
        row = next((r for r in self.rows() if not r["superseded"] and (str(r["id"]) == ref or (
            r["run_dir"] and Path(r["run_dir"]).name == ref))), None)
        if row is None:
            raise RunError(f"campaign {self.folder.name} has no current run {ref!r}")
        if row["job_id"] and self.spec.backend == "slurm":
            from agent2rl_tui.run.campaign_slurm import campaign_jobs

            campaign_jobs(self)  # a run whose job ended under it is closed (lost) before it is superseded
            self._jobs = None
        state = self.state_of(row)
        if state not in ("failed", "lost", "stopped"):
            raise RunError(f"run {ref} is {state}; only failed, lost or stopped runs are queued again")
        with self.db:
            self.db.execute("UPDATE runs SET superseded = 1 WHERE id = ?", (row["id"],))
            cur = self.db.execute("INSERT INTO runs (cell, task, agent, driver, base_model, command, seed, attempt, "
                                  "queued_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                  (row["cell"], row["task"], row["agent"], row["driver"], row["base_model"],
                                   row["command"], row["seed"], row["attempt"] + 1, now()))
        return int(cur.lastrowid or 0)

    def scheduler_alive(self) -> bool:
        """True while the scheduler loops: it has not written ``ended_at`` (it may take a second
        to exit after that), its process lives and its heartbeat is recent."""
        meta = self.meta()
        return bool(meta["ended_at"] is None and meta["scheduler_pid"] and procs.pid_alive(meta["scheduler_pid"])
                    and now() - (meta["heartbeat_at"] or 0) < SCHEDULER_LOST_AFTER_S)


def _gpu_count() -> int:
    from agent2rl_tui.util.gpus import visible_gpu_count

    return visible_gpu_count()


def create_campaign(spec_text: str, root: Path | None = None, env: dict[str, str] | None = None) -> Path:
    """Pre-flight every cell, then make the campaign folder with its queue (every run queued)."""
    spec = CampaignSpec.from_toml(spec_text, gpus=_gpu_count())
    env = dict(os.environ if env is None else env)
    for cell in spec.cells:
        try:
            preflight_run(spec.request(cell, spec.seeds[0], Path("/nonexistent")), env)
        except RunError as exc:
            raise RunError(f"cell {cell.key}: {exc}") from None
    folder = (root or default_root()).resolve() / "campaigns" / f"{compact_utc(now())}-{spec.name}"
    folder.mkdir(parents=True)
    (folder / CAMPAIGN_FILE).write_text(spec_text, encoding="utf-8")
    db = sqlite3.connect(folder / CAMPAIGN_DB, isolation_level=None)
    with db:
        db.execute("CREATE TABLE campaign (name TEXT, created_at REAL, scheduler_pid INTEGER, heartbeat_at REAL, "
                   "ended_at REAL)")
        db.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, cell TEXT, task TEXT, agent TEXT, driver TEXT, "
                   "base_model TEXT, command TEXT, seed INTEGER, attempt INTEGER DEFAULT 1, run_dir TEXT, "
                   "gpus TEXT, queued_at REAL, started_at REAL, superseded INTEGER DEFAULT 0, error TEXT, job_id TEXT)")
        db.execute("INSERT INTO campaign (name, created_at) VALUES (?, ?)", (spec.name, now()))
        for cell, seed in itertools.product(spec.cells, spec.seeds):
            db.execute("INSERT INTO runs (cell, task, agent, driver, base_model, command, seed, queued_at) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                       (cell.key, cell.task, cell.agent, cell.driver, cell.base_model, cell.command, seed, now()))
    db.close()
    return folder


def free_gpus(total: int, active: list[sqlite3.Row]) -> list[str]:
    """The GPUs no active run of the campaign holds."""
    used = {g for r in active for g in (r["gpus"] or "").split(",") if g}
    return [str(i) for i in range(total) if str(i) not in used]


def schedule_once(campaign: Campaign) -> dict[str, int]:
    """Start queued runs while slots are free; the count of runs by state."""
    spec = campaign.spec
    rows = campaign.rows()
    states = {r["id"]: campaign.state_of(r) for r in rows}
    # A run whose supervisor died is closed now (lost, its leftovers ended), not when its heartbeat
    # times out; one already seen as lost may still need closing.
    unsettled = [r for r in rows if r["run_dir"] and states[r["id"]] in (*ACTIVE_STATUSES, "lost")]
    for row in unsettled:
        states[row["id"]] = reconcile(Path(row["run_dir"]))
    active = [r for r in unsettled if states[r["id"]] in ACTIVE_STATUSES]
    gpu_count = _gpu_count()
    for row in [r for r in rows if states[r["id"]] == JobState.QUEUED]:
        if len(active) >= spec.max_parallel:
            break
        gpus = None
        if gpu_count:
            free = free_gpus(gpu_count, active)
            if len(free) < spec.gpus_per_run:
                break
            gpus = ",".join(free[:spec.gpus_per_run])
        cell = Cell(row["task"], row["agent"], row["driver"], row["base_model"], row["command"])
        req = spec.request(cell, row["seed"], campaign.folder).with_config(gpus=gpus)
        try:
            run_dir = create_run(req)
            launch_supervisor(run_dir, req.agent_env)
        except (RunError, OSError, ValueError) as exc:  # stays queued; `campaign status` shows why
            campaign.db.execute("UPDATE runs SET error = ? WHERE id = ?", (f"could not start: {exc}", row["id"]))
            continue
        campaign.db.execute("UPDATE runs SET run_dir = ?, gpus = ?, started_at = ? WHERE id = ?",
                            (str(run_dir), gpus, now(), row["id"]))
        active.append(campaign.db.execute("SELECT * FROM runs WHERE id = ?", (row["id"],)).fetchone())
        states[row["id"]] = "created"
    return dict(Counter(states.values()))


def serve(folder: Path) -> None:
    """The scheduler's loop: beat, start what fits, until no run is queued or active."""
    with Campaign(folder) as campaign:
        campaign.db.execute("UPDATE campaign SET scheduler_pid = ?, heartbeat_at = ?, ended_at = NULL",
                            (os.getpid(), now()))
        while True:
            counts = schedule_once(campaign)
            campaign.db.execute("UPDATE campaign SET heartbeat_at = ?", (now(),))
            if not any(counts.get(s, 0) for s in (JobState.QUEUED, *ACTIVE_STATUSES)) \
                    and _end_unless_queued(campaign):
                return
            time.sleep(SCHEDULER_BEAT_S)


def _end_unless_queued(campaign: Campaign) -> bool:
    """Write ``ended_at`` unless a run was queued since the last look, in one write transaction:
    a requeue that commits first keeps this scheduler going; one that commits after reads
    ``ended_at`` and starts a new scheduler (the process may still be exiting)."""
    campaign.db.execute("BEGIN IMMEDIATE")
    try:
        queued = campaign.db.execute("SELECT COUNT(*) FROM runs WHERE superseded = 0 AND run_dir IS NULL "
                                     "AND job_id IS NULL").fetchone()[0]
        if not queued:
            campaign.db.execute("UPDATE campaign SET ended_at = ?", (now(),))
    finally:
        campaign.db.execute("COMMIT")
    return not queued


def launch_scheduler(folder: Path) -> int:
    """Start the campaign's scheduler in a new session (it outlives the terminal); its pid."""
    log = (folder / "scheduler.log").open("ab")
    with log:
        proc = subprocess.Popen([sys.executable, "-m", "agent2rl_tui.run.campaign", str(folder)],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True, env=dict(os.environ))
    return proc.pid


if __name__ == "__main__":
    serve(Path(sys.argv[1]))
