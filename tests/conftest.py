"""Shared fixtures: the real tiny model, run folders made by the real code, real processes.

Nothing here stands in for a component of ours: runs are created by ``core.runs``, graders
are real subprocesses on loopback, supervisors are started by the real CLI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import local_server
import pytest
from skip_policy import pytest_make_collect_report, pytest_runtest_makereport  # noqa: F401 - no silent skips under CI

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # torch threads sleep, not spin, on a busy machine

from agent2rl_tui.grader.client import GraderClient  # noqa: E402
from agent2rl_tui.grader.launch import GraderProcess, spawn_grader  # noqa: E402
from agent2rl_tui.record.store import RunStore  # noqa: E402
from agent2rl_tui.run.lifecycle import create_run  # noqa: E402
from agent2rl_tui.run.request import RunRequest  # noqa: E402
from agent2rl_tui.run.workspace import populate_workspace  # noqa: E402
from agent2rl_tui.tasks.registry import EVAL_SEED_KEY, load_task  # noqa: E402
from agent2rl_tui.util.timeutil import now  # noqa: E402

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from agent2rl_tui.tasks.tinymodel import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("models") / "tiny-llama")


@pytest.fixture(scope="session")
def example_run(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> tuple[Path, str]:
    """One whole run of the example agent through the real CLI, shared by the session and by
    every xdist worker of it (the first to need it makes it under a file lock; the others wait
    and read it). Tests read it; a test that writes to a run folder works on a copy.

    The agent needs about a minute on two idle cores; the budget leaves room for a loaded
    machine (the run ends when the agent does, so a long budget costs nothing).
    """
    import re

    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    done = shared / "example-run.out"
    with FileLock(str(shared / "example-run.lock")):
        if not done.exists():
            proc = cli("run", "start", "--task", "arith", "--agent", "example", "--model", str(tiny_model),
                       "--budget", "20m", "--grace", "5s", "--driver", "scripted", "--eval-seed",
                       str(PINNED_EVAL_SEED), root=shared / "example-runs", timeout=1500)
            assert proc.returncode == 0, proc.stdout + proc.stderr
            done.write_text(proc.stdout, encoding="utf-8")
    stdout = done.read_text(encoding="utf-8")
    run_dir = Path(re.search(r"run folder: (\S+)", stdout).group(1))
    return run_dir, stdout


@pytest.fixture(scope="session")
def review_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of runs to review: a run shaped as the example agent's (synthetic.example_agent_run:
    the workspace, revisions, submissions, items, transcript, logs and report of an SFT then
    GRPO run, built without training), and a copy of it marked lost."""
    import shutil

    from synthetic import example_agent_run

    root = tmp_path_factory.mktemp("review")
    src = example_agent_run(tmp_path_factory.mktemp("review-src"), "20261122T233320-arith-example")
    finished = root / src.name
    shutil.copytree(src, finished)
    lost = root / (src.name + "-lost")
    shutil.copytree(src, lost)
    with RunStore.of_run(lost) as store:
        run = store.run()
        store.conn.execute("UPDATE run SET id = ?", (lost.name,))
        # Its supervisor "died" five seconds into the budget: no heartbeat since, no end.
        store.update_run(status="running", ended_at=None, agent_ended_at=None, agent_exit_code=None,
                         end_reason=None, heartbeat_at=run.budget_start + 5, supervisor_pid=None,
                         agent_pid=None, grader_pid=None)
    return root


@pytest.fixture(scope="session")
def prepared_data(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The data cache with GSM8K (from shared/data) and HumanEval (from its PyPI package).

    Set in the environment, so CLI subprocesses, supervisors, graders and workers read it.
    """
    from agent2rl_tui.tasks.data import prepare

    root = tmp_path_factory.mktemp("data-cache")
    old = os.environ.get("AGENT2RL_DATA")
    os.environ["AGENT2RL_DATA"] = str(root)
    prepare(load_task("gsm8k"), SHARED_DATA / "gsm8k")
    prepare(load_task("humaneval"))
    yield root
    if old is None:
        os.environ.pop("AGENT2RL_DATA", None)
    else:
        os.environ["AGENT2RL_DATA"] = old


SCRIPTED_GRADING = json.dumps({"scores": {"0": 10.0}, "default_score": 50.0})
"""The script of a run graded without a model (grader/scripted_worker.py): baseline 10, every submission 50."""


@pytest.fixture
def scripted_grading(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs started from here (``run start``, campaigns, their Slurm jobs) are graded by the real
    grader with a scripted eval worker: for tests of what happens around evaluations."""
    monkeypatch.setenv("AGENT2RL_SCRIPTED_WORKER", SCRIPTED_GRADING)


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


def wait_for(predicate, timeout: float, interval: float = 0.2, what: str = "condition"):
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


@pytest.fixture(scope="module")
def live_grader(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> Iterator[LiveGrader]:
    run_dir = make_prepared_run(tmp_path_factory.mktemp("grader-runs"), tiny_model)
    grader = LiveGrader(run_dir)
    yield grader
    grader.close()


def read_report(run_dir: Path) -> dict:
    return json.loads((run_dir / "report" / "report.json").read_text())


class Judge:
    """A running tests/judge_server.py: its /v1 URL and its request count."""

    def __init__(self, proc: subprocess.Popen, port: int) -> None:
        self.proc, self.url = proc, f"http://127.0.0.1:{port}/v1"

    def requests(self) -> int:
        with urllib.request.urlopen(self.url + "/stats", timeout=10) as r:
            return int(json.loads(r.read())["requests"])


@pytest.fixture
def judge_server(tmp_path: Path) -> Iterator[Callable[..., Judge]]:
    """Start tests/judge_server.py processes (an OpenAI-compatible judge, summarizer) with the given
    options; all are stopped after the test."""
    procs: list[subprocess.Popen] = []

    def start(*options: str) -> Judge:
        proc, port = local_server.start("judge_server.py", tmp_path, *options)
        procs.append(proc)
        return Judge(proc, port)

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


LONG_FILES = ("test_campaign_slurm_real.py", "test_plain_install.py", "test_bench.py")
"""Files that take longest (about eight minutes of Slurm jobs; pip resolving a plain install against
the package index; every benchmark's quick run): started first, so that pytest-xdist (``--dist
loadfile``) runs the rest beside them, not after them."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.path.name not in LONG_FILES)  # stable: the order within is kept
