"""The eval worker process: started ahead of need, kept between submissions, replaced when it fails.

One worker (``agent2rl_tui.grader.worker``) is started when the grader starts, so its heavy
imports are done by the time the baseline comes up; it then evaluates one submission after
another and keeps its engine warm in between (a vLLM engine swaps weights in place). A
submission that names other GPUs gets a worker started with them in place of the kept one.
A worker that dies or runs past the eval timeout is killed, group and all, and a fresh one
is started at once for the next submission. Each worker runs in a session of its own with
its output in ``logs/workers/worker-<n>.log``; the part written during a submission is
copied to that submission's ``evals/<n>/worker.log``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

import psutil

from agent2rl_tui.grader.launch import SECRET_ENV
from agent2rl_tui.grader.scripted_worker import SCRIPT_ENV
from agent2rl_tui.grader.worker import PREIMPORT_VLLM
from agent2rl_tui.util.procs import pid_alive, signal_group, tree_pids

log = logging.getLogger("agent2rl.grader")
WORKER_LOG_TAIL = 1500  # characters of a failed worker's output kept with its error in the record


def tail(path: Path, limit: int = WORKER_LOG_TAIL) -> str:
    """The last ``limit`` bytes of a file as text, or "" if it cannot be read."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - limit))
            return fh.read().decode("utf-8", "replace").strip()
    except OSError:
        return ""


def worker_env(preimport_vllm: bool = False) -> dict[str, str]:
    """The grader's environment without the secret, set up for the engines (its GPUs are the run's:
    ``CUDA_VISIBLE_DEVICES`` as the supervisor gave it to the grader)."""
    env = dict(os.environ)
    if preimport_vllm:
        env[PREIMPORT_VLLM] = "1"
    env.pop(SECRET_ENV, None)
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env.setdefault("HF_HUB_OFFLINE", "1")  # grading reads only prepared local files, never the hub
    env.setdefault("HF_DATASETS_OFFLINE", "1")
    # vLLM in a worker that imported torch: spawn its engine processes, never fork.
    env.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")
    # vLLM's CPU build pins its threads to cores and keeps one core for itself; on a box shared
    # with the agent's own training that halves the grader for nothing.
    env.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
    env.setdefault("VLLM_NO_USAGE_STATS", "1")
    return env


@dataclass
class Worker:
    """An eval worker process and where its output goes."""

    proc: asyncio.subprocess.Process
    log_path: Path

    @property
    def alive(self) -> bool:
        """Not exited, nor a zombie asyncio has not reaped yet (a worker killed while idle)."""
        return self.proc.returncode is None and pid_alive(self.proc.pid)

    def kill(self) -> None:
        """SIGKILL the worker's whole process group (it is its session's leader): engine and all."""
        signal_group(self.proc.pid, signal.SIGKILL)

    def log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0


class JobTimeout(Exception):
    """The worker did not answer within the eval timeout (it has been killed)."""


class JobOutOfMemory(Exception):
    """The worker's processes used more memory than the run allows (they have been killed)."""

    def __init__(self, used: int, limit: int) -> None:
        super().__init__(used, limit)
        self.used = used
        self.limit = limit


MEMORY_POLL_S = 0.2


def tree_rss(pid: int) -> int:
    """Resident memory of a process and all its descendants (vLLM's engine processes too), in bytes."""
    total = 0
    for member in tree_pids(pid):  # read down from the worker, not the machine's whole process table
        try:
            total += psutil.Process(member).memory_info().rss
        except psutil.Error:  # gone, or a zombie
            continue
    return total


