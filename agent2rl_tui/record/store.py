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

from agent2rl_tui.record.evaljob import EvalSummary
from agent2rl_tui.record.runconfig import RunConfig
from agent2rl_tui.record.runrecord import RunRecord
from agent2rl_tui.record.summary_parts import Judgement, StrictReading
from agent2rl_tui.util.timeutil import now

SCHEMA_VERSION = 5

_LLM_CALLS = """
CREATE TABLE IF NOT EXISTS llm_calls (
    id INTEGER PRIMARY KEY,
    at REAL NOT NULL,                  -- when the request reached the meter
    protocol TEXT,                     -- anthropic | responses | chat | gemini; NULL: no driver API's path
    endpoint TEXT,                     -- generate | count_tokens; NULL as above
    method TEXT NOT NULL,
    path TEXT NOT NULL,                -- without its query (a key can ride in it)
    model TEXT,                        -- the model that answered, else the one asked for
    status INTEGER NOT NULL,           -- the HTTP status the agent got
    latency_s REAL,                    -- request in to the reply's last byte out
    ttfb_s REAL,                       -- request in to the reply's headers
    streamed INTEGER NOT NULL DEFAULT 0,
    input_tokens INTEGER,              -- all prompt tokens, cached included; NULL: the reply reported no usage
    output_tokens INTEGER,             -- reasoning included
    cached_tokens INTEGER,
    cache_write_tokens INTEGER,
    reasoning_tokens INTEGER,
    cost_usd REAL,                     -- NULL: no usage, or no price for the model
    complete INTEGER NOT NULL DEFAULT 0,  -- the reply reached its own end
    refused INTEGER NOT NULL DEFAULT 0,   -- refused by the meter (a cap), never sent on
    error TEXT,
    request_bytes INTEGER,
    response_bytes INTEGER
);
CREATE INDEX IF NOT EXISTS llm_calls_at ON llm_calls(at);
"""

_ENV_CALLS = """
CREATE TABLE IF NOT EXISTS env_calls (
    id INTEGER PRIMARY KEY,
    at REAL NOT NULL,                  -- when the request reached the train-environment service
    op TEXT NOT NULL,                  -- create | reset | step | close | games | refused
    env_id INTEGER,                    -- the service's environment, NULL for a call about none
    game TEXT,                         -- the train game, session or question played
    status INTEGER NOT NULL,           -- the HTTP status the agent got
    action TEXT,                       -- the action played (capped), the completion's when given one
    reward REAL,
    done INTEGER,
    won INTEGER,
    step INTEGER,                      -- the episode's turn this call played
    searches INTEGER NOT NULL DEFAULT 0,  -- queries sent to the run's search backend
    judge_calls INTEGER NOT NULL DEFAULT 0,  -- calls to the run's judge (a reward by judge)
    latency_s REAL,
    error TEXT                         -- a refusal's or a failure's code and text (capped)
);
CREATE INDEX IF NOT EXISTS env_calls_at ON env_calls(at);
"""

