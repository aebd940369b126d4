"""Change detection on a run's record, so readers reload only when something was written.

A reader that shows a run (the TUI) polls; asking SQLite is cheaper and surer than
re-reading the record. ``RunWatch`` keeps one read-only connection and compares
``PRAGMA data_version``, which moves exactly when another connection commits.
``stamp`` is the cheaper, connection-free check for a list of many runs: the file times of
run.db and its write-ahead log, which change with every write.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

Stamp = tuple[int, int]
"""The modification times (ns) of run.db and run.db-wal; 0 for a file that is not there."""


def stamp(run_dir: Path) -> Stamp:
    """A fingerprint of the run's record that changes whenever a write lands."""
    return _mtime_ns(Path(run_dir) / "run.db"), _mtime_ns(Path(run_dir) / "run.db-wal")


def _mtime_ns(path: Path) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return 0


class RunWatch:
    """Tells whether a run's run.db was written since the last look (or since it was made).

    The connection is read-only and opened on first need; ``changed`` may be called from
    any one thread at a time (a thread worker), ``close`` from any thread.
    """

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / "run.db"
        self._conn: sqlite3.Connection | None = None
        self._version = self._read()

    def _connect(self) -> sqlite3.Connection | None:
        if self._conn is None and self.path.exists():
            try:
                self._conn = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True,
                                             timeout=30.0, check_same_thread=False)
            except sqlite3.Error:
                return None
        return self._conn

    def _read(self) -> int | None:
        conn = self._connect()
        if conn is None:
            return None
        try:
            return int(conn.execute("PRAGMA data_version").fetchone()[0])
        except sqlite3.Error:
            return None

    def changed(self) -> bool:
        """True when another connection committed to run.db since the last call."""
        version = self._read()
        if version is None or version == self._version:
            return False
        self._version = version
        return True

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> RunWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
