"""The revision watcher: watchdog events on workspace/ become coalesced git snapshots.

A burst of changes (``sed -i`` over 50 files, a training script saving a config) becomes one
revision: the watcher commits after a quiet period, and at least every ``max_delay_s`` under
continuous writes, so the final content of a long burst is never lost. Events under paths
the capture rules leave out (output/, a virtualenv, caches) do not wake it. If inotify fails
(a watch limit, say) it falls back to polling; a failed snapshot is logged as an event and
retried with back-off. Nothing here can stop the run: each snapshot has a time limit
(record/revisions.py), and stopping the watcher stops a snapshot in progress without a
commit, so the supervisor's final snapshot never waits behind it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver

from agent2rl_tui.record.revisions import SnapshotCancelled, SnapshotError, Snapshotter
from agent2rl_tui.record.store import RunStore

log = logging.getLogger("agent2rl.watcher")

# No IN_MODIFY: a checkpoint written in a million chunks must not mean a million events.
# A finished write shows up as the file being closed.
EVENT_TYPES = [FileClosedEvent, FileCreatedEvent, FileDeletedEvent, FileMovedEvent,
               DirCreatedEvent, DirDeletedEvent, DirMovedEvent]
STOP_WAIT_S = 10.0
"""How long ``stop`` waits for the watcher's thread (a snapshot in progress is told to stop)."""


class _Handler(FileSystemEventHandler):
    def __init__(self, watcher: RevisionWatcher) -> None:
        self.watcher = watcher

    def on_any_event(self, event: FileSystemEvent) -> None:
        paths = [event.src_path, getattr(event, "dest_path", "") or ""]
        if any(self.watcher.is_relevant(os.fsdecode(p)) for p in paths if p):
            self.watcher.mark_dirty()
        else:
            self.watcher.ignored_events += 1


