"""Transcript storage: normalized steps in run.db, written in batches, read a page at a time.

The supervisor feeds every agent output line through the profile's normalizer
(run/streams/) and this module stores the steps in the ``steps`` table, with a full-text index,
so the TUI can page, filter by kind and search a transcript of 100,000 lines without
loading it. Lines on stderr are kept as ``raw`` steps with role ``stderr``.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from agent2rl_tui.record.store import RunStore
from agent2rl_tui.util.diskfull import disk_full_message, is_disk_full

STEP_KINDS = ("message", "reasoning", "tool_call", "tool_result", "error", "usage", "result",
              "system", "raw")
TEXT_LIMIT = 4000  # characters kept of a tool result / long text; `size` keeps the original length


@dataclass(slots=True)
class Step:
    """One thing the agent said or did, at one time."""

    at: float  # UNIX seconds
    kind: str  # one of STEP_KINDS
    text: str = ""
    role: str | None = None  # "assistant", "user", "system" where known
    tool: str | None = None
    call_id: str | None = None
    args: dict[str, Any] | None = None
    size: int | None = None  # original length of text when truncated (always, for tool_result)
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None
    line: int = 0  # 1-based stream line the step came from (first line of a multi-line record)


class StepSource(Protocol):
    """A stream normalizer: lines in, steps out (run/streams/ has one per agent CLI)."""

    def feed(self, line: str, at: float) -> list[Step]: ...

    def finish(self) -> list[Step]: ...


BATCH = 200
FLUSH_S = 0.5
RETRY_S = 5.0
"""How often steps the database refused are tried again."""
_COLUMNS = ("at", "kind", "role", "tool", "call_id", "text", "args_json", "size", "tokens_in", "tokens_out",
            "cost_usd", "line")


MAX_PENDING = 20_000
"""Steps kept in memory while the database refuses writes; beyond it the oldest are dropped
from the transcript (they stay in logs/agent.log, which is written first)."""
FLUSH_BYTES = 8 * 2**20
"""Steps are written once the lines they came from reach this size: tool arguments are kept
whole, so 200 steps from 1 MiB lines would otherwise sit in memory together."""
MAX_PENDING_BYTES = 64 * 2**20
"""While the database refuses writes, steps from more lines than this are dropped (as above)."""

log = logging.getLogger(__name__)


def _clean(value: Any) -> Any:
    """Text SQLite can store: a JSON ``"\\ud83d"`` (half an emoji) decodes to a lone surrogate."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return value


def _row(step: Step) -> tuple[Any, ...]:
    args = json.dumps(step.args) if step.args is not None else None  # ensure_ascii: always encodable
    return (step.at, _clean(step.kind), _clean(step.role), _clean(step.tool), _clean(step.call_id),
            _clean(step.text), args, step.size, step.tokens_in, step.tokens_out, step.cost_usd, step.line)


