"""Process-tree handling for the supervisor: groups, descendants, TERM-grace-KILL, reaping.

The agent runs in its own process group. At the deadline the whole group gets SIGTERM,
then SIGKILL after a grace period. A process that left the group (``setsid``) is still a
descendant: the supervisor makes itself a child subreaper (Linux, through ``prctl``), so
orphans of the agent are re-parented to it and can be found and ended.

The process table (state and parent) comes from psutil; psutil has no process group or
session, so those come from ``os.getpgid``/``os.getsid``. Signals (``os.killpg``) and
reaping (``waitpid``) are done here too. Processes come and go while the table is read:
one that vanishes or cannot be read midway is left out, as if it had not been there.
"""

from __future__ import annotations

import ctypes
import functools
import os
import signal
import subprocess
import time
from collections.abc import Iterator, Set
from typing import Any

import psutil

PR_SET_CHILD_SUBREAPER = 36
PR_SET_PDEATHSIG = 1
ZOMBIE = psutil.STATUS_ZOMBIE
DIE_WITH_ENV = "AGENT2RL_DIE_WITH"
"""Set by a launcher to its own pid: the program it starts dies with it (``die_with_launcher``)."""


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """Get ``sig`` when the parent dies, however it dies (Linux's PR_SET_PDEATHSIG; set in the
    child after exec rather than in a ``preexec_fn``, which forces the slow fork path and is not
    thread-safe). The signal comes when the parent's *thread* that started us ends: launchers
    start such children from their main thread."""
    parent = os.getppid()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the line above
        os._exit(1)


def die_with_launcher() -> None:
    """Die with the process that started us if it asked, by putting its pid in ``DIE_WITH_ENV``
    (taken out of our environment, so our own children do not read it): a run's grader, meter and
    train-environment service end within a second of a supervisor killed with ``kill -9``,
    instead of running on, a GPU's memory held, until someone closes the record."""
    launcher = os.environ.pop(DIE_WITH_ENV, None)
    if not launcher:
        return
    if launcher != str(os.getppid()):  # it is gone already
        os._exit(1)
    die_with_parent()


def become_subreaper() -> bool:
    """Make orphaned descendants our children rather than init's (Linux only)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _processes() -> Iterator[tuple[psutil.Process, str, int]]:
    """(process, psutil status, ppid) of every process that could be read."""
    for proc in psutil.process_iter():
        try:
            fields = _status_ppid(proc)
        except psutil.NoSuchProcess:
            # gone, or a pid reused since process_iter() cached its Process: read the new one
            try:
                proc = psutil.Process(proc.pid)
                fields = _status_ppid(proc)
            except psutil.Error:
                continue
        except psutil.AccessDenied:
            continue
        yield proc, *fields


def _status_ppid(proc: psutil.Process) -> tuple[str, int]:
    with proc.oneshot():
        return proc.status(), proc.ppid()


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:  # gone (ProcessLookupError), or not ours to ask
        return None


def process_table() -> dict[int, tuple[str, int, int]]:
    """{pid: (status, ppid, pgid)} of every process; status is psutil's (``psutil.STATUS_*``)."""
    table: dict[int, tuple[str, int, int]] = {}
    for proc, status, ppid in _processes():
        pgid = _pgid(proc.pid)
        if pgid is not None:
            table[proc.pid] = status, ppid, pgid
    return table


def pid_alive(pid: int | None) -> bool:
    """True if the pid exists and is not a zombie."""
    if not pid or pid < 0:
        return False
    try:
        return psutil.Process(pid).status() != ZOMBIE
    except psutil.NoSuchProcess:  # ZombieProcess included
        return False
    except psutil.AccessDenied:
        return True


def group_alive(pgid: int) -> bool:
    """True while any non-zombie process is in the group (never for no group: None or 0)."""
    if not pgid or pgid < 0:
        return False
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:  # nothing in it, zombies included: no table to read
        return False
    except PermissionError:
        pass
    return bool(group_members(pgid))


def group_members(pgid: int) -> list[psutil.Process]:
    """The group's live (non-zombie) processes."""
    out: list[psutil.Process] = []
    if not pgid or pgid < 0:
        return out
    for proc in psutil.process_iter():
        if _pgid(proc.pid) == pgid:
            try:
                if proc.status() != ZOMBIE:
                    out.append(proc)
            except psutil.NoSuchProcess:
                pass
            except psutil.AccessDenied:
                out.append(proc)  # in the group, not ours to read: counted as live
    return out


