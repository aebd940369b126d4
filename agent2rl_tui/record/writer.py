"""Rows written to run.db by one thread of their own, in order and in batches.

The meter records every driver call (``llm_calls``) and the train-environment service every
environment call (``env_calls``) from request threads that must never wait for SQLite: a rollout
makes thousands of calls, and run.db may be locked a moment by the supervisor or a reader. Both
hand their rows to a ``BackgroundWriter``: a queue and one thread that takes whatever is waiting,
writes it as one batch (one transaction where the write function makes one), tries a locked
database again a few times with a growing pause, and hands a batch it could not write to the
owner's ``on_failure`` (its log says so) instead of dying. ``flush`` waits for everything queued;
``close`` writes the rest and closes the store.
"""

from __future__ import annotations

import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

from agent2rl_tui.record.store import RunStore

T = TypeVar("T")


class BackgroundWriter(Generic[T]):
    """A thread that writes items to run.db with ``write(store, batch)``, in order."""

    def __init__(self, db: Path, write: Callable[[RunStore, list[T]], None], *, name: str,
                 on_failure: Callable[[list[T], Exception], None], attempts: int = 8) -> None:
        self.store = RunStore(db)  # migrates an older run.db to this schema
        self.write, self.on_failure, self.attempts = write, on_failure, attempts
        self.queue: queue.Queue[T | None] = queue.Queue()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def put(self, item: T) -> None:
        self.queue.put(item)

    def flush(self) -> None:
        """Wait until everything queued so far is written (or given up)."""
        self.queue.join()

    def close(self, timeout: float = 60.0) -> None:
        self.queue.put(None)
        self.thread.join(timeout=timeout)
        self.store.close()

    def _run(self) -> None:
        while True:
            taken = self._take()
            batch = [item for item in taken if item is not None]
            try:
                if batch:
                    self._write(batch)
            finally:
                for _ in taken:
                    self.queue.task_done()
            if taken[-1] is None:
                return

    def _take(self) -> list[T | None]:
        """The next item, and every one waiting behind it (up to the end marker)."""
        taken = [self.queue.get()]
        while taken[-1] is not None:
            try:
                taken.append(self.queue.get_nowait())
            except queue.Empty:
                break
        return taken

    def _write(self, batch: list[T]) -> None:
        for attempt in range(self.attempts):
            try:
                self.write(self.store, batch)
                return
            except sqlite3.OperationalError as exc:  # locked past the busy timeout, or a full disk
                if attempt == self.attempts - 1:
                    self.on_failure(batch, exc)
                    return
                time.sleep(0.5 * (attempt + 1))
            except Exception as exc:  # noqa: BLE001 - a bad row must not stop the writer
                self.on_failure(batch, exc)
                return