class RevisionWatcher:
    def __init__(self, snapshotter: Snapshotter, *, quiet_s: float = 0.4, max_delay_s: float = 2.0,
                 periodic_s: float = 60.0, poll_s: float = 2.0) -> None:
        self.snap = snapshotter
        self.root = str(snapshotter.workspace)
        self.quiet_s, self.max_delay_s, self.periodic_s, self.poll_s = quiet_s, max_delay_s, periodic_s, poll_s
        self.cond = threading.Condition()
        self.first_dirty: float | None = None
        self.last_event = 0.0
        self.stopping = False
        self.cancel = threading.Event()  # set by stop(): a snapshot in progress stops, uncommitted
        self.polling = False
        self.observer: BaseObserver | None = None  # Observer is the platform's class, a variable
        self.thread: threading.Thread | None = None
        self.ignored_events = 0
        self.snapshots_taken = 0
        self.failures = 0
        self._venv_dirs: set[str] = set()

    # -- events -----------------------------------------------------------------------
    def is_relevant(self, path: str) -> bool:
        rel = os.path.relpath(path, self.root)
        if rel.startswith("..") or rel == ".":
            return False
        rel = rel.replace(os.sep, "/")
        if self.snap.rules.path_reason(rel):
            return False
        return not self._inside_virtualenv(os.path.dirname(path))

    def _inside_virtualenv(self, directory: str) -> bool:
        d = directory
        while len(d) > len(self.root):
            if d in self._venv_dirs:
                return True
            if os.path.exists(os.path.join(d, "pyvenv.cfg")) or os.path.isdir(os.path.join(d, "conda-meta")):
                self._venv_dirs.add(d)
                return True
            d = os.path.dirname(d)
        return False

    def mark_dirty(self) -> None:
        with self.cond:
            t = time.monotonic()
            if self.first_dirty is None:
                self.first_dirty = t
            self.last_event = t
            self.cond.notify()

    # -- lifecycle --------------------------------------------------------------------
    def start(self) -> None:
        try:
            self.observer = Observer()
            self.observer.schedule(_Handler(self), self.root, recursive=True, event_filter=EVENT_TYPES)
            self.observer.start()
        except OSError as exc:
            self._fall_back_to_polling(f"could not watch the workspace ({exc})")
        self.thread = threading.Thread(target=self._loop, name="revision-watcher", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """Stop watching (a snapshot in progress stops uncommitted); calling it again does nothing."""
        with self.cond:
            self.stopping = True
            self.cancel.set()
            self.cond.notify()
        if self.thread:
            self.thread.join(timeout=STOP_WAIT_S)
            if self.thread.is_alive():
                log.warning("the revision watcher did not stop within %.0f s; going on without it", STOP_WAIT_S)
        if self.observer:
            try:
                self.observer.stop()
                self.observer.join(timeout=10)
            except RuntimeError:
                pass

    def _fall_back_to_polling(self, why: str) -> None:
        if self.polling:
            return
        self.polling = True
        log.warning("%s; polling every %.0f s instead", why, self.poll_s)
        self._event("watch_failed", f"{why}; polling the workspace every {self.poll_s:g} s instead")

    def _event(self, kind: str, message: str) -> None:
        try:
            with RunStore.of_run(self.snap.run_dir) as store:
                store.event("watcher", kind, message)
        except Exception:  # noqa: BLE001 - the record is best effort here; the log has it
            log.exception("could not record watcher event %s", kind)

    # -- the loop ---------------------------------------------------------------------
    def _due_in(self, t: float) -> float | None:
        """Seconds until a snapshot is due (<= 0: now), or None if nothing is pending."""
        if self.first_dirty is None:
            return None
        return min(self.last_event + self.quiet_s, self.first_dirty + self.max_delay_s) - t

    def _loop(self) -> None:
        last_snapshot = time.monotonic()
        backoff = 0.0
        while True:
            with self.cond:
                while not self.stopping:
                    t = time.monotonic()
                    if self.observer is not None and not self.polling and not self.observer.is_alive():
                        self._fall_back_to_polling("the file watcher stopped")
                    if self.polling and t - last_snapshot >= self.poll_s:
                        self.first_dirty = self.first_dirty or t
                        break
                    due = self._due_in(t)
                    if due is not None and due <= 0 and t >= last_snapshot + backoff:
                        break
                    if t - last_snapshot >= self.periodic_s:  # safety net for missed events
                        self.first_dirty = self.first_dirty or t
                        break
                    waits = [self.periodic_s - (t - last_snapshot), 1.0]
                    if due is not None:
                        waits.append(max(due, last_snapshot + backoff - t))
                    if self.polling:
                        waits.append(self.poll_s - (t - last_snapshot))
                    self.cond.wait(timeout=max(0.01, min(waits)))
                if self.stopping:
                    return
                self.first_dirty = None
            try:
                self.snap.snapshot("watch", cancel=self.cancel)
                self.snapshots_taken += 1
                backoff = 0.0
            except SnapshotCancelled:
                return
            except Exception as exc:  # noqa: BLE001 - SnapshotError, or a bug: the watcher must live on
                self.failures += 1
                backoff = min(30.0, max(1.0, backoff * 2))
                log.warning("snapshot failed (retrying in %.0f s): %s", backoff, exc)
                self._event("snapshot_failed", f"snapshot failed, retrying in {backoff:.0f} s: {exc}")
                self.mark_dirty()
            last_snapshot = time.monotonic()


def watch_workspace(run_dir: Path, **kw: float) -> RevisionWatcher:
    watcher = RevisionWatcher(Snapshotter(run_dir), **kw)
    watcher.start()
    return watcher


def take_snapshot(snapshotter: Snapshotter, store: RunStore, trigger: str) -> None:
    """One snapshot outside the watcher's loop (the run's ``start`` and ``final``); a failure is an event, never fatal."""
    try:
        rev, new = snapshotter.snapshot(trigger)
        if new:
            log.info("revision %d (%s): %d file(s) changed", rev.seq, trigger, rev.files_changed)
    except SnapshotError as exc:
        log.warning("%s snapshot failed: %s", trigger, exc)
        store.event("supervisor", "snapshot_failed", f"{trigger} snapshot failed: {exc}")
