"""campaign.db, a campaign folder's queue: its schema, its rows as types, and every SQL statement on it.

A campaign folder (``<root>/campaigns/<UTC>-<name>/``) holds its file (``campaign.toml``), this
queue and its run folders. The queue is written by the run layer (``run.campaign``: the local
scheduler, the Slurm jobs, ``campaign requeue``) and read by review (``review.campaign_view``: the
results, the CSV, the TUI's campaign screen), so its rows are typed here, below both, and read
from sqlite in this module only: readers use ``CampaignRow``'s attributes.

Tables: ``campaign`` (one row: the name, the local scheduler's pid and heartbeat, when it ended),
``runs`` (one row per run attempt, superseded attempts kept) and ``jobs``: what a backend's
scheduler last said of each run's job (``JobInfo``; Slurm's ``squeue``/``sacct``), recorded by the
run layer whenever it asks, so that a reader that cannot ask (review) reads the same. ``jobs`` is
made the first time a job's state is recorded: a campaign folder made before it reads as one
whose jobs were never seen.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CAMPAIGN_FILE = "campaign.toml"
CAMPAIGN_DB = "campaign.db"

SCHEMA = (
    "CREATE TABLE campaign (name TEXT, created_at REAL, scheduler_pid INTEGER, heartbeat_at REAL, ended_at REAL)",
    "CREATE TABLE runs (id INTEGER PRIMARY KEY, cell TEXT, task TEXT, agent TEXT, driver TEXT, "
    "base_model TEXT, command TEXT, seed INTEGER, attempt INTEGER DEFAULT 1, run_dir TEXT, "
    "gpus TEXT, queued_at REAL, started_at REAL, superseded INTEGER DEFAULT 0, error TEXT, job_id TEXT, mode TEXT)",
)
"""``mode`` came last (a campaign.db made before it has none: its runs read as free)."""
JOBS_SCHEMA = ("CREATE TABLE IF NOT EXISTS jobs (job_id TEXT PRIMARY KEY, state TEXT, ended INTEGER, note TEXT, "
               "detail TEXT, seen_at REAL)")


class _ByKey:
    """``row["run_dir"]`` as ``row.run_dir``: how callers still written for sqlite3.Row read a typed row."""

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)


@dataclass(frozen=True)
class QueuedRun:
    """One run of the matrix as it is queued: its cell (key and fields) and its seed."""

    cell: str
    task: str
    agent: str
    driver: str | None
    base_model: str
    command: str | None
    seed: int
    mode: str | None = field(default=None, kw_only=True)
    """The training mode of the cell (``record.modes``); None: free."""


@dataclass(frozen=True)
class CampaignRow(QueuedRun, _ByKey):
    """A row of ``runs``: one attempt at a run of the matrix, from queued to its run folder."""

    id: int
    attempt: int
    run_dir: str | None
    """The run folder, once its run was made (by the local scheduler or on the job's node)."""
    gpus: str | None
    queued_at: float | None
    started_at: float | None
    superseded: bool
    """Queued again (``campaign requeue``): a newer row is the current attempt."""
    error: str | None
    """Why its run could not be made (the row stays queued locally; its job ends on Slurm)."""
    job_id: str | None
    """Its job's id where a backend runs jobs (Slurm)."""


@dataclass(frozen=True)
class CampaignMeta(_ByKey):
    """The ``campaign`` row: the name, and the local scheduler's pid, heartbeat and end."""

    name: str
    created_at: float | None
    scheduler_pid: int | None
    heartbeat_at: float | None
    ended_at: float | None


@dataclass(frozen=True)
class JobInfo:
    """What a campaign's scheduler says of one run's job, as its backend words it (Slurm: the
    state from ``squeue``, then ``sacct``)."""

    state: str
    """The scheduler's own word: PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT ..."""
    ended: bool
    """The job is over (whatever became of its run)."""
    note: str = ""
    """Why it waits (``Resources``), or how it ended (``exit 1:0``); empty when there is nothing to add."""
    detail: str = ""
    """What an ended job left behind when its run never started: the last line of its log."""

    def __str__(self) -> str:
        return self.state + (f" ({self.note})" if self.note else "")


def connect(folder: Path, *, readonly: bool = False) -> sqlite3.Connection:
    """The folder's campaign.db: read-only for readers (review), else autocommit in WAL mode."""
    path = folder / CAMPAIGN_DB
    if readonly:
        return sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    db = sqlite3.connect(path, timeout=30, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    return db


def create(folder: Path, name: str, created_at: float, runs: Iterable[QueuedRun]) -> None:
    """Make campaign.db in ``folder`` with every run of ``runs`` queued."""
    db = sqlite3.connect(folder / CAMPAIGN_DB, isolation_level=None)
    try:
        with _transaction(db):
            for statement in SCHEMA:
                db.execute(statement)
            db.execute("INSERT INTO campaign (name, created_at) VALUES (?, ?)", (name, created_at))
            for run in runs:
                _insert(db, run, attempt=1, queued_at=created_at)
    finally:
        db.close()


def _insert(db: sqlite3.Connection, run: QueuedRun, *, attempt: int, queued_at: float) -> int:
    with_mode = _has_mode(db)
    if run.mode and not with_mode:
        raise sqlite3.OperationalError("this campaign.db was made before training modes: it cannot queue a run in one")
    cur = db.execute("INSERT INTO runs (cell, task, agent, driver, base_model, command, seed, attempt, queued_at"
                     + (", mode) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)" if with_mode else ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"),
                     (run.cell, run.task, run.agent, run.driver, run.base_model, run.command, run.seed, attempt,
                      queued_at, *((run.mode,) if with_mode else ())))
    return int(cur.lastrowid or 0)


@contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[None]:
    """One write transaction on an autocommit connection (``BEGIN IMMEDIATE``: the writer's lock at once)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


_ROW_COLUMNS = ("id, cell, task, agent, driver, base_model, command, seed, attempt, run_dir, gpus, queued_at, "
                "started_at, superseded, error, job_id")


def _has_mode(db: sqlite3.Connection) -> bool:
    return any(col[1] == "mode" for col in db.execute("PRAGMA table_info(runs)"))


def _columns(db: sqlite3.Connection) -> str:
    return _ROW_COLUMNS + (", mode" if _has_mode(db) else ", NULL AS mode")


def _row(values: tuple[Any, ...]) -> CampaignRow:
    (id_, cell, task, agent, driver, base_model, command, seed, attempt, run_dir, gpus, queued_at, started_at,
     superseded, error, job_id, mode) = values
    return CampaignRow(cell=cell, task=task, agent=agent, driver=driver, base_model=base_model, command=command,
                       seed=int(seed), id=int(id_), attempt=int(attempt or 1), run_dir=run_dir, gpus=gpus,
                       queued_at=queued_at, started_at=started_at, superseded=bool(superseded), error=error,
                       job_id=job_id, mode=mode if isinstance(mode, str) and mode else None)


def read_rows(db: sqlite3.Connection) -> list[CampaignRow]:
    """Every row of ``runs``, in the order they were queued."""
    return [_row(tuple(r)) for r in db.execute(f"SELECT {_columns(db)} FROM runs ORDER BY id")]


def read_row(db: sqlite3.Connection, row_id: int) -> CampaignRow | None:
    found = db.execute(f"SELECT {_columns(db)} FROM runs WHERE id = ?", (row_id,)).fetchone()
    return _row(tuple(found)) if found else None


def read_meta(db: sqlite3.Connection) -> CampaignMeta:
    name, created_at, pid, heartbeat_at, ended_at = db.execute(
        "SELECT name, created_at, scheduler_pid, heartbeat_at, ended_at FROM campaign").fetchone()
    return CampaignMeta(name=name, created_at=created_at, scheduler_pid=pid, heartbeat_at=heartbeat_at,
                        ended_at=ended_at)


def read_jobs(db: sqlite3.Connection) -> dict[str, JobInfo]:
    """What the backend last recorded of each job, by job id ({}: none recorded yet)."""
    try:
        found = db.execute("SELECT job_id, state, ended, note, detail FROM jobs").fetchall()
    except sqlite3.OperationalError:  # no jobs table: a local campaign, or one made before jobs were recorded
        return {}
    return {job_id: JobInfo(state or "", bool(ended), note or "", detail or "")
            for job_id, state, ended, note, detail in found}


def record_jobs(db: sqlite3.Connection, jobs: Mapping[str, JobInfo], seen_at: float) -> None:
    """Record what the scheduler says of these jobs (only what changed is written)."""
    known = read_jobs(db)
    changed = {job_id: job for job_id, job in jobs.items() if known.get(job_id) != job}
    if not changed:
        return
    with _transaction(db):
        db.execute(JOBS_SCHEMA)
        db.executemany("INSERT OR REPLACE INTO jobs (job_id, state, ended, note, detail, seen_at) "
                       "VALUES (?, ?, ?, ?, ?, ?)",
                       [(job_id, j.state, int(j.ended), j.note, j.detail, seen_at) for job_id, j in changed.items()])


def requeue(db: sqlite3.Connection, row: CampaignRow, queued_at: float) -> int:
    """Mark ``row`` superseded and queue its cell and seed again as the next attempt; the new row's id."""
    with _transaction(db):
        db.execute("UPDATE runs SET superseded = 1 WHERE id = ?", (row.id,))
        return _insert(db, row, attempt=row.attempt + 1, queued_at=queued_at)


def mark_started(db: sqlite3.Connection, row_id: int, run_dir: Path, gpus: str | None, started_at: float) -> None:
    """The row's run was made: its folder, its GPUs and when."""
    db.execute("UPDATE runs SET run_dir = ?, gpus = ?, started_at = ? WHERE id = ?",
               (str(run_dir), gpus, started_at, row_id))


def set_error(db: sqlite3.Connection, row_id: int, error: str) -> None:
    db.execute("UPDATE runs SET error = ? WHERE id = ?", (error, row_id))


def set_job(db: sqlite3.Connection, row_id: int, job_id: str) -> None:
    db.execute("UPDATE runs SET job_id = ? WHERE id = ?", (job_id, row_id))


def scheduler_started(db: sqlite3.Connection, pid: int, at: float) -> None:
    db.execute("UPDATE campaign SET scheduler_pid = ?, heartbeat_at = ?, ended_at = NULL", (pid, at))


def scheduler_beat(db: sqlite3.Connection, at: float) -> None:
    db.execute("UPDATE campaign SET heartbeat_at = ?", (at,))


def end_unless_queued(db: sqlite3.Connection, at: float) -> bool:
    """Write ``ended_at`` unless a run is queued (no run folder, no job), in one write transaction:
    a requeue that commits first keeps the scheduler going; one that commits after reads
    ``ended_at`` and starts a new scheduler. True: ended."""
    with _transaction(db):
        queued = db.execute("SELECT COUNT(*) FROM runs WHERE superseded = 0 AND run_dir IS NULL "
                            "AND job_id IS NULL").fetchone()[0]
        if not queued:
            db.execute("UPDATE campaign SET ended_at = ?", (at,))
    return not queued
