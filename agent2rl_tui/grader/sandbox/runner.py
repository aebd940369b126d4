"""The sandbox runner: trusted set-up, then the untrusted program, then the verdict.

Not imported by anything that runs a program: the grader copies this file into the
sandbox's root, compiles it there, and the sandboxed interpreter runs that copy by path
(``python -I runner.pyc ARGS``; see ``agent2rl_tui.grader.sandbox`` for why a program cannot
forge its verdict, and docs/grading.md, part A). Its parameters come on the command line::

    runner FD OPTS VERDICT_LINE KEY_OPEN_LINE KEY_NAME VERDICT_EVENT TESTS_NAME [MASKED_DIR ...]

FD: the result pipe; OPTS: ``-`` or any of ``m`` (mount confinement), ``c`` (drop
capabilities), ``r`` (reaper); VERDICT_LINE and KEY_OPEN_LINE: the line numbers of this
file's two marked lines (the grader counts them); KEY_NAME: the verdict key's file name in
the program's folder; VERDICT_EVENT: the audit event of the verdict; TESTS_NAME: the file of
the task's tests, when the program has them; MASKED_DIR: the shared temp folders that get a
private tmpfs in ``m`` mode.

A program with tests (HumanEval: ``TESTS_NAME`` exists) runs in two phases. Phase one is the
program's own code (the prompt and the model's completion). Phase two runs the tests apart from
it: the hook read and compiled them before the program started and keeps them in its closure,
hands them to ``_run_tests`` only (once, in this process), refuses frames (``sys._getframe``)
to the whole program and, from then on, forks. The tests get a namespace of their own, with a copy of the
builtins taken before the program ran and the prompt's own definitions; the function under test
is wrapped so that it gets the hook's copies of the tests' arguments and every value it
returns is checked by the hook (exactly the builtin types of plain data, recursively, within a
depth and size limit) and replaced by the hook's copy. The verdict needs the tests to have run
to their end with every result plain. Everything the hook uses is captured into its closure at install
time: a program can rebind globals and builtins, not closure cells it cannot reach. Standard
library only, Python 3.11+.
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


def _setup() -> tuple[CodeType, dict[str, Any], bool]:
    if sys.version_info < (3, 11):  # noqa: UP036 - it may run on the system's Python
        raise SystemExit("the sandbox runner needs Python 3.11 or newer")
    fd, opts, vline, kline = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    key_name, event, tests_name, masked = sys.argv[5], sys.argv[6], sys.argv[7], tuple(sys.argv[8:])
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
    tests = _guard(fd, sys._getframe(1), vline, kline, key_name, event, tests_name)
    return code, ns, tests

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

def _guard(fd: int, top: FrameType, vline: int, kline: int, key_name: str, verdict: str, tests_name: str) -> bool:
    import _imp
    import _signal
    import _thread
    import gc
    import posix
    import types
    ftype, fstr, fbytes, fint, fmv, frange, flen = type, str, bytes, int, memoryview, range, len
    fbool, ffloat, fcomplex, flist, ftuple, fdict, fset, ffrozen = bool, float, complex, list, tuple, dict, set, frozenset
    NONE = ftype(None)
    Perm, Imp, OSErr, ValErr, TypeErr = PermissionError, ImportError, OSError, ValueError, TypeError
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
    # The task's tests, if any: "ENTRY\nPROMPT_CHARS\n" + prompt + tests. Read and compiled now,
    # before the program runs, and kept only here; the file is then as unreachable as the key.
    tests_path = cwd + "/" + tests_name
    try:
        s = stat(tests_path)
        TESTS_ID = (s.st_dev, s.st_ino)
    except OSErr:
        TESTS_ID = None
    PROMPT = TESTS = ENTRY = None
    if TESTS_ID is not None:
        with open(tests_path, encoding="utf-8", newline="") as fh:
            ENTRY, size, text = fh.read().split("\n", 2)
        PROMPT = compile(text[:int(size)], "<prompt>", "exec")
        TESTS = compile(text[int(size):], "<tests>", "exec")
    PROTECTED = frozenset({KEY, TESTS_ID} - {None})
    import builtins
    BUILTINS = dict(builtins.__dict__)  # as they are before the program runs: the tests' own copy
    RUN_TESTS = _run_tests.__code__
    CANDIDATE = next(c for c in RUN_TESTS.co_consts if ftype(c) is ftype(RUN_TESTS) and c.co_name == "candidate")
    Delivered = ftype("Delivered", (BaseException,), {})
    PID, getpid = posix.getpid(), posix.getpid
    audit, run = sys.audit, exec
    box: dict[None, Any] = {}
    take = box.pop
    MAX_DEPTH, MAX_VALUES = 100, 1_000_000
    phase, reader, tested, bad, own, budget = 1, None, False, False, False, 0
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
    CALL, RESULT, START_TESTS, REFS, TESTED = ("agent2rl.call", "agent2rl.result", "agent2rl.tests", "agent2rl.refs",
                                               "agent2rl.tested")
    SLOW = frozenset({"open", "import", "marshal.loads", verdict, CALL, RESULT, START_TESTS, REFS, TESTED}) | frozenset(PATHS)

    def frame(depth):
        """The caller ``depth`` frames above the one calling this (phase two refuses frames to
        everything but the hook)."""
        nonlocal own
        own = True
        try:
            return getframe(depth + 1)
        finally:
            own = False

    def plain(x, depth):
        """A fresh copy of ``x`` if it is plain data (exactly the builtin types, no subclass, no
        program code run to find out), else TypeError."""
        nonlocal budget
        budget -= 1
        if budget < 0 or depth > MAX_DEPTH:
            raise TypeErr("sandbox: a result nested over 100 levels deep or holding over 1,000,000 values")
        t = ftype(x)
        if t is fint or t is fstr or t is fbool or t is ffloat or t is NONE or t is fbytes or t is fcomplex:
            return x
        if t is flist or t is ftuple or t is fset or t is ffrozen:
            items = []
            for v in x:
                items.append(plain(v, depth + 1))
            if t is flist:
                return items
            return ftuple(items) if t is ftuple else (fset(items) if t is fset else ffrozen(items))
        if t is fdict:
            out = {}
            for k, v in x.items():
                out[plain(k, depth + 1)] = plain(v, depth + 1)
            return out
        raise TypeErr("sandbox: the function returned something that is not plain data: only None, bool, int, "
                      "float, complex, str, bytes, list, tuple, dict, set and frozenset, exactly (no subclass), "
                      "count as a result")

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
                caller = frame(2)
                if caller.f_code is not hook_code or caller.f_lineno != kline:
                    raise Perm("sandbox: the verdict key is off limits")
                return
            if (s.st_dev, s.st_ino) in PROTECTED:
                raise Perm("sandbox: the task's tests are off limits")
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
        caller = frame(2)
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
            if (s.st_dev, s.st_ino) in PROTECTED:  # e.g. renamed between the check and the open
                raise Perm("sandbox: the verdict key and the tests are off limits")

    def hook(event, args):
        nonlocal phase, reader, tested, bad, budget
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
        if event == "sys._getframe":
            # With tests, never: a frame kept from before the tests (a generator's, say) shows the
            # stack it runs on when resumed by them. ValueError: what the standard library expects.
            if TESTS is not None and not own:
                raise ValErr("sandbox: frames are not available to a program with tests")
            return
        if event == "os.fork" or event == "os.forkpty":
            if phase == 2:  # a child would run the rest of the tests: an oracle for guesses
                raise Perm("sandbox: no new processes while the tests run")
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
            elif event == CALL or event == RESULT:  # the tests' arguments in, the function's result out
                ok = False
                try:
                    if phase != 2 or frame(1).f_code is not CANDIDATE or flen(args) != (2 if event == CALL else 1):
                        raise Perm("sandbox: only the tests' wrapper calls the function")
                    budget = MAX_VALUES
                    box[None] = (plain(args[0], 0), plain(args[1], 0)) if event == CALL else plain(args[0], 0)
                    ok = True
                finally:
                    if not ok:
                        bad = True
            elif event == START_TESTS:
                if phase != 1 or TESTS is None or getpid() != PID or frame(1) is not top:
                    raise Perm("sandbox: only the runner starts the tests")
                phase = 2
            elif event == REFS:
                caller = frame(1)
                if phase != 2 or reader is not None or getpid() != PID or caller.f_code is not RUN_TESTS:
                    raise Perm("sandbox: only the runner runs the tests")
                reader = caller
                raise Delivered((audit, run, PROMPT, TESTS, ENTRY, BUILTINS, take))
            elif event == TESTED:
                if phase != 2 or reader is None or getpid() != PID or frame(1) is not reader:
                    raise Perm("sandbox: only the runner reports the tests")
                tested = True
            elif event == verdict:
                try:
                    caller = frame(1)
                except ValErr:  # raised from no Python frame at all (atexit, a C callback)
                    caller = None
                if caller is not top or caller.f_lineno != vline:
                    raise Perm("sandbox: only the runner reports a verdict")
                if TESTS is not None and (not tested or bad or getpid() != PID):
                    raise Perm("sandbox: the tests did not run to their end with plain results")
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
    return TESTS is not None


def _run_tests(ns: dict[str, Any], audit: Callable[..., None] = sys.audit,
               Base: type[BaseException] = BaseException) -> None:
    """Phase two: the task's tests against the program's function, apart from the program.

    Uses nothing but its arguments and what the hook hands this frame (once): the audit
    function, ``exec``, the compiled prompt and tests, the entry point's name, the builtins as
    they were and the hook's result box. Whatever else calls this code gets nothing from the hook.
    """
    try:
        audit("agent2rl.refs")
    except Base as delivered:
        refs = delivered.args[0]
    audit, run, prompt, tests, entry, builtins, take = refs
    env = {"__name__": "__tests__", "__builtins__": builtins}
    run(prompt, env)  # the prompt's own helpers (the tests may call them), never the program's
    fn = ns[entry]

    def candidate(*args, **kwargs):
        audit("agent2rl.call", args, kwargs)
        args, kwargs = take(None)  # the hook's copies: the function never holds the tests' own objects
        audit("agent2rl.result", fn(*args, **kwargs))
        return take(None)  # the hook's copy of the result, checked plain

    env[entry] = candidate
    run(tests, env)
    env["check"](candidate)
    audit("agent2rl.tested")

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
    _code, _ns, _tests = _setup()
    _verdict = sys.argv[6]
    del _setup, _guard, _confine, _drop_caps, _fork_reaper
    try:
        exec(_code, _ns)
        if _tests:
            sys.audit("agent2rl.tests")
            _run_tests(_ns)
    except BaseException:
        _failed()  # exits; should it return or raise instead, the exception goes on anyway:
        raise      # only a normal return of exec reaches the next line
    sys.audit(_verdict)  # <verdict>
    _exit(0)