MIGRATIONS: dict[int, str] = {
    # 1 -> 2: a failure's code (what the agent was told) beside its full text, and the grader's
    # manifest of what it took of a submitted folder.
    1: "ALTER TABLE submissions ADD COLUMN error_code TEXT; ALTER TABLE submissions ADD COLUMN intake_json TEXT;",
    # 2 -> 3: the meter's record of every call the agent made to its driver API.
    2: _LLM_CALLS,
    # 3 -> 4: the train-environment service's record of every call the agent made to it.
    3: _ENV_CALLS,
    # 4 -> 5: the files a snapshot left out for their size, by name, size and hash.
    4: "ALTER TABLE revisions ADD COLUMN too_big_json TEXT;",
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
AFTER_KIND = "after"
"""A submission a person graded after the run ended (``run grade``): outside its budget, never its best."""

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
    ignored_json TEXT NOT NULL,        -- {reason: count} of paths left out of this snapshot
    too_big_json TEXT                  -- [{path, size, sha256}] of the files left out for their size
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
""" + _LLM_CALLS + _ENV_CALLS


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


@dataclass(frozen=True)
class LlmCall:
    """One call the agent made to its driver API, as the meter recorded it (table ``llm_calls``)."""

    id: int
    at: float
    protocol: str | None
    endpoint: str | None
    method: str
    path: str
    model: str | None
    status: int
    latency_s: float | None
    ttfb_s: float | None
    streamed: bool
    input_tokens: int | None
    output_tokens: int | None
    cached_tokens: int | None
    cache_write_tokens: int | None
    reasoning_tokens: int | None
    cost_usd: float | None
    complete: bool
    refused: bool
    error: str | None
    request_bytes: int | None
    response_bytes: int | None

    @property
    def priced(self) -> bool:
        """False for a call that reported usage but whose model has no price."""
        return self.input_tokens is None or self.cost_usd is not None


LLM_CALL_COLUMNS = tuple(f for f in LlmCall.__dataclass_fields__ if f != "id")


@dataclass(frozen=True)
class LlmTotals:
    """The sums of a run's ``llm_calls``: what the meter saw, for the record's readers."""

    calls: int = 0
    refused: int = 0
    incomplete: int = 0           # replies cut short (a client gone, an upstream cut, the meter stopped)
    failed: int = 0               # status >= 400, refusals included
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float | None = None  # of the priced calls; None when no call with usage had a price
    unpriced_calls: int = 0       # calls with usage and no price
    no_usage: int = 0             # generation calls answered 2xx whose reply reported no usage
    unpriced_models: tuple[str, ...] = ()
    first_at: float | None = None
    last_at: float | None = None


# -- the rules every reader asks (one place each) ------------------------------------------

def scored_score(sub: Submission | None) -> float | None:
    """A submission's score if it was scored, else None (a failed baseline has no score)."""
    return sub.score if sub is not None and sub.status == SubStatus.SCORED else None


def best_of(subs: Iterable[Submission]) -> Submission | None:
    """The best agent submission: the highest score among the scored; the earliest wins a tie."""
    valid = [s for s in subs if s.kind == "agent" and scored_score(s) is not None]
    return max(valid, key=lambda s: (s.score, -s.id)) if valid else None


def _summary(sub: Submission | None) -> EvalSummary:
    """How ``sub``'s score was made (``EvalSummary``); empty for none, or an unreadable record."""
    return EvalSummary.from_settings_json(sub.settings_json if sub is not None else None)


def prompt_profile_of(config: RunConfig, *subs: Submission | None) -> str | None:
    """The prompt profile a run's scores were made with: as a score recorded it (the first that
    did), else as the run was started with; None for a run of the task's default before any
    score, or one made before profiles were recorded."""
    for sub in subs:
        if name := _summary(sub).prompt_profile:
            return name
    return config.prompt_profile


def decoding_row_of(config: RunConfig, *subs: Submission | None) -> str | None:
    """The row of the reference's model table that set a run's decoding (a profile that uses
    the table): as a score recorded it, else as the run was started with; None: the profile's own."""
    for sub in subs:
        if row := _summary(sub).decoding_row:
            return row
    return config.decoding_row


def strict_of(sub: Submission | None) -> StrictReading | None:
    """Our stricter reading beside a reference-profile score (its score and how many items
    differ), or None."""
    return _summary(sub).strict


def judgement_of(sub: Submission | None) -> Judgement | None:
    """A judge-graded score's facts: which rate the score is, both rates, the judge, how many
    items it failed on; None for other scores (``EvalSummary.judgement``)."""
    return _summary(sub).judgement()


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
    def create_run(self, record: RunRecord) -> None:
        fields = record.to_row()
        cols = ", ".join(fields)
        marks = ", ".join("?" for _ in fields)
        self.conn.execute(f"INSERT INTO run ({cols}) VALUES ({marks})", list(fields.values()))

    def run(self) -> RunRecord:
        row = self.conn.execute("SELECT * FROM run LIMIT 1").fetchone()
        if row is None:
            raise StoreError(f"{self.path} holds no run")
        return RunRecord.from_row(row)

    def deadline(self) -> tuple[float | None, float]:
        """(the run's deadline, its grace seconds); (None, 0.0) before the agent starts or without a run row."""
        row = self.conn.execute("SELECT deadline, grace_s FROM run").fetchone()
        return (None, 0.0) if row is None else (row["deadline"], row["grace_s"] or 0.0)

    def config(self) -> RunConfig:
        """The run's settings (``run.config_json``), typed."""
        return self.run().config

    def set_config(self, config: RunConfig) -> None:
        self.update_run(config_json=config.dumps())

    def update_run(self, **fields: Any) -> None:
        unknown = set(fields) - RunRecord.columns()
        if unknown:
            raise StoreError(f"the run table has no column {', '.join(sorted(unknown))}")
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
        return int(self.conn.execute("SELECT COUNT(*) FROM submissions WHERE kind = 'agent' AND status != ?",
                                     (SubStatus.REJECTED,)).fetchone()[0])

    def last_submit_time(self) -> float | None:
        """When the last agent submission that was taken arrived (refusals not counted)."""
        last: float | None = self.conn.execute(
            "SELECT MAX(received_at) FROM submissions WHERE kind = 'agent' AND status != ?", (SubStatus.REJECTED,)
        ).fetchone()[0]
        return last

    def rejected_count(self) -> int:
        return int(self.conn.execute("SELECT COUNT(*) FROM submissions WHERE status = ?",
                                     (SubStatus.REJECTED,)).fetchone()[0])

    def pending_count(self) -> int:
        return int(self.conn.execute(
            "SELECT COUNT(*) FROM submissions WHERE status IN (?, ?)", PENDING_SUB_STATUSES
        ).fetchone()[0])

    # -- driver-API calls (the meter) -------------------------------------------------------
    def has_table(self, name: str) -> bool:
        return self.conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                                 (name,)).fetchone() is not None

    def add_llm_call(self, **fields: Any) -> int:
        """Record one call (the meter's row): one INSERT, its own short transaction."""
        unknown = set(fields) - set(LLM_CALL_COLUMNS)
        if unknown:
            raise ValueError(f"llm_calls has no columns {sorted(unknown)}")
        cols = ", ".join(fields)
        marks = ", ".join("?" for _ in fields)
        cur = self.conn.execute(f"INSERT INTO llm_calls ({cols}) VALUES ({marks})", list(fields.values()))
        return int(cur.lastrowid or 0)

    def llm_calls(self, *, offset: int = 0, limit: int = -1) -> list[LlmCall]:
        """The recorded calls in order ([] for a run.db made before the meter, read as it is)."""
        if not self.has_table("llm_calls"):
            return []
        rows = self.conn.execute("SELECT * FROM llm_calls ORDER BY id LIMIT ? OFFSET ?", (limit, offset))
        return [_llm_call(r) for r in rows]

    def llm_call_count(self) -> int:
        if not self.has_table("llm_calls"):
            return 0
        return int(self.conn.execute("SELECT COUNT(*) FROM llm_calls").fetchone()[0])

    def add_env_calls(self, rows: list[dict[str, Any]]) -> None:
        """Record the train-environment service's calls (its rows, in one transaction)."""
        if not rows:
            return
        for row in rows:
            unknown = set(row) - set(ENV_CALL_COLUMNS)
            if unknown:
                raise ValueError(f"env_calls has no columns {sorted(unknown)}")
        with self.transaction() as conn:
            for row in rows:
                cols = ", ".join(row)
                conn.execute(f"INSERT INTO env_calls ({cols}) VALUES ({', '.join('?' for _ in row)})", list(row.values()))

    def add_sample(self, at: float, *, cpu_pct: float | None, mem_used: int | None, mem_total: int | None,
                   disk_free: int | None, disk_total: int | None, agent_procs: int | None, agent_rss: int | None,
                   gpus: list[dict[str, Any]], gpu_note: str | None) -> None:
        """One vitals sample (table ``samples``): the machine, the agent's processes, each GPU."""
        self.conn.execute(
            "INSERT INTO samples (at, cpu_pct, mem_used, mem_total, disk_free, disk_total, agent_procs,"
            " agent_rss, gpus_json, gpu_note) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (at, cpu_pct, mem_used, mem_total, disk_free, disk_total, agent_procs, agent_rss, json.dumps(gpus),
             gpu_note),
        )

    def revision_rows(self) -> list[dict[str, Any]]:
        """Every recorded revision (table ``revisions``), in order."""
        return [dict(r) for r in self.conn.execute("SELECT * FROM revisions ORDER BY seq")]

    def step_rows(self, columns: tuple[str, ...] = ("kind", "tool", "text", "args_json")) -> list[dict[str, Any]]:
        """The transcript's steps in order, with ``columns`` (names of table ``steps``)."""
        known = {"seq", "at", "kind", "role", "tool", "call_id", "text", "args_json", "size", "tokens_in", "tokens_out",
                 "cost_usd", "line"}
        if not set(columns) <= known:
            raise StoreError(f"steps has no column {sorted(set(columns) - known)}")
        return [dict(r) for r in self.conn.execute(f"SELECT {', '.join(columns)} FROM steps ORDER BY seq")]

    def step_lines(self) -> Iterator[tuple[float, str, str | None, str | None, str, str | None]]:
        """The transcript in order as (at, kind, tool, call_id, text, args_json): read as it is
        walked, since a run of hours holds hundreds of thousands of steps."""
        yield from self.conn.execute("SELECT at, kind, tool, call_id, text, args_json FROM steps ORDER BY seq")

    def step_lines_with_role(self) -> Iterator[tuple[float, str, str | None, str | None, str | None, str, str | None]]:
        """As ``step_lines``, with each step's role: (at, kind, role, tool, call_id, text, args_json)."""
        yield from self.conn.execute("SELECT at, kind, role, tool, call_id, text, args_json FROM steps ORDER BY seq")

    def gpu_busy_intervals(self, min_util_pct: float) -> list[tuple[float, float]]:
        """Stretches between two vitals samples in which a GPU was at least ``min_util_pct`` busy
        (the later sample's reading, over the time since the one before)."""
        rows = self.conn.execute("SELECT at, gpus_json FROM samples ORDER BY at").fetchall()
        spans: list[tuple[float, float]] = []
        for (before, _), (at, gpus) in zip(rows, rows[1:]):
            try:
                readings = json.loads(gpus or "[]")
            except ValueError:
                continue
            if any(isinstance(g, dict) and (g.get("util_pct") or 0) >= min_util_pct for g in readings):
                spans.append((before, at))
        return spans

    def llm_intervals(self) -> list[tuple[float, float]]:
        """When each metered call was in flight: (start, end)."""
        if not self.has_table("llm_calls"):
            return []
        return [(r[0], r[0] + (r[1] or 0.0)) for r in
                self.conn.execute("SELECT at, latency_s FROM llm_calls ORDER BY at")]

    def env_calls(self, *, offset: int = 0, limit: int = -1) -> list[dict[str, Any]]:
        if not self.has_table("env_calls"):
            return []
        rows = self.conn.execute("SELECT * FROM env_calls ORDER BY id LIMIT ? OFFSET ?", (limit, offset))
        return [dict(r) for r in rows]

    def env_step_times(self) -> list[float]:
        """When each step the train-environment service played for the agent was asked for."""
        if not self.has_table("env_calls"):
            return []
        return [r[0] for r in self.conn.execute("SELECT at FROM env_calls WHERE op = 'step' AND status = 200 ORDER BY at")]

    def env_totals(self) -> EnvTotals:
        if not self.has_table("env_calls"):
            return EnvTotals()
        row = self.conn.execute("""
            SELECT COUNT(*), COALESCE(SUM(op = 'reset' AND status = 200), 0), COALESCE(SUM(op = 'step' AND status = 200), 0),
                   COALESCE(SUM(op = 'step' AND won = 1 AND done = 1), 0), COALESCE(SUM(status >= 400), 0),
                   COALESCE(SUM(searches), 0), COALESCE(SUM(judge_calls), 0)
            FROM env_calls""").fetchone()
        return EnvTotals(*row)

    def llm_totals(self) -> LlmTotals:
        """The sums of every recorded call, by SQL (a run may make tens of thousands of calls)."""
        if not self.has_table("llm_calls"):
            return LlmTotals()
        row = self.conn.execute("""
            SELECT COUNT(*), COALESCE(SUM(refused), 0), COALESCE(SUM(complete = 0), 0), COALESCE(SUM(status >= 400), 0),
                   COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0), COALESCE(SUM(cached_tokens), 0),
                   COALESCE(SUM(cache_write_tokens), 0), COALESCE(SUM(reasoning_tokens), 0),
                   SUM(cost_usd), SUM(input_tokens IS NOT NULL AND cost_usd IS NULL), MIN(at), MAX(at),
                   SUM(endpoint = 'generate' AND status BETWEEN 200 AND 299 AND input_tokens IS NULL)
            FROM llm_calls""").fetchone()
        models = tuple(r[0] for r in self.conn.execute(
            "SELECT DISTINCT COALESCE(model, '?') FROM llm_calls WHERE input_tokens IS NOT NULL AND cost_usd IS NULL"
            " ORDER BY 1"))
        return LlmTotals(calls=row[0], refused=row[1], incomplete=row[2], failed=row[3], input_tokens=row[4],
                         output_tokens=row[5], cached_tokens=row[6], cache_write_tokens=row[7], reasoning_tokens=row[8],
                         cost_usd=row[9], unpriced_calls=row[10] or 0, unpriced_models=models, no_usage=row[13] or 0,
                         first_at=row[11], last_at=row[12])


ENV_CALL_COLUMNS = ("at", "op", "env_id", "game", "status", "action", "reward", "done", "won", "step", "searches",
                    "judge_calls", "latency_s", "error")


@dataclass(frozen=True)
class EnvTotals:
    """The sums of a run's ``env_calls``: how much the agent played its train environments."""

    calls: int = 0
    episodes: int = 0             # resets
    steps: int = 0
    won: int = 0                  # episodes that ended won
    refused: int = 0              # calls answered 4xx (an eval game, a flood, a bad body)
    searches: int = 0
    judge_calls: int = 0


def _llm_call(row: sqlite3.Row) -> LlmCall:
    d = dict(row)
    for key in ("streamed", "complete", "refused"):
        d[key] = bool(d[key])
    return LlmCall(**d)
