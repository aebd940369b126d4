"""Helpers that drive the real parts from a test: the CLI in a subprocess, a prepared run folder,
a real grader over it, waiting on a condition, the live processes with a marker.

Nothing here stands in for a component of ours: runs are created by ``run.lifecycle``, graders are
real subprocesses on loopback, supervisors are started by the real CLI.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from agent2rl_tui.grader.client import GraderClient
from agent2rl_tui.grader.launch import GraderProcess, spawn_grader
from agent2rl_tui.record.runconfig import SCRIPTED_WORKER_ENV
from agent2rl_tui.record.store import RunStore
from agent2rl_tui.run.lifecycle import create_run
from agent2rl_tui.run.request import RunRequest
from agent2rl_tui.run.workspace import populate_workspace
from agent2rl_tui.tasks.registry import EVAL_SEED_KEY, load_task
from agent2rl_tui.util.timeutil import now

SCRIPTED_GRADING = json.dumps({"scores": {"0": 10.0}, "default_score": 50.0})
"""The script of a run graded without a model (grader/scripted_worker.py): baseline 10, every submission 50."""


def scripted_env(env: Mapping[str, str] | None = None, script: str = SCRIPTED_GRADING) -> dict[str, str]:
    """``env`` (this process's environment by default) with ``script`` for the scripted eval worker: the
    runs a CLI started with it creates (campaigns and their Slurm jobs too) are graded without a model."""
    return {**(os.environ if env is None else env), SCRIPTED_WORKER_ENV: script}


def toml_inline(values: Mapping[str, str]) -> str:
    """``values`` as a TOML inline table (a campaign's ``env = {...}``): JSON's strings are TOML's basic strings."""
    return "{ " + ", ".join(f"{key} = {json.dumps(value)}" for key, value in values.items()) + " }"


def cli(*args: str, root: Path | None = None, timeout: float = 300, **kw) -> subprocess.CompletedProcess[str]:
    """Run the real ``agent2rl-tui`` command line in a subprocess."""
    cmd = [sys.executable, "-m", "agent2rl_tui.cli"]
    if root is not None:
        cmd += ["--root", str(root)]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=timeout, **kw)


def processes_with(marker: str) -> list[int]:
    """Live processes whose command line holds ``marker`` (a sandboxed agent's pids are not ours)."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmd and state != "Z":
            out.append(int(pid))
    return out


def wait_for(predicate: Callable[[], Any], timeout: float, interval: float = 0.2, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


PINNED_EVAL_SEED = 20261126
"""The eval draw of the runs a test drives a grader on directly: the same items every time, so
a score a test compares is not a different sample in each session (a real run draws its own)."""


def make_prepared_run(root: Path, model: Path, *, budget_s: float = 600, task: str = "arith",
                      eval_seed: int | None = PINNED_EVAL_SEED, **kw) -> Path:
    """A run folder with its workspace populated and the budget started, no supervisor.

    Used to drive a real grader directly; the supervisor's own path is tested end to end.
    ``eval_seed``: the run's eval draw (None: drawn as a real run's is).
    """
    run_dir = create_run(RunRequest.of(task=task, agent="command", command="true", model=model,
                                    budget_s=budget_s, root=root, **kw))
    with RunStore.of_run(run_dir) as store:
        if eval_seed is not None:
            config = json.loads(store.run().config_json)
            store.update_run(config_json=json.dumps({**config, EVAL_SEED_KEY: eval_seed}))
        run = store.run()
        populate_workspace(run_dir, load_task(task), Path(run.base_model_source), run.base_model,
                           budget_s=budget_s, grace_s=run.grace_s, prompt_profile=kw.get("prompt_profile"))
        start = now()
        store.update_run(budget_start=start, deadline=start + budget_s, status="running")
    return run_dir


class LiveGrader:
    """A real grader subprocess over a prepared run folder."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.proc: GraderProcess = spawn_grader(run_dir, run_dir / "logs" / "grader.log")
        self.url = self.proc.url
        self.client = GraderClient(self.url, timeout=300)
        self.health = self.client.wait_ready(120, alive=lambda: self.proc.popen.poll() is None)
        self.workspace = run_dir / "workspace"

    def store(self) -> RunStore:
        return RunStore.of_run(self.run_dir)

    def set_deadline(self, deadline: float) -> None:
        with self.store() as store:
            store.update_run(deadline=deadline)

    def close(self) -> None:
        self.client.close()
        self.proc.popen.terminate()
        try:
            self.proc.popen.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.popen.kill()
            self.proc.popen.wait()


def read_report(run_dir: Path) -> dict:
    return json.loads((run_dir / "report" / "report.json").read_text())


class Judge:
    """A running support/judge_server.py: its /v1 URL and its request count."""

    def __init__(self, proc: subprocess.Popen, port: int) -> None:
        self.proc, self.url = proc, f"http://127.0.0.1:{port}/v1"

    def requests(self) -> int:
        with urllib.request.urlopen(self.url + "/stats", timeout=10) as r:
            return int(json.loads(r.read())["requests"])


def fill(template: str, **values: str) -> str:
    """``template`` with each placeholder NAME (a key of ``values``) replaced by its value, all in one
    pass: a value is never scanned again, so a path that happens to hold another placeholder's name
    (a temporary folder such as /tmp/fresh-clone.bAkGGO, and GO) is written as it is."""
    if not values:
        return template
    pattern = re.compile("|".join(re.escape(k) for k in sorted(values, key=len, reverse=True)))
    return pattern.sub(lambda m: values[m.group()], template)