class TranscriptRecorder:
    """Thread-safe: the stdout and stderr readers both feed it."""

    def __init__(self, run_dir: Path, normalizer: StepSource) -> None:
        self.store = RunStore.of_run(run_dir)
        self.normalizer = normalizer
        self.lock = threading.Lock()
        self.pending: list[Step] = []
        self.pending_bytes = 0  # length of the lines the pending steps came from
        self.last_flush = time.monotonic()
        self.stderr_lines = 0
        self.refused_since: float | None = None  # the database refuses writes (locked, disk full) since then
        self.finished = False  # the normalizer's last steps taken
        self.run_dir = run_dir

    def stdout_line(self, line: str, at: float) -> None:
        with self.lock:
            self.pending_bytes += len(line)
            try:
                self.pending.extend(self.normalizer.feed(line, at))
            except Exception as exc:  # noqa: BLE001 - a normalizer bug must not lose the line
                log.warning("normalizer failed on line: %s", exc)
                self.pending.append(Step(at=at, kind="raw", text=line[:TEXT_LIMIT]))
            self._maybe_flush()

    def stderr_line(self, line: str, at: float) -> None:
        if not line.strip():
            return
        with self.lock:
            self.pending_bytes += len(line)
            self.stderr_lines += 1
            text = line if len(line) <= TEXT_LIMIT else line[:TEXT_LIMIT]
            self.pending.append(Step(at=at, kind="raw", text=text, role="stderr",
                                     size=len(line) if len(line) > TEXT_LIMIT else None,
                                     line=self.stderr_lines))
            self._maybe_flush()

    def _maybe_flush(self) -> None:
        waited = time.monotonic() - self.last_flush
        if self.refused_since is not None:  # refused: try again every few seconds, not at every line
            if waited >= RETRY_S:
                self._flush()
        elif len(self.pending) >= BATCH or self.pending_bytes >= FLUSH_BYTES or waited >= FLUSH_S:
            self._flush()

    def _flush(self) -> None:
        """Write pending steps; never raises (the agent's output keeps flowing to agent.log).

        A database that refuses writes (locked, disk full) keeps the steps pending for the
        next flush; a step that cannot be stored at all becomes a ``raw`` step saying so.
        """
        self.last_flush = time.monotonic()
        if not self.pending:
            return
        sql = f"INSERT INTO steps ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})"
        try:
            rows = [_row(s) for s in self.pending]
            with self.store.transaction() as conn:
                conn.executemany(sql, rows)
            if self.refused_since is not None:
                log.info("the transcript is written again (%d steps had waited %.0f s)", len(rows),
                         time.monotonic() - self.refused_since)
                self.refused_since = None
            self.pending.clear()
            self.pending_bytes = 0
            return
        except (sqlite3.OperationalError, sqlite3.DatabaseError) as exc:
            if isinstance(exc, sqlite3.OperationalError):  # locked, busy, disk full: try again later
                if self.refused_since is None:  # once, not at every retry
                    self.refused_since = time.monotonic()
                    why = disk_full_message(self.run_dir) if is_disk_full(exc) else str(exc)
                    log.warning("transcript steps wait in memory, tried again every %.0f s: %s", RETRY_S, why)
                if len(self.pending) > MAX_PENDING:
                    del self.pending[: len(self.pending) - MAX_PENDING]
                if self.pending_bytes > MAX_PENDING_BYTES:
                    last = self.pending[-1]
                    self.pending = [Step(at=last.at, kind="raw", line=last.line, text=(
                        f"[{len(self.pending)} steps dropped while the database refused writes; "
                        "their lines are in logs/agent.log]"))]
                    self.pending_bytes = 0
                return
        except Exception:  # noqa: BLE001 - a bad row: store the good ones one by one below
            pass
        kept: list[Step] = []
        for step in self.pending:
            try:
                with self.store.transaction() as conn:
                    conn.execute(sql, _row(step))
            except sqlite3.OperationalError:
                kept.append(step)
            except Exception as exc:  # noqa: BLE001
                try:
                    with self.store.transaction() as conn:
                        conn.execute(sql, _row(Step(at=step.at, kind="raw", line=step.line,
                                                    text=f"[step not storable: {type(exc).__name__}: {exc}]")))
                except Exception:  # noqa: BLE001 - the line is still in logs/agent.log
                    pass
        self.pending = kept
        self.pending_bytes = sum(len(s.text) for s in kept)

    def flush(self) -> None:
        with self.lock:
            self._flush()

    def close(self, *, final: bool = True) -> bool:
        """Write what waits and close; whether all of it was written. Not ``final``: steps a full
        disk keeps out stay pending, the record open, for a final close once there is room."""
        with self.lock:
            if not self.finished:
                self.pending.extend(self.normalizer.finish())
                self.finished = True
            self._flush()
            if self.pending and not final:
                return False
            if self.pending:
                log.error("%d transcript steps could not be written (their lines are in logs/agent.log)",
                          len(self.pending))
        self.store.close()
        return not self.pending


# -- reading (the TUI and the report) ----------------------------------------------------

