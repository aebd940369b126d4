"""Running untrusted generated code (HumanEval completions) so it harms nothing else.

Each program runs in its own subprocess, never in the grader's or the worker's process, with
(as far as this machine allows; see shared/GRADING-FACTS.md, part A2, for what each layer
stops, measured):
- ``full`` (root, util-linux present): a new network namespace (no network, not even
  loopback), pid namespace (the whole tree dies together) and mount namespace (private
  throw-away /tmp, /var/tmp, /dev/shm), a separate unprivileged uid per worker slot (root's
  files and the 0700 run folder unreadable, RLIMIT_NPROC applies), no new privileges, no
  capabilities; ``userns`` (not root): an unprivileged user namespace
  with its own network and pid namespaces, same uid; ``rlimits``: resource limits only.
- always: its own temp dir as cwd and HOME, a clean environment, ``python -I``, rlimits on
  address space, CPU seconds, file size (so output floods stop at 1 MB), open files and core
  dumps, a wall-clock timeout after which its process group is killed.
The mode in use is written to the worker's log once.

Verdict: a runner execs the program as ``__sandbox__`` (so ``if __name__ == "__main__"``
blocks and ``sys.exit(0)`` cannot fake a pass) and reports ``OK`` plus a per-run nonce on
an inherited pipe only after ``check()`` returned. Code running in the same process could
still find the nonce with enough effort; the record keeps every completion for review.
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
# World-writable places a program could write to outside its dir; in ``full`` mode each gets
# a private, throw-away tmpfs in the program's mount namespace.
MASKED_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")
ROOT_SANDBOX_DIR = Path("/var/lib/agent2rl-tui/sandbox")  # root-owned, outside MASKED_DIRS
MASK = ('for d in ' + " ".join(MASKED_DIRS) + '; do [ -d "$d" ] && mount -t tmpfs -o size=16m,mode=1777 tmpfs "$d"; '
        'done; exec "$@"')

RUNNER = r"""
import os, sys
def _run():
    fd = int(sys.argv[1])
    nonce = sys.stdin.readline().strip().encode()
    sys.stdin.close()
    src = open("prog.py", encoding="utf-8").read()
    code = compile(src, "prog.py", "exec")
    exec(code, {"__name__": "__sandbox__", "__builtins__": __builtins__})
    os.write(fd, b"OK " + nonce)
_run()
"""


@dataclass(frozen=True)
class SandboxResult:
    passed: bool
    status: str  # passed | failed | timeout
    detail: str
    seconds: float


def _pythons() -> list[str]:
    """Interpreters to try: ours, then the system's (a venv under /root is not executable
    by the sandbox's uid; stdlib-only programs run on any Python 3)."""
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
        self.mode, self.python = self._choose(mode)
        log.info("sandbox mode %s, python %s, %d workers", self.mode, self.python, self.workers)

    def _choose(self, wanted: str | None) -> tuple[str, str]:
        """The strongest mode that really runs a program here, with an interpreter it can exec."""
        tools = all(shutil.which(t) for t in ("unshare", "setpriv", "prlimit"))
        possible = {
            "full": tools and os.geteuid() == 0 and _works(["unshare", "--net", "--pid", "--mount", "--fork"]),
            "userns": tools and _works(["unshare", "--user", "--map-root-user", "--net", "--pid", "--fork"]),
            "rlimits": shutil.which("prlimit") is not None,
        }
        for mode in [wanted] if wanted else ["full", "userns", "rlimits"]:
            if not possible.get(mode):
                continue
            for python in _pythons():
                self.mode, self.python = mode, python
                if self.run("assert 1 + 1 == 2\n").passed:  # the probe: the real path, end to end
                    return mode, python
        raise RuntimeError(f"no sandbox mode works here (wanted {wanted or 'any'}); install util-linux")

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def _argv(self, slot: int, wfd: int) -> list[str]:
        cpu = int(self.timeout_s) + 1
        limits = ["prlimit", f"--as={self.memory_bytes}", f"--cpu={cpu}:{cpu + 1}", f"--fsize={OUTPUT_CAP}",
                  "--nofile=64", "--core=0"]
        py = [self.python, "-I", "-c", RUNNER, str(wfd)]
        if self.mode == "full":
            uid = UID_BASE + slot
            return ["unshare", "--net", "--pid", "--mount", "--fork", "--kill-child", "--", "/bin/sh", "-c", MASK, "sh",
                    "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs",
                    "--inh-caps=-all", "--", *limits, "--nproc=32", "--", *py]
        if self.mode == "userns":
            return ["unshare", "--user", "--map-root-user", "--net", "--pid", "--fork", "--kill-child", "--",
                    *limits, "--", *py]
        return [*limits, "--", *py]

    def run(self, program: str, slot: int = 0) -> SandboxResult:
        work = Path(tempfile.mkdtemp(dir=self.root))
        (work / "prog.py").write_text(program, encoding="utf-8")
        if self.mode == "full":
            for p in (work, work / "prog.py"):
                os.chown(p, UID_BASE + slot, UID_BASE + slot)
        os.chmod(work, 0o700)
        nonce = secrets.token_hex(16)
        rfd, wfd = os.pipe()
        errfile = (self.root / f"err-{work.name}").open("w+b")
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(work), "OMP_NUM_THREADS": "1",
               "PYTHONDONTWRITEBYTECODE": "1"}
        t0 = time.monotonic()
        try:
            proc = subprocess.Popen(self._argv(slot, wfd), cwd=work, env=env, stdin=subprocess.PIPE,
                                    stdout=subprocess.DEVNULL, stderr=errfile, pass_fds=(wfd,),
                                    start_new_session=True)
        finally:
            os.close(wfd)
        try:
            assert proc.stdin is not None
            try:
                proc.stdin.write(nonce.encode() + b"\n")
                proc.stdin.close()
            except BrokenPipeError:
                pass
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
        if verdict == f"OK {nonce}".encode():
            return SandboxResult(True, "passed", "", seconds)
        return SandboxResult(False, "failed", tail[-1] if tail else f"exit code {proc.returncode}", seconds)

    @staticmethod
    def _kill(proc: subprocess.Popen[bytes]) -> None:
        """Kill the program's whole tree: its process group (and, in a pid namespace, all of it)."""
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