class WorkerPool:
    """The kept worker, the one evaluating now, and their logs."""

    def __init__(self, run_dir: Path, *, preimport_vllm: bool = False, script: dict[str, object] | None = None) -> None:
        self.run_dir = run_dir
        self.preimport_vllm = preimport_vllm
        self.script = script
        """A scripted worker's script (``grader.scripted_worker``); None: the model's worker."""
        self.kept: Worker | None = None
        self.current: Worker | None = None
        self.started = 0

    async def start_spare(self) -> None:
        """Start the worker the next submission will use, if there is none alive."""
        if self.kept is None or not self.kept.alive:
            self.kept = await self._start()

    async def take(self) -> Worker:
        """The kept worker if it is alive; else a new one."""
        worker = self.kept
        if worker is None or not worker.alive:
            worker = await self._start()
        self.kept = None
        self.current = worker
        return worker

    async def run(self, worker: Worker, job: dict[str, object], timeout_s: float,
                  memory_limit: int | None = None) -> None:
        """Hand the job over and wait for the worker's answer (or its death).

        Raises ``JobTimeout`` or ``JobOutOfMemory`` after killing it: its memory (all its
        processes, resident) is read every ``MEMORY_POLL_S`` seconds against ``memory_limit``.
        A worker that answered is kept for the next job; a dead or killed one is replaced at
        once, so the next submission finds one warm.
        """
        try:
            assert worker.proc.stdin is not None and worker.proc.stdout is not None
            try:
                worker.proc.stdin.write((json.dumps(job) + "\n").encode())
                await worker.proc.stdin.drain()
                answer = await self._answer(worker, timeout_s, memory_limit)
            except (BrokenPipeError, ConnectionResetError):
                answer = b""
            if not answer:  # it died: wait for its exit code
                await worker.proc.wait()
        finally:
            self.current = None
        if worker.alive:
            self.kept = worker
        else:
            await self.start_spare()

    async def _answer(self, worker: Worker, timeout_s: float, memory_limit: int | None) -> bytes:
        assert worker.proc.stdout is not None
        reading = asyncio.ensure_future(worker.proc.stdout.readline())
        deadline = asyncio.get_running_loop().time() + timeout_s
        try:
            while True:
                left = deadline - asyncio.get_running_loop().time()
                if left <= 0:
                    raise JobTimeout()
                done, _ = await asyncio.wait({reading}, timeout=min(MEMORY_POLL_S, left))
                if done:
                    return reading.result()
                if memory_limit:
                    used = tree_rss(worker.proc.pid)
                    if used > memory_limit:
                        raise JobOutOfMemory(used, memory_limit)
        except (JobTimeout, JobOutOfMemory):
            reading.cancel()
            worker.kill()
            await worker.proc.wait()
            raise

    async def stop(self) -> None:
        """Kill the evaluating worker and the kept one, and wait for them."""
        for worker in (self.current, self.kept):
            if worker and worker.alive:
                worker.kill()
                await worker.proc.wait()

    def keep_log(self, worker: Worker, start: int, sub_id: int, out_dir: Path) -> str:
        """Copy what the worker wrote during this submission to evals/<n>/worker.log; its last lines."""
        kept = out_dir / "worker.log"
        try:
            with worker.log_path.open("rb") as src, kept.open("wb") as dst:
                src.seek(start)
                dst.write(f"# eval worker {worker.proc.pid}, from its log {worker.log_path.name} "
                          f"(byte {start} on)\n".encode())
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
        except OSError as exc:
            log.warning("submission %s: could not copy the eval worker's output: %s", sub_id, exc)
            return tail(worker.log_path)
        log.info("submission %s: eval worker output in %s", sub_id, kept.relative_to(self.run_dir))
        return tail(kept)

    async def _start(self) -> Worker:
        self.started += 1
        log_path = self.run_dir / "logs" / "workers" / f"worker-{self.started}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        env = worker_env(self.preimport_vllm)
        module = "agent2rl_tui.grader.worker"
        if self.script is not None:
            module, env[SCRIPT_ENV] = "agent2rl_tui.grader.scripted_worker", json.dumps(self.script)
        with log_path.open("ab") as logfh:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", module, stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, stderr=logfh, start_new_session=True, env=env,
            )
        return Worker(proc, log_path)
