"""The background writer (record/writer.py) on a real run.db: rows in order, a locked database
waited out, a batch it cannot write handed back with the reason, nothing blocking the caller."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from agent2rl_tui.record.runrecord import RunRecord
from agent2rl_tui.record.store import RunStore
from agent2rl_tui.record.writer import BackgroundWriter


def new_db(tmp_path: Path) -> Path:
    db = tmp_path / "run.db"
    with RunStore(db, create=True) as store:
        store.create_run(RunRecord(id="r", task="arith", agent="command", base_model="m", base_model_source="/m",
                                   budget_s=60, grace_s=1, status="running", created_at=0.0))
    return db


def env_row(i: int) -> dict[str, Any]:
    return {"at": float(i), "op": "step", "status": 200, "env_id": 1}


def test_rows_are_written_in_order_and_a_locked_db_is_waited_out(tmp_path: Path) -> None:
    db = new_db(tmp_path)
    failures: list[tuple[int, Exception]] = []
    writer: BackgroundWriter[dict[str, Any]] = BackgroundWriter(
        db, lambda store, rows: store.add_env_calls(rows), name="test-writer",
        on_failure=lambda rows, exc: failures.append((len(rows), exc)))
    locker = sqlite3.connect(db, timeout=0, isolation_level=None, check_same_thread=False)
    locker.execute("BEGIN EXCLUSIVE")  # another process holding run.db's write lock
    started = time.monotonic()
    for i in range(500):
        writer.put(env_row(i))
    assert time.monotonic() - started < 5  # the caller never waits for the database
    threading.Timer(1.5, lambda: locker.execute("COMMIT")).start()
    writer.flush()
    writer.close()
    with RunStore(db) as store:
        ats = [r[0] for r in store.conn.execute("SELECT at FROM env_calls ORDER BY id")]
    assert ats == [float(i) for i in range(500)] and failures == []


def test_a_batch_that_cannot_be_written_is_handed_back_and_the_writer_goes_on(tmp_path: Path) -> None:
    db = new_db(tmp_path)
    failures: list[tuple[int, str]] = []
    writer: BackgroundWriter[dict[str, Any]] = BackgroundWriter(
        db, lambda store, rows: store.add_env_calls(rows), name="test-writer",
        on_failure=lambda rows, exc: failures.append((len(rows), str(exc))))
    writer.put({"no_such_column": 1})
    writer.flush()
    writer.put(env_row(7))
    writer.close()
    assert failures == [(1, "env_calls has no columns ['no_such_column']")]
    with RunStore(db) as store:
        assert [r[0] for r in store.conn.execute("SELECT at FROM env_calls")] == [7.0]
