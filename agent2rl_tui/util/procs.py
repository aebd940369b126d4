"""Process-tree handling for the supervisor: groups, descendants, TERM-grace-KILL, reaping.

The agent runs in its own process group. At the deadline the whole group gets SIGTERM,
then SIGKILL after a grace period. A process that left the group (``setsid``) is still a
descendant: the supervisor makes itself a child subreaper (Linux), so orphans of the agent
are re-parented to it and can be found and ended from /proc.
"""

from __future__ import annotations

import ctypes
import os
import signal
import time
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Make orphaned descendants our children rather than init's (Linux only)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _stat_fields(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, pgrp) from /proc/<pid>/stat, or None if gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    rest = raw[raw.rfind(")") + 2 :].split()
    return rest[0], int(rest[1]), int(rest[2])


def process_table() -> dict[int, tuple[str, int, int]]:
    table: dict[int, tuple[str, int, int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(int(entry))
            if fields:
                table[int(entry)] = fields
    return table


def pid_alive(pid: int | None) -> bool:
    """True if the pid exists and is not a zombie."""
    if not pid:
        return False
    if Path("/proc").is_dir():
        fields = _stat_fields(pid)
        return fields is not None and fields[0] != "Z"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def group_alive(pgid: int) -> bool:
    """True while any non-zombie process is in the group."""
    if Path("/proc").is_dir():
        return any(pg == pgid and st != "Z" for st, _, pg in process_table().values())
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def descendants(root: int, exclude: set[int] | None = None, *, other_sessions: bool = False) -> list[int]:
    """Live descendants of ``root`` (not root itself), skipping subtrees rooted in ``exclude``.

    ``other_sessions``: only those outside our own session (not the git and helper
    processes this process starts for itself).
    """
    table = process_table()
    children: dict[int, list[int]] = {}
    for pid, (_, ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    out: list[int] = []
    stack = list(children.get(root, []))
    skip = exclude or set()
    while stack:
        pid = stack.pop()
        if pid in skip:
            continue
        if table[pid][0] != "Z":
            out.append(pid)
        stack.extend(children.get(pid, []))
    if other_sessions:
        mine = os.getsid(0)
        out = [pid for pid in out if _session_of(pid) not in (mine, None)]
    return out


def _session_of(pid: int) -> int | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return int(raw[raw.rfind(")") + 2 :].split()[3])


def reap_zombie_children(keep: set[int]) -> None:
    """waitpid() orphans re-parented to us, never a child one of our own threads started.

    Only zombies from another session are reaped: the agent and the grader run in sessions
    of their own (and are in ``keep``), so their orphans are too, while the processes this
    process starts for itself (git, in the watcher thread) share its session and are left
    for their ``Popen`` to reap, which would otherwise read a failed git as exit code 0.
    """
    me = os.getpid()
    my_session = os.getsid(0)
    for pid, (state, ppid, _) in process_table().items():
        if ppid == me and state == "Z" and pid not in keep and _session_of(pid) != my_session:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass


def signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def end_group(pgid: int, grace_s: float, *, keep: set[int] = frozenset(), poll: float = 0.1) -> bool:
    """SIGTERM the group, wait up to ``grace_s`` for it to empty, then SIGKILL it.

    Returns True if SIGKILL was needed.
    """
    signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        reap_zombie_children(set(keep))
        if not group_alive(pgid):
            return False
        time.sleep(poll)
    signal_group(pgid, signal.SIGKILL)
    return True


def kill_pids(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
