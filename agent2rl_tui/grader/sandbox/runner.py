"""The sandbox runner: trusted set-up, then the untrusted program, then the verdict.

Not imported by anything that runs a program: the grader copies this file into the
sandbox's root, compiles it there, and the sandboxed interpreter runs that copy by path
(``python -I runner.pyc ARGS``; see ``agent2rl_tui.grader.sandbox`` for why a program cannot
forge its verdict, and docs/grading.md, part A). Its parameters come on the command line::

    runner FD OPTS VERDICT_LINE KEY_OPEN_LINE KEY_NAME VERDICT_EVENT [MASKED_DIR ...]

FD: the result pipe; OPTS: ``-`` or any of ``m`` (mount confinement), ``c`` (drop
capabilities), ``r`` (reaper); VERDICT_LINE and KEY_OPEN_LINE: the line numbers of this
file's two marked lines (the grader counts them); KEY_NAME: the verdict key's file name in
the program's folder; VERDICT_EVENT: the audit event of the verdict; MASKED_DIR: the shared
temp folders that get a private tmpfs in ``m`` mode.

Everything the hook uses is captured into its closure at install time: a program can rebind
globals and builtins, not closure cells it cannot reach. Standard library only, Python 3.11+.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # not typing's: the runner imports nothing it does not need
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import CodeType, FrameType
    from typing import Any, NoReturn

    Libc = Callable[..., int]


def _setup() -> tuple[CodeType, dict[str, Any]]:
    if sys.version_info < (3, 11):  # noqa: UP036 - it may run on the system's Python
        raise SystemExit("the sandbox runner needs Python 3.11 or newer")
    fd, opts, vline, kline = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    key_name, event, masked = sys.argv[5], sys.argv[6], tuple(sys.argv[7:])
    os.set_inheritable(fd, False)
    sys.dont_write_bytecode = True
    if opts != "-":
        import _ctypes
        handle = _ctypes.dlopen(None, os.RTLD_NOW)
        def libc(name, *args):
            return _ctypes.call_function(_ctypes.dlsym(handle, name), args)
        if "m" in opts:
            _confine(libc, masked)
        if "m" in opts or "c" in opts:
            _drop_caps(libc)
        if "r" in opts:
            _fork_reaper(libc, fd)
        del sys.modules["_ctypes"], _ctypes, handle, libc  # what is left of it, the hook refuses
    with open("prog.py", encoding="utf-8") as fh:
        code = compile(fh.read(), "prog.py", "exec")
    ns = {"__name__": "__sandbox__", "__builtins__": __builtins__}
    _guard(fd, sys._getframe(1), vline, kline, key_name, event)
    return code, ns

def _check(ret: int, what: str) -> None:
    if ret != 0:
        raise OSError(what + " failed")

def _confine(libc: Libc, masked: tuple[str, ...]) -> None:
    """userns: all mounts read-only, private tmpfs over the shared temp dirs, this folder writable."""
    import struct
    def setattr_(path, set_, clr, flags):  # mount_setattr(2), struct mount_attr
        _check(libc("syscall", 442, -100, path.encode(), flags, struct.pack("4Q", set_, clr, 0, 0), 32),
               "mount_setattr " + path)
    RDONLY, NOSUID, NODEV, NOEXEC, AT_RECURSIVE, MS_BIND = 1, 2, 4, 8, 0x8000, 4096
    work = os.getcwd()
    here = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
    setattr_("/", RDONLY | NOSUID, 0, AT_RECURSIVE)  # not nodev: /dev/null stays usable
    for d in masked:
        if os.path.isdir(d):
            _check(libc("mount", b"tmpfs", d.encode(), b"tmpfs", NOSUID | NODEV | NOEXEC, b"size=16m,mode=1777"),
                   "mount " + d)
    os.makedirs(work, exist_ok=True)  # its folder may be under a masked dir: bring it back
    _check(libc("mount", f"/proc/self/fd/{here}".encode(), work.encode(), None, MS_BIND, None), "bind " + work)
    os.close(here)
    setattr_(work, NOSUID | NODEV | NOEXEC, RDONLY, 0)
    os.chdir(work)

def _drop_caps(libc: Libc) -> None:
    _check(libc("prctl", 38, 1, 0, 0, 0), "no_new_privs")  # PR_SET_NO_NEW_PRIVS
    for cap in range(64):
        if libc("prctl", 24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP, until EINVAL past the last cap
            break
    _check(libc("capset", (0x20080522).to_bytes(4, sys.byteorder) + bytes(4), bytes(24)), "capset")

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

def _guard(fd: int, top: FrameType, vline: int, kline: int, key_name: str, verdict: str) -> None:
    import _imp
    import _signal
    import _thread
    import gc
    import posix
    import types
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
    key_path = cwd + "/" + key_name
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
    SLOW = frozenset({"open", "import", "marshal.loads", verdict}) | frozenset(PATHS)

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
            elif event == verdict:
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

def _exit(code: int, flush: tuple[Callable[[], None], ...] = (sys.stdout.flush, sys.stderr.flush),
          _exit: Callable[[int], NoReturn] = os._exit) -> NoReturn:
    """Leave without finalizing the interpreter (it costs milliseconds, more after a fork)."""
    for f in flush:
        try:
            f()
        except BaseException:
            pass
    _exit(code)

def _failed(hook: Callable[..., Any] = sys.__excepthook__, exc_info: Callable[..., Any] = sys.exc_info,
            isinstance: Callable[..., bool] = isinstance, int: type = int) -> NoReturn:
    kind, err, tb = exc_info()
    if isinstance(err, SystemExit):
        code = err.code
        if code is not None and not isinstance(code, int):
            sys.stderr.write(str(code) + "\n")
            code = 1
        _exit((code or 0) & 0xFF)
    hook(kind, err, tb)
    _exit(1)

if __name__ == "__main__":
    _code, _ns = _setup()
    _verdict = sys.argv[6]
    del _setup, _guard, _confine, _drop_caps, _fork_reaper
    try:
        exec(_code, _ns)
    except BaseException:
        _failed()  # exits; should it return or raise instead, the exception goes on anyway:
        raise      # only a normal return of exec reaches the next line
    sys.audit(_verdict)  # <verdict>
    _exit(0)
