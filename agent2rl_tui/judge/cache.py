"""The judgement cache: a judge is asked about a pair once, whoever submits it again.

Keyed by the instruction, both outputs in the order shown, the judge model and the prompt
version (mode and template hash); the judge's URL is not part of the key (the same model
behind another URL judges the same). Only judgements that parsed are kept, so an item that
failed is asked again next time. One SQLite file per task's data cache, shared by its runs
(WAL, so concurrent graders wait rather than fail).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path

from agent2rl_tui.util.timeutil import iso, now


def cache_key(instruction: str, output_1: str, output_2: str, judge_model: str, version: str) -> str:
    blob = json.dumps([instruction, output_1, output_2, judge_model, version], ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class JudgementCache:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, timeout=30, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS judgements (key TEXT PRIMARY KEY, raw TEXT NOT NULL, "
                         "preference REAL NOT NULL, judge_model TEXT, version TEXT, created_at TEXT)")

    def get(self, key: str) -> tuple[str, float] | None:
        with self._lock:
            row = self._db.execute("SELECT raw, preference FROM judgements WHERE key = ?", (key,)).fetchone()
        return (row[0], float(row[1])) if row else None

    def put(self, key: str, raw: str, preference: float, judge_model: str, version: str) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO judgements VALUES (?, ?, ?, ?, ?, ?)",
                             (key, raw, preference, judge_model, version, iso(now())))

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM judgements").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()
