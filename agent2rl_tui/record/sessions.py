"""The agent CLI's own session files, kept with the run: where they are and how much they hold.

Each agent CLI runs with a home of its run's own (``agent-home/``), so the sessions it writes
(Claude Code's ``~/.claude/projects``, Codex's rollouts, Gemini CLI's chats, OpenCode's
database, OpenHands' conversations) stay in the run folder, a second account of what the agent
did beside its stream (``steps``). The supervisor records where its profile keeps them (the
``agent_home`` event's ``sessions``); this lists what is there, for the report (so the TUI's
Report pane), and reads the files for the Transcript pane (``o``), each as far as a cap. The
folder is the agent's: links are not followed, FIFOs and devices are not opened, the walk and
every read are capped.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from agent2rl_tui.record.store import RunStore

AGENT_HOME = "agent-home"
"""The agent's $HOME inside its run folder (containment makes it; the contamination check scans it)."""
MAX_ENTRIES = 20_000
MAX_SHOWN_FILES = 20
MAX_SHOWN_BYTES = 64 * 1024


@dataclass(frozen=True)
class SessionFiles:
    """The CLI's session folders (as ``agent-home/...`` paths that exist), their files and bytes."""

    folders: tuple[str, ...]
    files: int
    bytes: int
    capped: bool = False  # more entries than MAX_ENTRIES: the counts are a lower bound

    def as_json(self) -> dict[str, object]:
        return {"folders": list(self.folders), "files": self.files, "bytes": self.bytes, "capped": self.capped}


def session_folders(run_dir: Path, store: RunStore) -> list[Path]:
    """The profile's session folders (``~/...`` in the ``agent_home`` event) that are real
    folders in the run's home, reached through no link."""
    home = store.last_event_data("agent_home") or {}
    out = []
    for name in home.get("sessions") or []:
        if not isinstance(name, str) or not name.startswith("~/") or ".." in Path(name).parts:
            continue
        folder = run_dir / AGENT_HOME / name[2:]
        if _is_real_dir(run_dir / AGENT_HOME, folder):
            out.append(folder)
    return out


def session_files(run_dir: Path, store: RunStore) -> SessionFiles | None:
    """What the run's agent CLI kept of its sessions, or None when it keeps none there."""
    folders, files, size, seen = [], 0, 0, 0
    for folder in session_folders(run_dir, store):
        folders.append(str(folder.relative_to(run_dir)))
        for entry, st in _walk(folder):
            seen += 1
            if seen > MAX_ENTRIES:
                return SessionFiles(tuple(folders), files, size, capped=True)
            if stat.S_ISREG(st.st_mode):
                files += 1
                size += st.st_size
    return SessionFiles(tuple(folders), files, size) if folders else None


def _is_real_dir(home: Path, folder: Path) -> bool:
    """``folder`` is a directory reached from ``home`` through no link."""
    path = home
    for part in folder.relative_to(home).parts:
        path = path / part
        try:
            if not stat.S_ISDIR(os.lstat(path).st_mode):
                return False
        except OSError:
            return False
    return True


def _walk(folder: Path) -> Iterator[tuple[str, os.stat_result]]:
    stack = [folder]
    while stack:
        here = stack.pop()
        try:
            entries = list(os.scandir(here))
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            yield entry.path, st
            if stat.S_ISDIR(st.st_mode):
                stack.append(Path(entry.path))


@dataclass(frozen=True)
class SessionText:
    """One session file as the Transcript pane shows it: its path (``agent-home/...``), size and
    its first ``MAX_SHOWN_BYTES`` as text (``binary``: a database or other non-text file, not shown)."""

    path: str
    size: int
    text: str
    binary: bool = False
    sqlite: bool = False


def session_texts(run_dir: Path, store: RunStore, *, max_files: int = MAX_SHOWN_FILES,
                  max_bytes: int = MAX_SHOWN_BYTES) -> list[SessionText]:
    """The CLI's session files, the newest first, each read to ``max_bytes`` (never through a
    link, never blocking on a FIFO); at most ``max_files``."""
    found: list[tuple[float, str, os.stat_result]] = []
    seen = 0
    for folder in session_folders(run_dir, store):
        for entry, st in _walk(folder):
            seen += 1
            if seen > MAX_ENTRIES:
                break
            if stat.S_ISREG(st.st_mode):
                found.append((st.st_mtime, entry, st))
    out = []
    for _, entry, st in sorted(found, key=lambda f: (-f[0], f[1]))[:max_files]:
        head = _read_head(entry, max_bytes)
        if head is None:
            continue
        rel = str(Path(entry).relative_to(run_dir))
        if b"\0" in head[:4096]:
            out.append(SessionText(rel, st.st_size, "", binary=True, sqlite=head.startswith(b"SQLite format 3")))
        else:
            out.append(SessionText(rel, st.st_size, head.decode("utf-8", errors="replace")))
    return out


def _read_head(path: str, max_bytes: int) -> bytes | None:
    """A regular file's first bytes, opened without following a link or waiting on a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks, left = [], max_bytes
        while left > 0:
            chunk = os.read(fd, min(left, 65536))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)
