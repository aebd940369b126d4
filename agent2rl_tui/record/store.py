"""run.db: the record of one run (run row, submissions, events), in SQLite WAL mode.

Several processes write one run.db at once (the supervisor heartbeats and logs events, the
grader records submissions, the CLI or TUI may mark a lost run), so every write is one
short transaction with a busy timeout, and nothing holds a write lock across slow work.
The schema carries a version (``PRAGMA user_version``) so later releases can migrate.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import sqlite_utils

from agent2rl_tui.util.timeutil import now

SCHEMA_VERSION = 2
MIGRATIONS: dict[int, str] = {
    # 1 -> 2: a failure's code (what the agent was told) beside its full text, and the grader's
    # manifest of what it took of a submitted folder.
    1: "ALTER TABLE submissions ADD COLUMN error_code TEXT; ALTER TABLE submissions ADD COLUMN intake_json TEXT;",
}

class RunStatus(StrEnum):
    """A run's state. ``lost`` is written by whoever finds an active run whose supervisor is gone."""

    CREATED = "created"
    PREPARING = "preparing"
    RUNNING = "running"
    ENDING = "ending"
    FINISHED = "finished"
    FAILED = "failed"
    STOPPED = "stopped"
    LOST = "lost"


ACTIVE_STATUSES = (RunStatus.CREATED, RunStatus.PREPARING, RunStatus.RUNNING, RunStatus.ENDING)
FINAL_STATUSES = (RunStatus.FINISHED, RunStatus.FAILED, RunStatus.STOPPED, RunStatus.LOST)


class SubStatus(StrEnum):
    """A submission's state, as the grader API reports it."""

    QUEUED = "queued"
    EVALUATING = "evaluating"
    SCORED = "scored"
    FAILED = "failed"
    REJECTED = "rejected"


