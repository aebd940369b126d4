"""The run's secrets kept out of its record: each replaced, wherever it would be written.

A run folder is made to be handed to others, and what the agent prints, writes in ``code/`` or
leaves in its home is hostile: it may print its key, copy a login file into its code, or echo
the grader's URL. Every secret the run knows (the driver, judge and search keys, the tokens of
the CLI's login files, the grader's, the train-environment service's and the meter's own) is
given to one `Redactor`, which the writers call before they write (the agent's output, the
revisions' blobs, the supervisor's log); once the run's processes have ended, what the others
wrote (run.db, the logs, the evaluations, the workspace and the agent's home the run folder
keeps) is swept with it in place (`redact_tree`, `redact_db`). The count of redactions goes
into the record and the report.

A secret is replaced by a mask of its own length (``[REDACTED--…]``), so a file's size and
every offset in it stay as they were (a binary file stays readable by its reader). Values
shorter than ``MIN_SECRET`` are not secrets worth the false hits (``1234``, ``true``).
"""

from __future__ import annotations

import logging
import os
import re
import sqlite3
import stat
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import AnyStr

MIN_SECRET = 8
FILE_CAP = 64 << 20
"""Files larger than this are not swept (a model's weights); what they hold is the agent's."""
MAX_ENTRIES = 200_000
"""The most entries one sweep looks at."""
SCAN_FIRST = 64 << 10
"""Values at least this long are searched for each secret before the pattern runs: a plain search
is about 7 times faster on a 1 MiB line that holds none (the common case), slower on short ones."""


def mask(length: int) -> str:
    """A mask as long as the secret it replaces."""
    if length < 10:
        return "*" * length
    return "[REDACTED" + "-" * (length - 10) + "]"


class Redactor:
    """Replaces each of a run's secrets in text and bytes, counting what it replaced."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._lock = threading.Lock()
        self._secrets: set[str] = set()
        self._text: re.Pattern[str] | None = None
        self._bytes: re.Pattern[bytes] | None = None
        self._masks: dict[str, str] = {}
        self._masks_b: dict[bytes, bytes] = {}
        self.count = 0
        self.add(*secrets)

    def add(self, *secrets: str | None) -> None:
        """More secrets (a service started, a token made); short or empty ones are left out."""
        fresh = {s for s in secrets if s and len(s) >= MIN_SECRET} - self._secrets
        if not fresh:
            return
        with self._lock:
            self._secrets |= fresh
            ordered = sorted(self._secrets, key=len, reverse=True)  # the longest first: a key inside a key
            self._text = re.compile("|".join(re.escape(s) for s in ordered))
            self._bytes = re.compile(b"|".join(re.escape(s.encode()) for s in ordered))
            self._masks = {s: mask(len(s)) for s in ordered}
            self._masks_b = {s.encode(): mask(len(s.encode())).encode() for s in ordered}

    @property
    def secrets(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(sorted(self._secrets, key=len, reverse=True))

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def text(self, value: str) -> str:
        return self._replace(self._text, self._masks, value)

    def data(self, value: bytes) -> bytes:
        return self._replace(self._bytes, self._masks_b, value)

    def _replace(self, pattern: re.Pattern[AnyStr] | None, masks: dict[AnyStr, AnyStr], value: AnyStr) -> AnyStr:
        if pattern is None or (len(value) >= SCAN_FIRST and not any(s in value for s in masks)):
            return value
        out, n = pattern.subn(lambda m: masks[m.group(0)], value)
        if n:
            self._counted(n)
        return out

    def _counted(self, n: int) -> None:
        with self._lock:
            self.count += n


@dataclass
class Swept:
    """What a sweep did: files looked at, files changed, secrets replaced, files too large to read."""

    files: int = 0
    changed: int = 0
    redactions: int = 0
    too_large: int = 0


def redact_file(path: Path, redactor: Redactor) -> int:
    """Replace the secrets in one regular file in place (never through a link); how many."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return 0
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > FILE_CAP:
            return 0
        data = b""
        while len(data) < info.st_size:
            piece = os.pread(fd, info.st_size - len(data), len(data))
            if not piece:
                break
            data += piece
        before = redactor.count
        out = redactor.data(data)
        n = redactor.count - before
        if n:
            os.pwrite(fd, out, 0)  # the same length: the masks are as long as the secrets
        return n
    finally:
        os.close(fd)


def redact_tree(root: Path, redactor: Redactor, skip: Iterable[str] = ()) -> Swept:
    """Every regular file under ``root`` swept in place but the entries of ``root`` named in ``skip``
    (at the top only: a folder of the agent's may take any name); links are never followed."""
    swept = Swept()
    skip = frozenset(skip)
    if not redactor or not root.is_dir() or root.is_symlink():
        return swept
    seen = 0
    stack = [root]
    while stack and seen < MAX_ENTRIES:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            seen += 1
            if folder is root and entry.name in skip:
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(Path(entry.path))
                    continue
                if not entry.is_file(follow_symlinks=False):
                    continue
                if entry.stat(follow_symlinks=False).st_size > FILE_CAP:
                    swept.too_large += 1
                    continue
            except OSError:
                continue
            swept.files += 1
            n = redact_file(Path(entry.path), redactor)
            if n:
                swept.changed += 1
                swept.redactions += n
    return swept


def redact_db(db: Path, redactor: Redactor) -> int:
    """Every text value of every table in ``db`` with the secrets replaced (one pass over each
    table); the freed pages zeroed (``secure_delete``) and the write-ahead log emptied, so the old
    values are gone from the file too. How many rows changed."""
    secrets = redactor.secrets
    if not secrets or not db.is_file():
        return 0
    changed = 0
    conn = sqlite3.connect(db, timeout=30)
    try:
        conn.execute("PRAGMA secure_delete=ON")
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                             "AND name NOT LIKE 'sqlite_%'")]
        with conn:
            for table in tables:
                columns = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')
                           if not str(r[2]).upper().startswith(("INT", "REAL", "FLOAT", "DOUBLE", "NUM", "BOOL"))]
                if columns:
                    changed += _redact_table(conn, table, columns, secrets)
        if changed:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return changed


def _redact_table(conn: sqlite3.Connection, table: str, columns: list[str], secrets: tuple[str, ...]) -> int:
    """One UPDATE over ``table``: each text value of ``columns`` with every secret replaced."""
    params: list[str] = []
    sets = []
    for column in columns:
        expr = f'"{column}"'
        for secret in secrets:
            expr = f"replace({expr}, ?, ?)"
            params += [secret, mask(len(secret))]
        sets.append(f'"{column}" = CASE WHEN typeof("{column}") = \'text\' THEN {expr} ELSE "{column}" END')
    found = " OR ".join(f'instr("{column}", ?) > 0' for column in columns for _ in secrets)
    params += [secret for _ in columns for secret in secrets]
    cur = conn.execute(f'UPDATE "{table}" SET {", ".join(sets)} WHERE {found}', params)
    return cur.rowcount


class RedactingFilter(logging.Filter):
    """A log handler's filter that writes each record, and its traceback, with the secrets replaced."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.redactor:
            return True
        record.msg, record.args = self.redactor.text(record.getMessage()), None
        if record.exc_info and not record.exc_text:
            record.exc_text = self.redactor.text(logging.Formatter().formatException(record.exc_info))
        return True


def redact_logging(redactor: Redactor, logger: logging.Logger | None = None) -> None:
    """Every handler of ``logger`` (the root's by default) writes through ``redactor``."""
    for handler in (logger or logging.getLogger()).handlers:
        handler.addFilter(RedactingFilter(redactor))
