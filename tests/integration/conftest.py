"""The integration tier: the real grader, supervisors and whole runs, the tiny model (torch).

Its own fixtures: a real grader subprocess over a prepared run folder, shared by a module
(``live_grader``), and stand-in judge servers started per test (``judge_server``).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support import local_server
from support.runs import Judge, LiveGrader, make_prepared_run


@pytest.fixture(scope="module")
def live_grader(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> Iterator[LiveGrader]:
    run_dir = make_prepared_run(tmp_path_factory.mktemp("grader-runs"), tiny_model)
    grader = LiveGrader(run_dir)
    yield grader
    grader.close()


@pytest.fixture
def judge_server(tmp_path: Path) -> Iterator[Callable[..., Judge]]:
    """Start support/judge_server.py processes (an OpenAI-compatible judge, summarizer) with the given
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
