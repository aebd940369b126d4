"""run.db: WAL, schema version, concurrent writers from several processes."""

from __future__ import annotations

import multiprocessing
import sqlite3
from pathlib import Path

import pytest

from agent2rl_tui.record.runrecord import RunRecord
from agent2rl_tui.record.store import SCHEMA_VERSION, RunStore, StoreError


def new_store(path: Path) -> RunStore:
    store = RunStore(path, create=True)
    store.create_run(RunRecord(id="r", task="arith", agent="example", base_model="m", base_model_source="/m",
                     budget_s=60, grace_s=5, status="created", created_at=0.0))
    return store


def test_run_db_is_wal_with_a_schema_version(tmp_path: Path) -> None:
    new_store(tmp_path / "run.db").close()
    conn = sqlite3.connect(tmp_path / "run.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_an_unknown_schema_version_is_refused_with_advice(tmp_path: Path) -> None:
    new_store(tmp_path / "run.db").close()
    conn = sqlite3.connect(tmp_path / "run.db")
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    with pytest.raises(StoreError, match="schema version 99.*Upgrade"):
        RunStore(tmp_path / "run.db")


def test_a_missing_run_db_says_so(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="is this a run folder"):
        RunStore(tmp_path / "run.db")


def _add_many(path: str, n: int) -> None:
    store = RunStore(Path(path))
    for _ in range(n):
        store.add_submission(kind="agent", status="queued", model_path="x")
        store.event("test", "tick", "x")
        store.heartbeat()
    store.close()


def test_concurrent_writers_lose_nothing_and_never_share_an_id(tmp_path: Path) -> None:
    path = tmp_path / "run.db"
    store = new_store(path)
    store.add_submission(kind="baseline", status="scored", score=1.0)
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_add_many, args=(str(path), 50)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    subs = store.submissions(kind="agent")
    assert [s.id for s in subs] == list(range(1, 201))
    assert store.baseline().score == 1.0
    assert len(store.events()) == 200
