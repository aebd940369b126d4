"""The run's grader as a ``run.services.Service``: a subprocess on a loopback socket kept here,
and the wait for its baseline score before the budget starts (``wait_baseline``).

Kept apart from ``run.services`` so that what imports the service kinds (the meter's and the
train-environment service's modules, which the front ends reach through the preflight) does
not import the grader's launcher.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from pathlib import Path

from agent2rl_tui.grader.client import GraderClient, GraderUnavailable
from agent2rl_tui.grader.launch import GraderProcess, spawn_grader
from agent2rl_tui.record.store import RunStore, SubStatus
from agent2rl_tui.run.progress import BaselineProgress
from agent2rl_tui.util import procs

GRADER_STOP_S = 10.0


class BaselineFailed(RuntimeError):
    """The run cannot start its budget: the baseline was not scored (the message says why)."""


class GraderService:
    """The run's grader (``grader.launch``): a subprocess on a loopback socket kept here, so a
    successor answers on the same URL with the same secret."""

    name = "grader"
    died_event = "grader_died"
    restarted_event = "grader_restarted"
    max_restarts = 5

    def __init__(self, run_dir: Path, gpus: str | None) -> None:
        self.run_dir = run_dir
        self.gpus = gpus
        self.log_path = run_dir / "logs" / "grader.log"
        self.process: GraderProcess | None = None
        self.restarts = 0

    @property
    def popen(self) -> subprocess.Popen[bytes] | None:
        return self.process.popen if self.process is not None else None

    @property
    def pid(self) -> int | None:
        return self.process.popen.pid if self.process is not None else None

    @property
    def url(self) -> str | None:
        return self.process.url if self.process is not None else None

    def start(self) -> str:
        self.process = spawn_grader(self.run_dir, self.log_path, keep_socket=True, gpus=self.gpus, die_with_us=True)
        return self.process.url

    def wait_baseline(self, timeout_s: float, stopped: threading.Event, store: RunStore) -> float:
        """The baseline's score once the grader has it, saying in the log how far it has got
        (``run.progress.BaselineProgress``). ``BaselineFailed`` with the run's error when the grader
        is not ready within ``timeout_s``, dies, is stopped, or could not score the base model."""
        assert self.process is not None and self.url is not None, "start() first"
        popen, said = self.process.popen, BaselineProgress(self.run_dir)

        def alive() -> bool:
            said.tick()
            return popen.poll() is None and not stopped.is_set()

        try:
            with GraderClient(self.url) as client:
                info = client.wait_ready(timeout_s, alive=alive)
        except GraderUnavailable as exc:
            if stopped.is_set():
                raise BaselineFailed("stopped while the baseline was being scored") from exc
            raise BaselineFailed(f"the grader did not start: {exc}; see logs/grader.log") from exc
        baseline = info.get("baseline") or {}
        if baseline.get("status") != SubStatus.SCORED:  # the grader's answer has a code; the record the text
            recorded = store.baseline()
            raise BaselineFailed(
                f"the base model could not be scored: {(recorded.error if recorded else None) or 'unknown error'}"
            )
        return float(baseline["score"])

    def died(self) -> int | None:
        return self.process.popen.poll() if self.process is not None else None

    def restart(self) -> str:
        """Its eval workers died with it (PR_SET_PDEATHSIG); the successor re-queues whatever was
        queued or being evaluated, so a submission the agent made is scored, not lost."""
        self.process = spawn_grader(self.run_dir, self.log_path, successor_of=self.process, gpus=self.gpus,
                                    die_with_us=True)
        return self.process.url

    def stop(self) -> list[int]:
        """Stop it, then every process still under us in another session: its eval workers (they
        run in sessions of their own, and re-parent to the supervisor, a subreaper, if the grader is
        killed). The pids of those killed."""
        process, self.process = self.process, None
        if process is None:
            return []
        if process.sock is not None:
            process.sock.close()
        grader = process.popen
        if grader.poll() is None:
            grader.terminate()
            try:
                grader.wait(timeout=GRADER_STOP_S)
            except subprocess.TimeoutExpired:
                procs.signal_group(grader.pid, signal.SIGKILL)
                grader.wait()
        procs.signal_group(grader.pid, signal.SIGKILL)
        left = procs.descendants(os.getpid(), other_sessions=True)
        if left:
            procs.kill_pids(left)
        return left
