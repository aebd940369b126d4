"""The sandbox's audit hook: what a program may do, its results as plain data, and its verdict.

Not imported by anything that runs a program: like runner.py, the grader copies this file into
the sandbox's root and compiles it there; the runner loads that compiled copy by path
(``marshal``) before the program's code exists, calls ``install`` once, and drops every
reference to it. Why a program cannot forge its verdict: ``agent2rl_tui.grader.sandbox``; how
the tests run apart from it: runner.py. The line marked ``<key-open>`` is the only place the
verdict key is opened; the grader counts its line number.

Everything the hook uses is captured into its closure when ``install`` runs (the builtins, the
module functions, the frames it compares with): a program can rebind globals and builtins, not
closure cells it cannot reach, and no function below reads a global
(``test_the_hook_uses_no_globals``). Standard library only, Python 3.11+.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # not typing's: nothing is imported that is not needed
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FrameType
    from typing import Any


def install(fd: int, top: FrameType, vline: int, kline: int, key_name: str, verdict: str, tests_name: str,
            hidden: tuple[str, ...], keep: tuple[str, ...], run_tests: Callable[..., None]) -> bool:
    """Install the hook for the program about to run in frame ``top``'s process; True if it has tests."""
    import _imp
    import _signal
    import _thread
    import gc
    import posix
    import types
    ftype, fstr, fbytes, fint, fmv, frange, flen, fissub = type, str, bytes, int, memoryview, range, len, issubclass
    fbool, ffloat, fcomplex, flist, ftuple, fdict, fset, ffrozen = bool, float, complex, list, tuple, dict, set, frozenset
    NONE = ftype(None)
    Perm, Imp, OSErr, ValErr, TypeErr = PermissionError, ImportError, OSError, ValueError, TypeError
    stat, lstat, fstat, readlink = posix.stat, posix.lstat, posix.fstat, posix.readlink
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
    # What the program may not read (folders and files) and the folders it keeps (its own, the
    # interpreter's), by device and inode: under a mount namespace a hidden folder is its tmpfs.
    hidden_dirs, hidden_files, kept = set(), set(), set()
    for p in hidden:
        try:
            s = stat(p)
        except OSError:
            continue
        fmt = s.st_mode & IFMT
        if fmt == IFDIR:
            hidden_dirs.add((s.st_dev, s.st_ino))
        elif fmt != IFCHR:  # a file with /dev/null bound over it is /dev/null
            hidden_files.add((s.st_dev, s.st_ino))
    for p in (cwd, *keep):
        try:
            s = stat(p)
        except OSError:
            continue
        kept.add((s.st_dev, s.st_ino))
    HIDDEN, HIDDEN_FILES, KEPT = frozenset(hidden_dirs), frozenset(hidden_files), frozenset(kept)
    verdicts: dict[tuple[int, int], bool] = {}  # folder -> hidden?, as found
    known = verdicts.get
    import builtins
    BUILTINS = dict(builtins.__dict__)  # as they are before the program runs: the tests' own copy
    RUN_TESTS = run_tests.__code__
    CANDIDATE = next(c for c in RUN_TESTS.co_consts if ftype(c) is ftype(RUN_TESTS) and c.co_name == "candidate")
    Delivered = ftype("Delivered", (BaseException,), {})
    PID, getpid = posix.getpid(), posix.getpid
    audit, run = sys.audit, exec
    box: dict[None, Any] = {}
    take = box.pop
    MAX_DEPTH, MAX_VALUES = 100, 1_000_000
    # A subclass's value as its base type: the base's own C methods read it, and return the base type.
    ALL = slice(None)
    AS_BASE = ((fint, fint.__int__), (ffloat, ffloat.__float__), (fcomplex, fcomplex.__complex__),
               (fstr, fstr.__str__), (fbytes, fbytes.__bytes__), (flist, flist.copy), (fset, fset.copy),
               (ffrozen, ffrozen.copy), (ftuple, ftuple.__getitem__))
    ITEMS = fdict.items
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
    LISTS = frozenset({"os.listdir", "os.scandir"})
    SLOW = frozenset({"open", "import", "marshal.loads", verdict, CALL, RESULT, START_TESTS, REFS, TESTED}) | \
        frozenset(PATHS) | LISTS

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
        """A fresh copy of ``x`` in exactly the builtin types if it is plain data, else TypeError.
        A subclass of one of them is read as that base type, by the base type's own C methods
        (captured above), so no method of the subclass (``__eq__``, ``__iter__``, ``items``) runs:
        no program code runs to find out."""
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
        if t is fdict or fissub(t, fdict):  # Counter, defaultdict, OrderedDict: the dict they are
            out = {}
            for k, v in ITEMS(x):
                out[plain(k, depth + 1)] = plain(v, depth + 1)
            return out
        for base, value in AS_BASE:  # bool and NoneType have no subclasses
            if fissub(t, base):
                return plain(value(x, ALL) if base is ftuple else value(x), depth)
        raise TypeErr("sandbox: the function returned something that is not plain data: only None, bool, int, "
                      "float, complex, str, bytes, list, tuple, dict, set and frozenset (a subclass of one "
                      "counts as its base type) count as a result")

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

    def hidden_dir(d):
        """Is folder d (symlinks followed, as the kernel would) in a hidden folder with no kept
        folder between? Walks up by ``..``; the first hidden or kept folder decides. The answer
        is kept for every folder passed, but not for those in the program's own folder (it
        removes and makes folders there, and a new folder elsewhere may get an old inode)."""
        up = "/.." if ftype(d) is fstr else b"/.."
        seen = []
        found = False
        keep_answer = True
        for _ in frange(256):
            try:
                a = stat(d)
            except OSErr:
                break
            at = (a.st_dev, a.st_ino)
            v = known(at)
            if v is not None:
                found = v
                break
            seen.append(at)
            if at in KEPT or at in HIDDEN:
                found = at not in KEPT
                keep_answer = at not in WORK
                break
            try:
                b = stat(d + up)
            except OSErr:
                break
            if (b.st_dev, b.st_ino) == at:
                break
            d = d + up
        if keep_answer:
            for at in seen:
                verdicts[at] = found
        return found

    def hidden_file(path):
        """Is the file at path (its own links followed, as open() would) in a hidden folder? A
        link in /proc (``/dev/stderr``, ``/proc/PID/fd/N``) reopens another process's file: refused."""
        t = ftype(path)
        slash = "/" if t is fstr else b"/"
        for _ in frange(40):
            try:
                s = lstat(path)
            except OSErr:
                break
            if (s.st_mode & IFMT) != IFLNK:
                break
            if s.st_dev in PROC:
                raise Perm("sandbox: /proc is off limits")
            try:
                target = readlink(path)
            except OSErr:
                return True
            i = path.rfind(slash)
            path = target if target.startswith(slash) or i < 0 else path[:i + 1] + target
        else:
            return True
        i = path.rfind(slash)
        return hidden_dir(path[:i] if i > 0 else (slash if i == 0 else (b"." if t is fbytes else ".")))

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
        if (s is not None and (s.st_dev, s.st_ino) in HIDDEN_FILES) or hidden_file(path):
            raise Perm("sandbox: the eval data, the run folder and the home folder are off limits")
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
            elif event in LISTS:
                d = args[0] if flen(args) else None
                if d is None:
                    d = "."
                if (ftype(d) is fstr or ftype(d) is fbytes) and hidden_dir(d):
                    raise Perm("sandbox: the eval data, the run folder and the home folder are off limits")
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