def descendants(root: int, exclude: set[int] | None = None, *, other_sessions: bool = False) -> list[int]:
    """Live descendants of ``root`` (not root itself), skipping subtrees rooted in ``exclude``.

    ``other_sessions``: only those outside our own session (not the git and helper
    processes this process starts for itself).
    """
    status: dict[int, str] = {}
    children: dict[int, list[int]] = {}
    for proc, st, ppid in _processes():
        status[proc.pid] = st
        children.setdefault(ppid, []).append(proc.pid)
    out: list[int] = []
    stack = list(children.get(root, []))
    skip = exclude or set()
    seen = {root}
    while stack:
        pid = stack.pop()
        if pid in skip or pid in seen:  # seen: a pid reused while the table was read can make a cycle
            continue
        seen.add(pid)
        if status[pid] != ZOMBIE:
            out.append(pid)
        stack.extend(children.get(pid, []))
    if other_sessions:
        mine = os.getsid(0)
        out = [pid for pid in out if _session_of(pid) not in (mine, None)]
    return out


def _session_of(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except OSError:
        return None


def reap_zombie_children(keep: set[int]) -> None:
    """waitpid() orphans re-parented to us, never a child one of our own threads started.

    Only zombies from another session are reaped: the agent and the grader run in sessions
    of their own (and are in ``keep``), so their orphans are too, while the processes this
    process starts for itself (git, in the watcher thread) share its session and are left
    for their ``Popen`` to reap, which would otherwise read a failed git as exit code 0.
    """
    my_session = os.getsid(0)
    for proc in _children():
        pid = proc.pid
        try:
            zombie = proc.status() == ZOMBIE
        except psutil.Error:
            continue
        if zombie and pid not in keep and _session_of(pid) not in (my_session, None):
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass


def _children() -> list[psutil.Process]:
    """Our own children (called every few tenths of a second while a run lives)."""
    out: list[psutil.Process] = []
    for pid in child_pids(os.getpid()):
        try:
            out.append(psutil.Process(pid))
        except psutil.Error:  # gone (reaped by its Popen) since the list was read
            pass
    return out


@functools.cache
def _children_files() -> bool:
    """Whether this kernel lists each thread's children in /proc (``CONFIG_PROC_CHILDREN``)."""
    return os.path.exists(f"/proc/self/task/{os.getpid()}/children")


def child_pids(pid: int) -> list[int]:
    """The pids of a process's children ([] for a process that is gone).

    Read from each of its threads' ``/proc/<pid>/task/<tid>/children``: a child is listed under the
    thread that started it, an orphan re-parented to a subreaper under one of the subreaper's
    threads. That is a few small reads, where psutil's ``children()`` reads the stat file of every
    process on the machine: about 4 ms a call among 300 processes, 2% of a core for a loop that
    asks five times a second. psutil's table is read only where the kernel has no such files.
    """
    if not _children_files():
        return _child_pids_from_table(pid)
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:  # gone, or not ours to read
        return []
    pids: list[int] = []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as listing:
                pids.extend(int(child) for child in listing.read().split())
        except OSError:  # the thread (or the process) ended meanwhile
            continue
    return pids


def _child_pids_from_table(pid: int) -> list[int]:
    try:
        return [proc.pid for proc in psutil.Process(pid).children()]
    except psutil.NoSuchProcess:
        return []
    except psutil.AccessDenied:  # some process's stat unreadable: read the table one by one
        return [proc.pid for proc, _, ppid in _processes() if ppid == pid]


def tree_pids(root: int) -> list[int]:
    """``root`` and its descendants (zombies included), read down the tree from ``root``."""
    out: list[int] = []
    stack, seen = [root], set()
    while stack:
        pid = stack.pop()
        if pid in seen:  # a pid reused while the tree was read can make a cycle
            continue
        seen.add(pid)
        out.append(pid)
        stack.extend(child_pids(pid))
    return out


def signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def end_group(pgid: int, grace_s: float, *, keep: Set[int] = frozenset(), poll: float = 0.1) -> bool:
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


def stop_process(popen: subprocess.Popen[Any], grace_s: float) -> int:
    """SIGTERM a child of ours, SIGKILL it if it has not ended after ``grace_s``; its exit code."""
    if popen.poll() is None:
        popen.terminate()
        try:
            popen.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            popen.kill()
            popen.wait()
    return popen.returncode
