"""The run's train-environment service as a process of the supervisor (``agent2rl_tui.trainenv``).

Every run of an interactive (Level-3) task starts it beside the grader, before the agent: on a
loopback socket the supervisor binds and keeps (so a successor of a service that died answers
on the same URL), the run's own secret in its URL, its log in ``logs/trainenv.log``. The agent
gets the URL as ``$TRAIN_ENV_URL``; the service ends with the agent's phase (nothing is trained
after the deadline). A run whose service cannot start stops before its budget, saying why.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path

from agent2rl_tui.grader.launch import GraderProcess, spawn_service
from agent2rl_tui.run.services import ServiceError
from agent2rl_tui.trainenv import SECRET_ENV
from agent2rl_tui.util import procs

URL_VAR = "TRAIN_ENV_URL"
START_TIMEOUT_S = 120.0
STOP_GRACE_S = 10.0
RESTARTS = 3


class TrainEnvError(ServiceError):
    """The service did not start (its log says why)."""


class TrainEnvProcess:
    """The service's process (a ``run.services.Service``)."""

    name = "train-environment service"
    died_event = restarted_event = "train_envs_died"
    max_restarts = RESTARTS

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.log_path = run_dir / "logs" / "trainenv.log"
        self.process: GraderProcess | None = None
        self.restarts = 0

    @property
    def url(self) -> str | None:
        return self.process.url if self.process is not None else None

    @property
    def pid(self) -> int | None:
        return self.process.popen.pid if self.process is not None else None

    def start(self) -> str:
        """Start it (on the last one's socket, if any) and wait until it answers; its URL."""
        self.process = spawn_service("agent2rl_tui.trainenv", SECRET_ENV, self.run_dir, self.log_path,
                                     keep_socket=True, successor_of=self.process, die_with_us=True)
        self._wait_ready()
        assert self.process is not None
        return self.process.url

    def _wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.popen.poll() is not None:
                raise TrainEnvError(f"it exited with code {self.process.popen.returncode}; see logs/trainenv.log")
            try:
                with urllib.request.urlopen(self.process.url + "/health", timeout=10) as resp:
                    json.loads(resp.read())
                return
            except (urllib.error.URLError, OSError, ValueError):
                time.sleep(0.2)
        raise TrainEnvError(f"it did not answer within {START_TIMEOUT_S:.0f} s; see logs/trainenv.log")

    def died(self) -> int | None:
        """The exit code of a service that ended by itself, else None."""
        return self.process.popen.poll() if self.process is not None else None

    def restart(self) -> str:
        """A successor on the dead one's socket (the same ``$TRAIN_ENV_URL``)."""
        return self.start()

    def stop(self) -> None:
        """SIGTERM (it closes its environments), SIGKILL if it does not end; the socket closed."""
        process, self.process = self.process, None
        if process is None:
            return
        procs.stop_process(process.popen, STOP_GRACE_S)
        if process.sock is not None:
            process.sock.close()