@dataclass(frozen=True)
class StepRow:
    seq: int
    at: float
    kind: str
    role: str | None
    tool: str | None
    call_id: str | None
    text: str
    args: dict[str, Any] | None
    size: int | None
    tokens_in: int | None
    tokens_out: int | None
    cost_usd: float | None
    line: int | None


def _step_row(r: Any) -> StepRow:
    d = dict(r)
    args = d.pop("args_json")
    return StepRow(**d, args=json.loads(args) if args else None)


def _kind_clause(kinds: tuple[str, ...] | None) -> tuple[str, list[Any]]:
    if not kinds:
        return "", []
    return f" AND kind IN ({', '.join('?' * len(kinds))})", list(kinds)


def count_steps(store: RunStore, kinds: tuple[str, ...] | None = None) -> int:
    clause, args = _kind_clause(kinds)
    return int(store.conn.execute(f"SELECT COUNT(*) FROM steps WHERE 1=1{clause}", args).fetchone()[0])


def page_steps(store: RunStore, offset: int, limit: int, kinds: tuple[str, ...] | None = None) -> list[StepRow]:
    """Steps ``offset`` .. ``offset+limit`` in order, optionally of some kinds only."""
    clause, args = _kind_clause(kinds)
    rows = store.conn.execute(f"SELECT * FROM steps WHERE 1=1{clause} ORDER BY seq LIMIT ? OFFSET ?",
                              [*args, limit, offset])
    return [_step_row(r) for r in rows]


def steps_by_seq(store: RunStore, seqs: list[int]) -> list[StepRow]:
    if not seqs:
        return []
    rows = store.conn.execute(f"SELECT * FROM steps WHERE seq IN ({', '.join('?' * len(seqs))}) ORDER BY seq", seqs)
    return [_step_row(r) for r in rows]


def search_steps(store: RunStore, query: str, kinds: tuple[str, ...] | None = None,
                 limit: int = 1000) -> list[int]:
    """Steps whose text, tool name or tool arguments hold all words of ``query`` (FTS5), in order."""
    words = [w for w in query.replace('"', " ").split() if w]
    if not words:
        return []
    match = " ".join(f'"{w}"*' for w in words)  # quoted prefixes: no FTS syntax from the user
    clause, args = _kind_clause(kinds)
    rows = store.conn.execute(
        f"SELECT seq FROM steps WHERE seq IN (SELECT rowid FROM steps_fts WHERE steps_fts MATCH ?){clause}"
        " ORDER BY seq LIMIT ?", [match, *args, limit])
    return [r[0] for r in rows]


def position_of(store: RunStore, seq: int, kinds: tuple[str, ...] | None = None) -> int:
    """The 0-based position of step ``seq`` in the (filtered) listing."""
    clause, args = _kind_clause(kinds)
    return int(store.conn.execute(f"SELECT COUNT(*) FROM steps WHERE seq < ?{clause}", [seq, *args]).fetchone()[0])


def step_near(store: RunStore, at: float) -> int | None:
    """The last step at or before ``at`` (what the agent was doing then), else the first one."""
    row = store.conn.execute("SELECT seq FROM steps WHERE at <= ? ORDER BY at DESC, seq DESC LIMIT 1", (at,)).fetchone()
    if row is None:
        row = store.conn.execute("SELECT seq FROM steps ORDER BY seq LIMIT 1").fetchone()
    return row[0] if row else None


def transcript_totals(store: RunStore) -> dict[str, Any]:
    row = store.conn.execute(
        "SELECT COUNT(*), SUM(tokens_in), SUM(tokens_out), SUM(cost_usd), COUNT(cost_usd) FROM steps").fetchone()
    kinds = {k: n for k, n in store.conn.execute("SELECT kind, COUNT(*) FROM steps GROUP BY kind")}
    return {
        "steps": row[0],
        "tokens_in": row[1] or 0,
        "tokens_out": row[2] or 0,
        "cost_usd": row[3] if row[4] else None,
        "by_kind": kinds,
    }