PENDING_SUB_STATUSES = (SubStatus.QUEUED, SubStatus.EVALUATING)
BASELINE_ID = 0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS run (
    id TEXT PRIMARY KEY,
    task TEXT NOT NULL,
    agent TEXT NOT NULL,
    driver TEXT,
    base_model TEXT NOT NULL,          -- folder name under workspace/models/
    base_model_source TEXT NOT NULL,   -- where the base model was copied from
    budget_s REAL NOT NULL,
    grace_s REAL NOT NULL,
    seed INTEGER NOT NULL DEFAULT 0,
    status TEXT NOT NULL,
    created_at REAL NOT NULL,
    budget_start REAL,                 -- when the agent was started (the budget's zero)
    deadline REAL,
    ended_at REAL,
    agent_ended_at REAL,
    agent_exit_code INTEGER,           -- negative: killed by that signal
    end_reason TEXT,                   -- agent_exited, deadline, stopped, error
    supervisor_pid INTEGER,
    grader_pid INTEGER,
    grader_port INTEGER,
    agent_pid INTEGER,
    heartbeat_at REAL,
    error TEXT,
    config_json TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS submissions (
    id INTEGER PRIMARY KEY,            -- 0 is the baseline
    kind TEXT NOT NULL,                -- baseline | agent
    model_path TEXT,                   -- as the agent gave it
    resolved_path TEXT,
    status TEXT NOT NULL,              -- queued | evaluating | scored | failed | rejected
    received_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL,
    score REAL,
    n_items INTEGER,
    n_correct INTEGER,
    error TEXT,                        -- the full text, for the person (never sent to the agent)
    weights_hash TEXT,
    engine TEXT,
    settings_json TEXT,
    timings_json TEXT,
    gpu TEXT,
    revision_seq INTEGER,              -- the code revision the submission was made from
    revision_sha TEXT,
    error_code TEXT,                   -- what the agent was told: a code of grader.failures / a rejection
    intake_json TEXT                   -- the grader's manifest of the files it took and evaluated
);
CREATE TABLE IF NOT EXISTS revisions (
    seq INTEGER PRIMARY KEY,           -- 1, 2, ... in snapshots.git history order
    sha TEXT NOT NULL UNIQUE,
    at REAL NOT NULL,
    trigger TEXT NOT NULL,             -- start | watch | submission | final | periodic
    files_changed INTEGER NOT NULL,
    added INTEGER NOT NULL,
    removed INTEGER NOT NULL,
    paths_json TEXT NOT NULL,          -- [{path, status, added, removed, old_path?}]
    ignored_json TEXT NOT NULL         -- {reason: count} of paths left out of this snapshot
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY,
    at REAL NOT NULL,
    source TEXT NOT NULL,              -- supervisor | grader | cli | agent
    kind TEXT NOT NULL,
    message TEXT NOT NULL,
    data_json TEXT
);
CREATE TABLE IF NOT EXISTS samples (
    at REAL NOT NULL,
    cpu_pct REAL,
    mem_used INTEGER, mem_total INTEGER,
    disk_free INTEGER, disk_total INTEGER,
    agent_procs INTEGER, agent_rss INTEGER,
    gpus_json TEXT NOT NULL,           -- [{index, name, util_pct, mem_used, mem_total}]
    gpu_note TEXT                      -- "no GPU" where there is none
);
CREATE TABLE IF NOT EXISTS steps (
    seq INTEGER PRIMARY KEY,           -- transcript order
    at REAL NOT NULL,
    kind TEXT NOT NULL,                -- message | reasoning | tool_call | tool_result | error | usage
                                       -- | result | system | raw
    role TEXT, tool TEXT, call_id TEXT,
    text TEXT NOT NULL,
    args_json TEXT,
    size INTEGER,                      -- original length of a truncated text
    tokens_in INTEGER, tokens_out INTEGER, cost_usd REAL,
    line INTEGER                       -- line of the agent's stream it came from
);
CREATE INDEX IF NOT EXISTS steps_kind ON steps(kind, seq);
CREATE INDEX IF NOT EXISTS steps_at ON steps(at);
CREATE VIRTUAL TABLE IF NOT EXISTS steps_fts USING fts5(text, tool, args_json, content='steps',
                                                         content_rowid='seq');
CREATE TRIGGER IF NOT EXISTS steps_fts_insert AFTER INSERT ON steps BEGIN
    INSERT INTO steps_fts(rowid, text, tool, args_json)
    VALUES (new.seq, new.text, coalesce(new.tool, ''), coalesce(new.args_json, ''));
END;
CREATE INDEX IF NOT EXISTS samples_at ON samples(at);
CREATE INDEX IF NOT EXISTS submissions_status ON submissions(status);
CREATE INDEX IF NOT EXISTS events_at ON events(at);
"""


class StoreError(RuntimeError):
    """run.db is missing, unreadable or from an unknown schema version."""


@dataclass(frozen=True)
class Submission:
    id: int
    kind: str
    model_path: str | None
    resolved_path: str | None
    status: str
    received_at: float
    started_at: float | None
    finished_at: float | None
    score: float | None
    n_items: int | None
    n_correct: int | None
    error: str | None
    weights_hash: str | None
    engine: str | None
    settings_json: str | None
    timings_json: str | None
    gpu: str | None
    revision_seq: int | None = None
    revision_sha: str | None = None
    error_code: str | None = None
    intake_json: str | None = None

    @property
    def eval_seconds(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return self.finished_at - self.started_at

    @property
    def timings(self) -> dict[str, float]:
        return json.loads(self.timings_json) if self.timings_json else {}


# -- the rules every reader asks (one place each) ------------------------------------------

def scored_score(sub: Submission | None) -> float | None:
    """A submission's score if it was scored, else None (a failed baseline has no score)."""
    return sub.score if sub is not None and sub.status == SubStatus.SCORED else None


def best_of(subs: Iterable[Submission]) -> Submission | None:
    """The best agent submission: the highest score among the scored; the earliest wins a tie."""
    valid = [s for s in subs if s.kind == "agent" and scored_score(s) is not None]
    return max(valid, key=lambda s: (s.score, -s.id)) if valid else None


def prompt_profile_of(config_json: str | None, *subs: Submission | None) -> str | None:
    """The prompt profile a run's scores were made with: as a score recorded it (the first that
    did), else as the run was started with; None for a run of the task's default before any
    score, or one made before profiles were recorded."""
    for sub in subs:
        if sub is not None and sub.settings_json:
            name = json.loads(sub.settings_json).get("prompt_profile")
            if name:
                return str(name)
    return json.loads(config_json or "{}").get("prompt_profile")


def strict_of(sub: Submission | None) -> dict[str, Any] | None:
    """Our stricter reading beside a reference-profile score (its score and how many items
    differ), or None."""
    if sub is None or not sub.settings_json:
        return None
    return json.loads(sub.settings_json).get("strict")


def judgement_of(sub: Submission | None) -> dict[str, Any] | None:
    """A judge-graded score's facts: which rate the score is, both rates, the judge, how many
    items it failed on; None for other scores."""
    if sub is None or not sub.settings_json:
        return None
    settings = json.loads(sub.settings_json)
    rates, judge = settings.get("winrate"), settings.get("judge")
    if not rates or not judge:
        return None
    return {"metric": rates.get("metric"), "win_rate": rates.get("win_rate"),
            "length_controlled_winrate": rates.get("length_controlled_winrate"),
            "lc_unavailable": rates.get("lc_unavailable"), "n_judged": rates.get("n_total"),
            "n_failed": rates.get("n_failed"), "n_cached": rates.get("n_cached"),
            "judge_model": judge.get("model"), "judge_mode": judge.get("mode")}


BEST_SCORE_SQL = (
    f"SELECT score FROM submissions WHERE kind = 'agent' AND status = '{SubStatus.SCORED.value}'"
    " AND score IS NOT NULL ORDER BY score DESC, id ASC LIMIT 1"
)
"""``best_of`` as one SQL query, for listing a thousand runs without loading their submissions."""


def previous_scored(subs: Iterable[Submission], sub_id: int) -> Submission | None:
    """The last scored agent submission before ``sub_id``."""
    before = [s for s in subs if s.kind == "agent" and s.id < sub_id and s.status == SubStatus.SCORED]
    return before[-1] if before else None


def previous_revision_seq(subs: Iterable[Submission], sub_id: int) -> int | None:
    """The revision of the last agent submission before ``sub_id`` that has one."""
    seqs = [s.revision_seq for s in subs if s.kind == "agent" and s.id < sub_id and s.revision_seq is not None]
    return seqs[-1] if seqs else None


def connect(path: Path, *, create: bool = False) -> sqlite3.Connection:
    """Open run.db with WAL, a busy timeout and autocommit (each statement its own tx)."""
    if not create and not path.exists():
        raise StoreError(f"{path} does not exist: is this a run folder?")
    conn = sqlite3.connect(path, timeout=30.0, isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA busy_timeout = 30000")
    if create:
        conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    return conn


class RunStore:
    """Typed access to one run.db. Cheap to open; open one per process or thread."""

    def __init__(self, path: Path, *, create: bool = False) -> None:
        self.path = Path(path)
        self.conn = connect(self.path, create=create)
        self.db = sqlite_utils.Database(self.conn)
        version = self.conn.execute("PRAGMA user_version").fetchone()[0]
        if create and version == 0:
            self.conn.executescript(
                f"BEGIN IMMEDIATE; {_SCHEMA} PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"
            )
        elif version in MIGRATIONS:
            self._migrate(version)
        elif version != SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} has schema version {version}; this agent2rl-tui reads "
                f"version {SCHEMA_VERSION}. Upgrade agent2rl-tui to read it."
            )

    def _migrate(self, version: int) -> None:
        """Bring an older run.db to this schema; a copy that cannot be written is read as it is
        (the columns it lacks read as None)."""
        script = "".join(MIGRATIONS[v] for v in range(version, SCHEMA_VERSION))
        try:
            self.conn.executescript(f"BEGIN IMMEDIATE; {script} PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;")
        except sqlite3.OperationalError as exc:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            if "readonly" not in str(exc) and "duplicate column" not in str(exc):
                raise

    @classmethod
    def of_run(cls, run_dir: Path) -> RunStore:
        return cls(Path(run_dir) / "run.db")

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE ... COMMIT: take the write lock up front, keep it short."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    # -- run row ----------------------------------------------------------------------
    def create_run(self, **fields: Any) -> None:
        self.db["run"].insert(fields)

    def run(self) -> dict[str, Any]:
        row = self.conn.execute("SELECT * FROM run LIMIT 1").fetchone()
        if row is None:
            raise StoreError(f"{self.path} holds no run")
        return dict(row)

    def update_run(self, **fields: Any) -> None:
        cols = ", ".join(f"{k} = ?" for k in fields)
        self.conn.execute(f"UPDATE run SET {cols}", list(fields.values()))

    def heartbeat(self) -> None:
        self.conn.execute("UPDATE run SET heartbeat_at = ?", (now(),))

    # -- events -----------------------------------------------------------------------
    def event(self, source: str, kind: str, message: str, data: dict[str, Any] | None = None) -> None:
        self.conn.execute(
            "INSERT INTO events (at, source, kind, message, data_json) VALUES (?, ?, ?, ?, ?)",
            (now(), source, kind, message, json.dumps(data) if data is not None else None),
        )

    def last_event_data(self, kind: str) -> dict[str, Any] | None:
        """The data of the newest event of this kind (e.g. ``containment``), None if there is none."""
        row = self.conn.execute("SELECT data_json FROM events WHERE kind = ? ORDER BY id DESC LIMIT 1",
                                (kind,)).fetchone()
        return json.loads(row[0]) if row is not None and row[0] else None

    def events(self, since_id: int = 0) -> list[dict[str, Any]]:
        rows = self.conn.execute("SELECT * FROM events WHERE id > ? ORDER BY id", (since_id,))
        return [dict(r) for r in rows]

    # -- submissions ------------------------------------------------------------------
    def add_submission(self, *, kind: str, status: str, **fields: Any) -> int:
        """Insert a submission and return its id (0 for the baseline, then 1, 2, ...)."""
        with self.transaction() as conn:
            if kind == "baseline":
                sub_id = BASELINE_ID
            else:
                sub_id = conn.execute(
                    "SELECT COALESCE(MAX(id), 0) + 1 FROM submissions"
                ).fetchone()[0]
            record = {"id": sub_id, "kind": kind, "status": status, "received_at": now(), **fields}
            cols = ", ".join(record)
            marks = ", ".join("?" for _ in record)
            conn.execute(
                f"INSERT OR REPLACE INTO submissions ({cols}) VALUES ({marks})", list(record.values())
            )
        return int(sub_id)

    def update_submission(self, sub_id: int, **fields: Any) -> None:
        cols = ", ".join(f"{k} = ?" for k in fields)
        self.conn.execute(f"UPDATE submissions SET {cols} WHERE id = ?", [*fields.values(), sub_id])

    def submission(self, sub_id: int) -> Submission | None:
        row = self.conn.execute("SELECT * FROM submissions WHERE id = ?", (sub_id,)).fetchone()
        return Submission(**dict(row)) if row else None

    def submissions(self, *, kind: str | None = None) -> list[Submission]:
        sql, args = "SELECT * FROM submissions", []
        if kind:
            sql, args = sql + " WHERE kind = ?", [kind]
        rows = self.conn.execute(sql + " ORDER BY id", args)
        return [Submission(**dict(r)) for r in rows]

    def baseline(self) -> Submission | None:
        return self.submission(BASELINE_ID)

    def best(self) -> Submission | None:
        """The best agent submission (``best_of``, as one query)."""
        row = self.conn.execute(BEST_SCORE_SQL.replace("SELECT score", "SELECT *", 1)).fetchone()
        return Submission(**dict(row)) if row else None

    def agent_submission_count(self) -> int:
        """Agent submissions taken (queued, evaluated or failed), refusals not counted."""
        return self.conn.execute("SELECT COUNT(*) FROM submissions WHERE kind = 'agent' AND status != ?",
                                 (SubStatus.REJECTED,)).fetchone()[0]

    def last_submit_time(self) -> float | None:
        """When the last agent submission that was taken arrived (refusals not counted)."""
        return self.conn.execute("SELECT MAX(received_at) FROM submissions WHERE kind = 'agent' AND status != ?",
                                 (SubStatus.REJECTED,)).fetchone()[0]

    def rejected_count(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM submissions WHERE status = ?",
                                 (SubStatus.REJECTED,)).fetchone()[0]

    def pending_count(self) -> int:
        return self.conn.execute(
            "SELECT COUNT(*) FROM submissions WHERE status IN (?, ?)", PENDING_SUB_STATUSES
        ).fetchone()[0]
