"""The sandbox's OS layers: trusted set-up the runner does before its hook and the program.

Not imported by anything that runs a program: like runner.py, the grader copies this file into
the sandbox's root and compiles it there for each interpreter; the runner loads that compiled
copy by path (``marshal``, before its audit hook is installed, so before any code of the
program exists), calls ``apply`` once and drops every reference to it. Nothing here takes part
in the hook or the verdict. Standard library only, Python 3.11+.

``apply(opts, fd, uid, masked, hidden, keep)``, by the letters of ``opts``:

- ``m``: mounts in the program's own mount namespace (``full``: as real root, before the uid is
  dropped; ``userns``: as root of its user namespace). A private tmpfs over each ``masked``
  folder (the shared temp folders: writable, 16 MB) and an empty one over each ``hidden``
  folder (the eval data, the run folder, the runs root, the home folder, the sandbox's root:
  see ``agent2rl_tui.grader.sandbox``); a hidden *file* gets /dev/null bound over it. What must
  stay reachable (``keep``: the program's folder, the interpreter's folders) is opened before
  anything covers it and bound back where a mount covered it, so the deepest of a hidden and a
  kept folder wins (a venv under the home folder keeps working; a data folder inside
  site-packages is still hidden).
- ``w`` (with ``m``, ``userns``): first the whole file system read-only (recursively,
  ``mount_setattr``); at the end only the program's folder writable again (noexec).
- ``u`` (``full``): switch to the unprivileged ``uid`` (its own gid, no groups), with no new
  privileges and no capabilities, bounding set included.
- ``c`` (``userns``): no new privileges, no capabilities.
- ``r`` (``rlimits``): the reaper: this process stays trusted as a subreaper and the program
  runs in a child; when the child ends (or on SIGTERM from the grader) everything left below
  us is killed.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # not typing's: nothing is imported that is not needed
if TYPE_CHECKING:
    from collections.abc import Callable

    Libc = Callable[..., int]

RDONLY, NOSUID, NODEV, NOEXEC, AT_RECURSIVE, MS_BIND, MS_REC = 1, 2, 4, 8, 0x8000, 4096, 16384


def apply(opts: str, fd: int, uid: int | None, masked: tuple[str, ...], hidden: tuple[str, ...],
          keep: tuple[str, ...]) -> None:
    import _ctypes
    # dlopen(NULL): the program itself, which typeshed's path-only signature does not allow.
    handle = _ctypes.dlopen(None, os.RTLD_NOW)  # type: ignore[arg-type]

    def libc(name, *args):
        return _ctypes.call_function(_ctypes.dlsym(handle, name), args)
    try:
        if "m" in opts:
            _mount(libc, masked, hidden, keep, "w" in opts)
        if "u" in opts:
            assert uid is not None
            _switch_user(libc, uid)
        elif "c" in opts:
            _drop_caps(libc)
        if "r" in opts:
            _fork_reaper(libc, fd)
    finally:
        del sys.modules["_ctypes"]  # what is left of it, the hook refuses


def _check(ret: int, what: str) -> None:
    if ret != 0:
        raise OSError(what + " failed")


def _mount(libc: Libc, masked: tuple[str, ...], hidden: tuple[str, ...], keep: tuple[str, ...],
           readonly: bool) -> None:
    import struct

    def setattr_(path, set_, clr, flags):  # mount_setattr(2), struct mount_attr
        _check(libc("syscall", 442, -100, path.encode(), flags, struct.pack("4Q", set_, clr, 0, 0), 32),
               "mount_setattr " + path)

    def tmpfs(path, options):
        _check(libc("mount", b"tmpfs", path.encode(), b"tmpfs", NOSUID | NODEV | NOEXEC, options), "mount " + path)

    def same(path, s):
        try:
            t = os.stat(path)
        except OSError:
            return False
        return (t.st_dev, t.st_ino) == (s.st_dev, s.st_ino)

    work = os.getcwd()
    fds: dict[str, int] = {}  # what stays reachable, held open before anything covers it
    for k in (work, *keep):
        k = os.path.realpath(k)
        if k not in fds:
            try:
                fds[k] = os.open(k, os.O_PATH | os.O_DIRECTORY)
            except OSError:
                pass
    files = []
    for h in hidden:
        try:
            s = os.stat(h)
        except OSError:
            continue
        if (s.st_mode & 0o170000) == 0o100000:
            files.append((h, s))
    if readonly:
        setattr_("/", RDONLY | NOSUID, 0, AT_RECURSIVE)  # not nodev: /dev/null stays usable
    plan = sorted([(p.count("/"), 0, p, b"size=16m,mode=1777") for p in masked]
                  + [(p.count("/"), 0, p, b"size=64k,mode=755") for p in hidden if p not in fds]
                  + [(k.count("/"), 1, k, None) for k in fds])
    bound = set()
    for _, _, path, options in plan:  # outermost first: a kept folder comes back after what covers it
        if options is not None:
            if os.path.isdir(path):  # else covered already, by a tmpfs further out
                tmpfs(path, options)
            continue
        held = os.fstat(fds[path])
        if not same(path, held):
            os.makedirs(path, exist_ok=True)
            _check(libc("mount", f"/proc/self/fd/{fds[path]}".encode(), path.encode(), None, MS_BIND | MS_REC, None),
                   "bind " + path)
            bound.add(path)
    for path, s in files:
        if same(path, s):
            _check(libc("mount", b"/dev/null", path.encode(), None, MS_BIND, None), "hide " + path)
    here = os.path.realpath(work)
    if readonly:
        if here not in bound:  # its own mount, so that it alone can be made writable again
            _check(libc("mount", f"/proc/self/fd/{fds[here]}".encode(), here.encode(), None, MS_BIND, None),
                   "bind " + here)
        setattr_(here, NOSUID | NODEV | NOEXEC, RDONLY, 0)
    for f in fds.values():
        os.close(f)
    os.chdir(work)


def _drop_bounding(libc: Libc) -> None:
    _check(libc("prctl", 38, 1, 0, 0, 0), "no_new_privs")  # PR_SET_NO_NEW_PRIVS
    for cap in range(64):
        if libc("prctl", 24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP, until EINVAL past the last cap
            break


def _capset_none(libc: Libc) -> None:
    _check(libc("capset", (0x20080522).to_bytes(4, sys.byteorder) + bytes(4), bytes(24)), "capset")


def _drop_caps(libc: Libc) -> None:
    _drop_bounding(libc)
    _capset_none(libc)


def _switch_user(libc: Libc, uid: int) -> None:
    """full: from root to ``uid`` for good (the bounding set needs root's CAP_SETPCAP, so first)."""
    _drop_bounding(libc)
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (uid, uid, uid) or os.getgroups():
        raise OSError("switching to the sandbox's uid failed")
    _capset_none(libc)


def _fork_reaper(libc: Libc, fd: int) -> None:
    """rlimits: this process becomes a subreaper and stays trusted; the program runs in a child.
    When the child ends (or SIGTERM from the grader), everything left below us is killed."""
    import _signal
    import time
    _check(libc("prctl", 36, 1, 0, 0, 0), "child_subreaper")  # PR_SET_CHILD_SUBREAPER

    class Stop(BaseException):
        pass

    def stop(signum, frame):
        raise Stop
    _signal.signal(15, stop)
    child = os.fork()
    if child == 0:
        _signal.signal(15, _signal.SIG_DFL)
        return
    os.close(fd)
    code = 1
    try:
        code = os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])
    except Stop:
        code = 124
    finally:
        _signal.signal(15, _signal.SIG_IGN)
        me = os.getpid()
        while True:
            for pid in _children(me):
                try:
                    os.kill(pid, 9)
                except OSError:
                    pass
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                time.sleep(0.001)
        os._exit(code if code >= 0 else 128 - code)


def _children(me: int) -> list[int]:
    try:
        out = []
        for tid in os.listdir(f"/proc/{me}/task"):
            with open(f"/proc/{me}/task/{tid}/children") as fh:
                out += [int(x) for x in fh.read().split()]
        return out
    except OSError:  # no CONFIG_PROC_CHILDREN: scan
        out = []
        for entry in os.listdir("/proc"):
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    if entry.isdigit() and int(fh.read().rsplit(")", 1)[1].split()[1]) == me:
                        out.append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
        return out
