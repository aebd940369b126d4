"""What shows a run in progress from outside: its heartbeat, and one log line per finished submission.

The heartbeat (``runs.heartbeat_at``, every few seconds, on a connection of its own) tells a reader a
live run from a lost one; the result lines make a foreground run (and supervisor.log) show progress.
Kept out of the supervisor's loop: each is its own small state.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from agent2rl_tui.record.progress import read_progress
from agent2rl_tui.record.store import BASELINE_ID, RunStore, SubStatus
from agent2rl_tui.util.diskfull import disk_full_message, is_disk_full

log = logging.getLogger("agent2rl.supervisor")


class ResultLog:
    """Logs each of the agent's submissions once, when it is scored or has failed."""

    def __init__(self, store: RunStore) -> None:
        self.store = store
        self.announced: set[int] = set()

    def report_new(self) -> None:
        for sub in self.store.submissions(kind="agent"):
            if sub.id in self.announced or sub.status in (SubStatus.QUEUED, SubStatus.EVALUATING):
                continue
            self.announced.add(sub.id)
            if sub.status == SubStatus.SCORED:
                log.info("submission %d scored %.2f (%s)", sub.id, sub.score, sub.model_path)
            else:
                log.info("submission %d %s: %s", sub.id, sub.status, (sub.error or "")[:200])


def heartbeat(run_dir: Path, done: threading.Event, every_s: float) -> None:
    """Beat into the run's record every ``every_s`` until ``done`` is set (a thread's target)."""
    store = RunStore.of_run(run_dir)
    failing = False
    try:
        while not done.wait(every_s):
            try:
                store.heartbeat()
            except Exception as exc:  # noqa: BLE001 - a busy db must not kill the heartbeat
                if not failing:  # once, until it beats again
                    log.warning("the heartbeat cannot be written: %s",
                                disk_full_message(run_dir) if is_disk_full(exc) else f"{type(exc).__name__}: {exc}")
                failing = True
            else:
                if failing:
                    log.info("the heartbeat is written again")
                failing = False
    finally:
        store.close()


class BaselineProgress:
    """Says how far the baseline's scoring has got (``evals/0/progress.json``), in supervisor.log and so
    in a foreground ``run start``: when it is first seen, then every ``every_s`` while it changes."""

    def __init__(self, run_dir: Path, every_s: float = 10.0) -> None:
        self.run_dir, self.every_s = run_dir, every_s
        self.last_said = 0.0
        self.last_text: str | None = None

    def tick(self) -> None:
        found = read_progress(self.run_dir, BASELINE_ID)
        if found is None:
            return
        text = found.text()
        now = time.monotonic()
        if text != self.last_text and (self.last_text is None or now - self.last_said >= self.every_s):
            log.info("scoring the baseline: %s", text)
            self.last_said, self.last_text = now, text
