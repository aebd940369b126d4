"""A full disk, named where it bites, and logs that wait for room instead of losing lines.

An agent shares its run folder's disk with the record, and may fill it (checkpoints, a dataset,
a runaway log). What fails then says so in one line that names the disk and what is free —
"the disk under /runs is full (0.2 MB free)" — instead of a traceback or "database or disk is
full" twelve times in two seconds. ``SpooledLog`` is an append-only log file that keeps what it
could not write in memory (up to a cap) while the disk is full, writes it once there is room,
and says how much it had to drop past the cap: the agent's output is drained all the while, so
the agent never blocks on a full pipe.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
SPOOL_BYTES = 16 << 20
"""What a log keeps in memory while its disk is full; past it, lines are counted and dropped."""


def is_disk_full(exc: BaseException) -> bool:
    """Whether an error is a full disk (or quota): ENOSPC/EDQUOT, or SQLite's SQLITE_FULL."""
    if isinstance(exc, OSError) and exc.errno in FULL_ERRNOS:
        return True
    return isinstance(exc, sqlite3.OperationalError) and "disk is full" in str(exc)


def free_bytes(path: Path) -> int | None:
    """Bytes free to an unprivileged writer under ``path`` (its nearest existing folder)."""
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        st = os.statvfs(p)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def disk_full_message(path: Path) -> str:
    """``the disk under PATH is full (N MB free)``: what to say wherever a full disk stops something."""
    free = free_bytes(path)
    room = f"{free / 1e6:.1f} MB free" if free is not None else "its free space unknown"
    return f"the disk under {path} is full ({room})"


class SpooledLog:
    """An append-only binary file whose writes never raise for a full disk.

    ``write(data)`` appends; while the disk is full the data waits in memory (``SPOOL_BYTES`` at
    most, then it is counted and dropped) and is written, in order, by the next write or
    ``flush`` that finds room. ``on_full(message)`` is called once each time the disk fills,
    ``on_room(message)`` once it has room again, saying what waited and what was dropped (that
    note is written into the file too, where the dropped part was). Thread-safe.
    """

    def __init__(self, path: Path, *, on_full: Callable[[str], None] | None = None,
                 on_room: Callable[[str], None] | None = None, name: str = "") -> None:
        self.path = Path(path)
        self.name = name or self.path.name
        self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        self.pending: list[bytes] = []
        self.pending_bytes = 0
        self.dropped_bytes = 0
        self.full = False
        self.lock = threading.Lock()
        self._on_full, self._on_room = on_full, on_room

    def write(self, data: bytes) -> None:
        with self.lock:
            if self.pending and not self._drain():
                self._keep(data)
            else:
                self._write_all(data)

    def flush(self) -> None:
        with self.lock:
            if self.pending:
                self._drain()

    def close(self, *, final: bool = True) -> bool:
        """Write what waits and close; whether all of it was written. Not ``final``: while some of
        it still waits for room, the file stays open for a final close (once there is room)."""
        self.flush()
        with self.lock:
            if self.pending and not final:
                return False
            if self.pending or self.dropped_bytes:
                lost = self.pending_bytes + self.dropped_bytes
                if self._on_full is not None:
                    self._on_full(f"{disk_full_message(self.path.parent)}: {lost:,} bytes of {self.name} were lost")
            if self.fd >= 0:
                os.close(self.fd)
                self.fd = -1
            return not self.pending

    # -- inside the lock ------------------------------------------------------------------
    def _write_all(self, data: bytes) -> None:
        """Write ``data`` whole, or keep its unwritten tail pending (nothing pends before it)."""
        view = memoryview(data)
        while view:
            try:
                n = os.write(self.fd, view)
            except OSError as exc:
                if not is_disk_full(exc):
                    raise
                self._filled()
                self.pending.insert(0, bytes(view))
                self.pending_bytes += len(view)
                return
            view = view[n:]

    def _keep(self, data: bytes) -> None:
        if self.pending_bytes + len(data) > SPOOL_BYTES:
            self.dropped_bytes += len(data)
            return
        self.pending.append(data)
        self.pending_bytes += len(data)

    def _drain(self) -> bool:
        """Write what waited; whether all of it went (the disk has room again)."""
        waited = self.pending_bytes
        while self.pending:
            chunk = self.pending.pop(0)
            self.pending_bytes -= len(chunk)
            try:
                n = os.write(self.fd, chunk)
            except OSError as exc:
                if not is_disk_full(exc):
                    raise
                n = 0
            if n < len(chunk):
                self.pending.insert(0, chunk[n:])
                self.pending_bytes += len(chunk) - n
                return False
        if self.full:
            self.full = False
            note = (f"the disk has room again: {waited:,} bytes of {self.name} that waited were written"
                    + (f"; {self.dropped_bytes:,} bytes past the {SPOOL_BYTES >> 20} MiB that could wait were lost"
                       if self.dropped_bytes else ""))
            if self.dropped_bytes:
                self._write_all(f"[{note}]\n".encode())
            self.dropped_bytes = 0
            if self._on_room is not None:
                self._on_room(note)
        return True

    def _filled(self) -> None:
        if not self.full:
            self.full = True
            if self._on_full is not None:
                self._on_full(f"{disk_full_message(self.path.parent)}: {self.name} waits in memory "
                              f"(up to {SPOOL_BYTES >> 20} MiB) until there is room")


class Reserve:
    """Room kept on a disk for closing a record: a file of ``size`` bytes, allocated now and
    deleted by ``release`` when the closing steps (the run's status, its report) need the room
    an agent may have taken. A disk already too full to hold it holds none (``held`` is False)."""

    def __init__(self, path: Path, size: int = 4 << 20) -> None:
        self.path = Path(path)
        self.held = False
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            try:
                os.posix_fallocate(fd, 0, size)
            finally:
                os.close(fd)
            self.held = True
        except OSError:
            self.path.unlink(missing_ok=True)

    def release(self) -> None:
        if self.held:
            self.path.unlink(missing_ok=True)
            self.held = False
