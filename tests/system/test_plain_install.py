"""A plain `pip install -e .`: what someone gets who installs the package the usual way, without
make and its lock. pip resolves pyproject.toml's ranges afresh, so what the project needs must be
declared there, not left to another package's pin: setuptools 81 and later have no
``pkg_resources``, which alpaca-eval 0.6.6 imports, and an install that took setuptools 84 failed
every AlpacaEval submission ("the alpaca-eval package is needed") while it was installed.

The venv is made once for this file (pip resolves against the package index: minutes); the
AlpacaEval run is scored by the stand-in judge (tests/support/judge_server.py), as test_alpacaeval's is.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import local_server
from support.paths import REPO

from agent2rl_tui.record.store import RunStore

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]


@pytest.fixture(scope="module")
def plain_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``python -m venv`` and ``pip install -e .``; torch pinned in the same command where there is no
    NVIDIA GPU, as make does (else pip takes a CUDA build of several GB), nothing else."""
    venv = tmp_path_factory.mktemp("plain-install") / "venv"
    subprocess.run([sys._base_executable, "-m", "venv", str(venv)], check=True, timeout=300)
    torch_pin = [] if shutil.which("nvidia-smi") else ["torch==2.13.0"]
    # --no-compile: no .pyc written for the ~20,000 files installed (torch's most of them); what pip
    # resolves and installs is the same, and the modules the tests import are compiled as they load
    # (and kept: the venv's processes run with bytecode writing on, whatever the environment says).
    proc = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", "--no-compile",
                           *torch_pin, "-e", str(REPO)], capture_output=True, text=True, timeout=3000)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return venv


def venv_env() -> dict[str, str]:
    """The plain venv's processes' environment (as the fixtures left it): offline, and writing the
    bytecode pip did not (an empty PYTHONDONTWRITEBYTECODE is off)."""
    return {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "PYTHONDONTWRITEBYTECODE": ""}


def in_venv(venv: Path, *args: str, timeout: float = 600, **kw) -> subprocess.CompletedProcess[str]:
    env = {**venv_env(), **kw.pop("env", {})}
    return subprocess.run([str(venv / "bin" / "agent2rl-tui"), *args], capture_output=True, text=True,
                          timeout=timeout, env=env, **kw)


def test_a_plain_install_keeps_pkg_resources_for_alpaca_eval(plain_venv: Path) -> None:
    program = "import setuptools, alpaca_eval.metrics.glm_winrate; print(setuptools.__version__)"
    out = subprocess.run([str(plain_venv / "bin" / "python"), "-W", "ignore", "-c", program],
                         capture_output=True, text=True, timeout=300, env=venv_env())
    assert out.returncode == 0, out.stderr[-2000:]
    assert int(out.stdout.split(".")[0]) < 81


def test_doctor_in_a_plain_install_says_what_make_would_add(plain_venv: Path) -> None:
    out = in_venv(plain_venv, "doctor", "packages", "vllm")
    lines = out.stdout.splitlines()
    assert any(re.match(r"packages\s+ok\s+alpaca_eval\.metrics\.glm_winrate", line) for line in lines), out.stdout
    vllm = next(line for line in lines if line.startswith("vllm "))
    assert " missing " in vllm, out.stdout  # no extra asked: no vLLM, and doctor says how to get it
    assert "make setup" in out.stdout
    assert out.returncode == 1  # a part asked for by name is missing


@pytest.fixture(scope="module")
def judge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server, port = local_server.start("judge_server.py", tmp_path_factory.mktemp("plain-judge"))
    yield f"http://127.0.0.1:{port}/v1"
    server.kill()
    server.wait()


def test_a_plain_install_scores_an_alpacaeval_submission(plain_venv: Path, alpaca_data: Path, judge: str,  # noqa: F811
                                                         tiny_model: Path, tmp_path: Path) -> None:
    out = in_venv(plain_venv, "--root", str(tmp_path / "runs"), "run", "start", "--task", "alpacaeval",
                  "--agent", "example", "--model", str(tiny_model), "--budget", "10m", "--grace", "5s",
                  "--eval-limit", "3", "--judge-url", judge, "--judge-model", "local-judge",
                  "--env", "EXAMPLE_SFT_STEPS=2", timeout=1200)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    run = Path(re.search(r"run folder: (\S+)", out.stdout).group(1))
    with RunStore.of_run(run) as store:
        baseline = store.baseline()
        subs = store.submissions(kind="agent")
    assert baseline.status == "scored" and baseline.n_items == 3, baseline
    assert [s.status for s in subs] == ["scored"] and subs[0].score is not None, subs
