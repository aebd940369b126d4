"""The eval worker processes: one fresh ``agent2rl_tui.grader.worker`` per evaluation.

A spare worker is started ahead of need, so its heavy imports are done by the time a
submission comes up; a submission that names its GPUs gets a worker started with them.
Each worker runs in a session of its own (its whole group is killed at a timeout) with its
output in a file of its own, which moves to the submission's eval folder when it is done.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from pathlib import Path

from agent2rl_tui.grader.launch import SECRET_ENV
from agent2rl_tui.util.procs import signal_group

log = logging.getLogger("agent2rl.grader")
WORKER_LOG_TAIL = 1500  # characters of a failed worker's output quoted to the agent
Worker = asyncio.subprocess.Process


def tail(path: Path, limit: int = WORKER_LOG_TAIL) -> str:
    """The last ``limit`` bytes of a file as text, or "" if it cannot be read."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - limit))
            return fh.read().decode("utf-8", "replace").strip()
    except OSError:
        return ""


def worker_env(gpu: str | None) -> dict[str, str]:
    """The grader's environment without the secret, set up for the engines."""
    env = dict(os.environ)
    env.pop(SECRET_ENV, None)
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    # vLLM in a worker that imported torch: spawn its engine processes, never fork.
    env.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    return env


def kill(proc: Worker) -> None:
    """SIGKILL a worker's whole process group (it is its session's leader)."""
    signal_group(proc.pid, signal.SIGKILL)


class WorkerPool:
    """The warm spare, the worker now evaluating, and where each one's output goes."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.spare: Worker | None = None
        self.current: Worker | None = None
        self.logs: dict[int, Path] = {}  # worker pid -> its output file
        self.started = 0

    async def start_spare(self) -> None:
        self.spare = await self._start(None)

    async def take(self, gpu: str | None = None) -> Worker:
        """The warm spare for this job (its successor starts importing at once); a submission
        that names its GPUs gets a worker started with them."""
        if gpu is not None:
            return await self._start(gpu)
        if self.spare is None or self.spare.returncode is not None:
            await self.start_spare()
        proc = self.spare
        assert proc is not None
        await self.start_spare()
        return proc

    async def stop(self) -> None:
        """Kill the evaluating worker and the spare, and wait for them."""
        for proc in (self.current, self.spare):
            if proc and proc.returncode is None:
                kill(proc)
                await proc.wait()

    def keep_log(self, proc: Worker, sub_id: int, out_dir: Path) -> str:
        """Move a used worker's output to evals/<n>/worker.log; its last lines."""
        path = self.logs.pop(proc.pid, None)
        if path is None or not path.exists():
            return ""
        kept = out_dir / "worker.log"
        try:
            path.replace(kept)
        except OSError:
            kept = path
        log.info("submission %s: eval worker output in %s", sub_id, kept.relative_to(self.run_dir))
        return tail(kept)

    async def _start(self, gpu: str | None) -> Worker:
        self.started += 1
        log_path = self.run_dir / "logs" / "workers" / f"worker-{self.started}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("ab") as logfh:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "agent2rl_tui.grader.worker", stdin=asyncio.subprocess.PIPE,
                stdout=logfh, stderr=logfh, start_new_session=True, env=worker_env(gpu),
            )
        self.logs[proc.pid] = log_path
        return proc
