"""Fixtures every tier may use: the real tiny model, the example agent's whole run, a folder of runs
to review, the prepared data cache, grading by a scripted eval worker. The helpers they and the tests
call are in ``support/`` (``support.runs``, ``support.paths``, ...); each tier's own fixtures are in
its conftest.

The tiers (docs/testing.md): ``unit/`` in-process and without torch, ``integration/`` the real
grader, supervisor and tiny model, ``system/`` Slurm, the npm agent CLIs, vLLM, chromium, installs,
benchmarks and the type checker. ``make test`` runs all three, ``make test-fast`` the first two.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.alpaca import REFERENCE_FILE, alpaca_rows
from support.order import pytest_collection_modifyitems  # noqa: F401 - the longest files start first
from support.paths import SHARED_DATA, shared_by_workers
from support.runs import PINNED_EVAL_SEED, SCRIPTED_GRADING, cli
from support.skip_policy import pytest_make_collect_report, pytest_runtest_makereport  # noqa: F401 - no silent skips under CI

from agent2rl_tui.record.store import RunStore
from agent2rl_tui.tasks.registry import load_task

# One thread for torch in every process the suite starts (graders, eval workers, the agents' training),
# unless the caller says otherwise. The suite runs more processes than there are cores: a torch process
# with a thread per core gains nothing there and spins its idle threads, and a time-boxed training
# stage burns a core per thread for its whole share of the budget (a 2-minute GSM8K run: 162 s of
# CPU with two threads, 108 s with one, on 2 cores).
os.environ.setdefault("OMP_NUM_THREADS", "1")
# TextWorldExpress's JVMs (some 90 of them, each playing a few short games) with the client compiler
# only and the serial collector: a JVM's start-up is most of its work here, and the server compiler's
# and parallel collector's threads cost about a third more CPU for nothing (test_episodes and
# test_held_out_games: 39 CPU-s with the defaults, 28 with these).
os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")


@pytest.fixture(scope="session", autouse=True)
def _roots_list_of_the_session(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The roots the tests' runs are made under are listed in the session's own file, not the user's
    (``record.root.roots_file``; a test that checks the list sets its own)."""
    from agent2rl_tui.record.root import ROOTS_FILE_ENV

    os.environ.setdefault(ROOTS_FILE_ENV, str(tmp_path_factory.getbasetemp() / "known-roots"))


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model (seed 0), built once for the session and every xdist worker of it, as
    ``example_run`` is: the first to need it builds it under a file lock (5 s of CPU, torch and
    transformers imported), the others read it. Tests read it; one that changes a model works on a copy."""
    import shutil

    from agent2rl_tui.tasks.tinymodel import build_tiny_model

    with shared_by_workers(tmp_path_factory, "tiny-model") as shared:
        model = shared / "models" / "tiny-llama"
        if not model.is_dir():
            building = shared / "models" / "tiny-llama.building"
            shutil.rmtree(building, ignore_errors=True)  # a build cut short by an earlier crash
            build_tiny_model(building).rename(model)  # whole, or not there
    return model


@pytest.fixture(scope="session")
def example_run(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> tuple[Path, str]:
    """One whole run of the example agent through the real CLI, shared by the session and by
    every xdist worker of it (the first to need it makes it under a file lock; the others wait
    and read it). Tests read it; a test that writes to a run folder works on a copy.

    The agent needs about a minute on two idle cores; the budget leaves room for a loaded
    machine (the run ends when the agent does, so a long budget costs nothing).
    """
    import re

    with shared_by_workers(tmp_path_factory, "example-run") as shared:
        done = shared / "example-run.out"
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

    from support.synthetic import example_agent_run

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


@pytest.fixture
def scripted_grading(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs started from here (``run start``, campaigns, their Slurm jobs) are graded by the real
    grader with a scripted eval worker: for tests of what happens around evaluations."""
    monkeypatch.setenv("AGENT2RL_SCRIPTED_WORKER", SCRIPTED_GRADING)


@pytest.fixture(scope="module")
def alpaca_data(prepared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """alpacaeval prepared offline: the real reference outputs and 48 Alpaca-format rows; no LC data."""
    folder = tmp_path_factory.mktemp("alpaca-source")
    with (folder / "alpaca_data.json").open("w", encoding="utf-8") as fh:
        json.dump(alpaca_rows(48), fh)
    from agent2rl_tui.tasks.data import prepare

    prepare(load_task("alpacaeval"), [REFERENCE_FILE, folder / "alpaca_data.json"])
    return prepared_data / "alpacaeval"
