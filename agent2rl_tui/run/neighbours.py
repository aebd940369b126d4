"""Other runs on this machine at the same time: found, said, and noted in both records.

Two runs on one box share its CPU cores, and any GPU both were given: each one's wall-clock
budget then buys less (a second run beside a first took its wall time from 59 s to 2 min 23 s),
and nothing said so. A run that starts looks for the runs active under every root runs were made
under on this machine (``record.root.known_roots``); for each, it says what they share (the CPU
cores always; the GPUs both were given, or every GPU where either was given none), and the
``overlap`` event goes into both records, so both reports list it among their warnings.

Only folders whose run.db changed in the last minutes are opened (an active run's heartbeat
writes it every few seconds), so a root of thousands of finished runs costs a directory scan.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from agent2rl_tui.record.root import known_roots
from agent2rl_tui.record.store import ACTIVE_STATUSES, RunStore
from agent2rl_tui.util import procs

RECENT_S = 180.0
"""A run.db untouched for longer is not an active run's."""


@dataclass(frozen=True)
class Neighbour:
    """An active run beside ours, and what the two share."""

    run_dir: Path
    gpus: str | None  # what it was given (``--gpus``), None: every GPU the machine shows
    shared: str  # "the CPU cores", "the CPU cores and GPU 0", ...

    def as_json(self) -> dict[str, str | None]:
        return {"run": self.run_dir.name, "folder": str(self.run_dir), "gpus": self.gpus, "shares": self.shared}


def shared_resources(mine: str | None, theirs: str | None) -> str:
    """What two runs with these ``--gpus`` share: the CPU cores always, and their common GPUs."""
    if mine is None or theirs is None:
        return "the CPU cores and every GPU (one of them was given no --gpus)"
    common = sorted(set(mine.split(",")) & set(theirs.split(",")), key=lambda g: (len(g), g))
    return "the CPU cores" + (f" and GPU {','.join(common)}" if common else "")


def _active(run_db: Path) -> tuple[bool, str | None]:
    """Whether a run.db is an active run's (status, a live supervisor), and its ``--gpus``."""
    try:
        with sqlite3.connect(f"file:{run_db}?mode=ro", uri=True, timeout=2.0) as db:
            row = db.execute("SELECT status, supervisor_pid, config_json FROM run LIMIT 1").fetchone()
    except sqlite3.Error:
        return False, None
    if row is None or row[0] not in ACTIVE_STATUSES or not procs.pid_alive(row[1]):
        return False, None
    try:
        gpus = json.loads(row[2] or "{}").get("gpus")
    except ValueError:
        gpus = None
    return True, str(gpus) if gpus else None


def active_neighbours(run_dir: Path, gpus: str | None) -> list[Neighbour]:
    """The runs active on this machine besides ``run_dir``, with what each shares with it."""
    here = run_dir.resolve()
    found: list[Neighbour] = []
    horizon = time.time() - RECENT_S
    for root in known_roots():
        for run_db in root.glob("*/run.db"):
            folder = run_db.parent.resolve()
            if folder == here:
                continue
            try:
                touched = max(p.stat().st_mtime for p in (run_db, run_db.with_name("run.db-wal")) if p.exists())
            except (OSError, ValueError):
                continue
            if touched < horizon:
                continue
            active, theirs = _active(run_db)
            if active:
                found.append(Neighbour(folder, theirs, shared_resources(gpus, theirs)))
    return found


def note_overlap(run_dir: Path, store: RunStore, neighbours: list[Neighbour]) -> str | None:
    """The ``overlap`` event in this run's record and in each neighbour's; the line to say, or None."""
    if not neighbours:
        return None
    names = "; ".join(f"{n.run_dir.name} ({n.shared})" for n in neighbours)
    line = (f"{len(neighbours)} other run(s) active on this machine: {names}: each run's wall-clock budget buys "
            "less while they overlap")
    store.event("supervisor", "overlap", line, {"neighbours": [n.as_json() for n in neighbours]})
    for n in neighbours:
        try:
            with RunStore.of_run(n.run_dir) as theirs:
                theirs.event("supervisor", "overlap", f"run {run_dir.name} started beside this one, sharing {n.shared}",
                             {"neighbours": [{"run": run_dir.name, "folder": str(run_dir), "shares": n.shared}]})
        except Exception:  # noqa: BLE001 - their record's trouble is not ours to fail on
            continue
    return line


def announce(run_dir: Path, store: RunStore, gpus: str | None) -> str | None:
    """``note_overlap`` of the neighbours found now; never raises (a scan's trouble is not a run's)."""
    try:
        return note_overlap(run_dir, store, active_neighbours(run_dir, gpus))
    except Exception:  # noqa: BLE001
        return None
