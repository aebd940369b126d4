"""The task registry and the offline arith generator."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent2rl_tui.tasks.generators import generate_arith
from agent2rl_tui.tasks.registry import TaskError, discover, load_task


def test_arith_is_discovered_and_loads() -> None:
    assert "arith" in discover()
    task = load_task("arith")
    assert task.level == 1 and task.evaluator == "math_answer"
    assert task.inference.max_new_tokens == 8 and task.inference.temperature == 0.0
    assert "#### N" in task.description


def test_arith_splits_are_deterministic_and_disjoint() -> None:
    task = load_task("arith")
    train, evals = task.load_split("train"), task.load_split("eval")
    assert (len(train), len(evals)) == (300, 100)
    assert train == task.load_split("train") and evals == task.load_split("eval")
    assert not {r["question"] for r in train} & {r["question"] for r in evals}
    q = evals[0]["question"]
    a, b = q.rstrip("=").split("+")
    assert evals[0]["answer"] == f"#### {int(a) + int(b)}"


def test_a_different_seed_gives_a_different_split() -> None:
    _, e1 = generate_arith(1, {"max_operand": 9, "eval_size": 20})
    _, e2 = generate_arith(2, {"max_operand": 9, "eval_size": 20})
    assert e1 != e2


def test_unknown_tasks_and_bad_generators_explain_themselves() -> None:
    with pytest.raises(TaskError, match="no task named 'nope'; known tasks: .*arith"):
        load_task("nope")
    with pytest.raises(TaskError, match="unsupported ops"):
        generate_arith(0, {"ops": ["/"]})


def test_a_user_task_folder_is_found_through_agent2rl_tasks(tmp_path: Path, monkeypatch) -> None:
    folder = tmp_path / "mytask"
    folder.mkdir()
    (folder / "task.toml").write_text(
        'name = "mytask"\nevaluator = "math_answer"\n[data]\nsource = "files"\n'
        'train_file = "train.jsonl"\neval_file = "eval.jsonl"\n'
    )
    (folder / "description.md").write_text("# mine\n")
    (folder / "train.jsonl").write_text('{"question": "q", "answer": "#### 1"}\n')
    (folder / "eval.jsonl").write_text('{"question": "r", "answer": "#### 2"}\n')
    monkeypatch.setenv("AGENT2RL_TASKS", str(tmp_path))
    assert discover()["mytask"] == folder
    assert load_task("mytask").load_split("eval") == [{"question": "r", "answer": "#### 2"}]


def test_a_malformed_task_toml_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "task.toml").write_text("name = ")
    (tmp_path / "description.md").write_text("x")
    with pytest.raises(TaskError, match="task.toml is not valid TOML"):
        load_task(tmp_path)
