"""record.watch: a reader sees another connection's commit as a change, and nothing else."""

from __future__ import annotations

import os
from pathlib import Path

from agent2rl_tui.record.runrecord import RunRecord
from agent2rl_tui.record.store import RunStore
from agent2rl_tui.record.watch import RunWatch, stamp


def make_record(run_dir: Path) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    with RunStore(run_dir / "run.db", create=True) as store:
        store.create_run(RunRecord(id="r", task="arith", agent="example", base_model="m", base_model_source="/m",
                         budget_s=60, grace_s=5, status="created", created_at=0.0))
    return run_dir


def test_a_write_by_another_connection_is_a_change(tmp_path: Path) -> None:
    run_dir = make_record(tmp_path / "run")
    with RunWatch(run_dir) as watch, RunStore.of_run(run_dir) as writer:
        assert not watch.changed()
        writer.heartbeat()
        assert watch.changed()
        assert not watch.changed()  # seen once: no second change without a second write
        writer.update_run(status="running")
        writer.update_run(status="finished")
        assert watch.changed()


def test_no_write_is_no_change(tmp_path: Path) -> None:
    run_dir = make_record(tmp_path / "run")
    with RunWatch(run_dir) as watch, RunStore.of_run(run_dir) as reader:
        reader.run()  # another connection only reading
        assert not watch.changed()
        assert not watch.changed()


def test_a_write_before_the_first_look_counts(tmp_path: Path) -> None:
    """The watch's state when made is the baseline: a write after it is a change."""
    run_dir = make_record(tmp_path / "run")
    watch = RunWatch(run_dir)
    with RunStore.of_run(run_dir) as writer:
        writer.heartbeat()
    assert watch.changed()
    watch.close()


def test_the_watch_is_read_only(tmp_path: Path) -> None:
    run_dir = make_record(tmp_path / "run")
    with RunWatch(run_dir) as watch:
        watch.changed()
        assert watch._conn is not None
        try:
            watch._conn.execute("UPDATE run SET status = 'x'")
        except Exception as exc:  # noqa: BLE001 - sqlite3.OperationalError: readonly database
            assert "readonly" in str(exc)
        else:
            raise AssertionError("a write through the watch's connection went through")


def test_a_run_db_that_is_not_there_yet_is_no_change_until_it_is(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    with RunWatch(run_dir) as watch:
        assert not watch.changed()
        make_record(run_dir)
        assert watch.changed()
        assert not watch.changed()


def test_stamp_moves_with_a_write_and_not_without(tmp_path: Path) -> None:
    run_dir = make_record(tmp_path / "run")
    with RunStore.of_run(run_dir) as store:
        before = stamp(run_dir)
        assert stamp(run_dir) == before
        store.run()
        assert stamp(run_dir) == before
        old = before[1] - 10_000_000  # files times are coarse on some file systems: step back first
        wal = run_dir / "run.db-wal"
        if wal.exists():
            os.utime(wal, ns=(old, old))
        before = stamp(run_dir)
        store.heartbeat()
        assert stamp(run_dir) != before


def test_stamp_of_a_folder_without_a_record(tmp_path: Path) -> None:
    assert stamp(tmp_path) == (0, 0)
