"""The run row and its config, typed (record/runrecord.py): what ``run start`` writes reads back
the same, old and damaged records read with the defaults, and every reader sees one default."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent2rl_tui.grader.server.config import GraderConfig
from agent2rl_tui.record.evalset import run_eval_seed
from agent2rl_tui.record.runconfig import DEFAULT_MAX_QUEUED, RunConfig
from agent2rl_tui.record.runrecord import RunRecord
from agent2rl_tui.record.store import RunStatus, RunStore, StoreError
from agent2rl_tui.run.lifecycle import create_run
from agent2rl_tui.run.request import RunRequest
from agent2rl_tui.tasks.registry import DEFAULT_EVAL_TIMEOUT_S, EVAL_SEED_KEY, load_task


def test_a_new_runs_config_reads_back_as_written(tiny_model: Path, tmp_path: Path) -> None:
    run_dir = create_run(RunRequest.of(task="arith", agent="command", command="true", model=tiny_model, budget_s=60,
                                    root=tmp_path, eval_limit=3, engine={"engine": "transformers"}, eval_seed=7,
                                    read_only_paths=(str(tmp_path),), agent_env={"SECRET_TOKEN": "s3cr3t"}))
    with RunStore.of_run(run_dir) as store:
        record = store.run()
        text = record.config_json
    config = record.config
    assert isinstance(record, RunRecord) and record.status == RunStatus.CREATED and record.budget_s == 60
    assert config.task_folder == str(load_task("arith").folder)
    assert config.eval_limit == 3 and config.engine == {"engine": "transformers"} and config.eval_seed == 7
    assert config.read_only_paths == (str(tmp_path.resolve()),)
    assert config.agent_env == {"SECRET_TOKEN": "<not recorded>"} and "s3cr3t" not in text
    # One way in, one way out: the JSON written is the JSON the type gives back, key for key.
    assert config.dumps() == text
    assert list(json.loads(text)) == [*(k for k in json.loads(text) if k != EVAL_SEED_KEY), EVAL_SEED_KEY]
    # The grader and the eval set read the same settings through it.
    grader = GraderConfig.from_run(run_dir)
    assert grader.eval_limit == 3 and grader.eval_seed == 7 and grader.max_queued == DEFAULT_MAX_QUEUED
    assert grader.eval_timeout_s == config.eval_timeout_s
    assert run_eval_seed(run_dir) == 7


def test_an_old_or_damaged_config_reads_with_the_defaults() -> None:
    for text in (None, "", "not json", "[1, 2]", "null", '{"eval_timeout_s": "soon"}', "[" * 100_000):
        config = RunConfig.from_json(text)
        assert config.eval_timeout_s == DEFAULT_EVAL_TIMEOUT_S and config.contain and config.meter
        assert config.eval_seed is None and config.queue_limit == DEFAULT_MAX_QUEUED
    mistyped = RunConfig.from_json(json.dumps({
        "task_folder": 3, "eval_limit": "all", "engine": [], "judge": "x", "keep_submissions": "yes",
        "contain": "no", "meter": 0, "read_only_paths": ["/a", 5], "eval_seed": True, "max_queued": 2.5,
        "eval_timeout_s": -4, "gpus": 0}))
    assert mistyped.task_folder == "" and mistyped.eval_limit is None and mistyped.engine == {}
    assert mistyped.judge is None and mistyped.keep_submissions is False
    assert mistyped.contain is True and mistyped.meter is True  # only an explicit false turns them off
    assert mistyped.read_only_paths == ("/a",) and mistyped.eval_seed is None and mistyped.queue_limit == 4
    assert mistyped.eval_timeout_s == DEFAULT_EVAL_TIMEOUT_S and mistyped.gpus is None


def test_keys_this_release_does_not_know_are_kept_and_knobs_written_only_when_set() -> None:
    written = {"task_folder": "/t", "eval_seed": 1, "from_a_newer_release": {"x": [1]}, "max_queued": 2}
    config = RunConfig.from_json(json.dumps(written))
    assert config.rest == {"from_a_newer_release": {"x": [1]}} and config.queue_limit == 2
    out = config.to_json()
    assert out["from_a_newer_release"] == {"x": [1]} and out["max_queued"] == 2
    assert "train_env" not in out and "max_submission_gib" not in out
    assert RunConfig.from_json(config.dumps()) == config
    knobs = config.replace(max_submission_gib=0.5, train_env={"max_envs": 2})
    assert knobs.max_submission_bytes == 1 << 29 and RunConfig.from_json(knobs.dumps()).train_env == {"max_envs": 2}


def test_the_store_refuses_a_column_the_run_table_lacks(tmp_path: Path) -> None:
    with RunStore(tmp_path / "run.db", create=True) as store:
        with pytest.raises(StoreError, match="holds no run"):
            store.run()
        assert store.deadline() == (None, 0.0)
        store.create_run(RunRecord(id="r", task="arith", agent="command", base_model="m", base_model_source="/m",
                                   budget_s=60, grace_s=5, status=RunStatus.CREATED, created_at=1.0))
        with pytest.raises(StoreError, match="no column budget"):
            store.update_run(budget=3)
        store.update_run(deadline=100.0)
        assert store.deadline() == (100.0, 5.0)
        store.set_config(RunConfig(task_folder="/t", eval_timeout_s=9.0))
        assert store.config().eval_timeout_s == 9.0 and store.run().config.task_folder == "/t"


def test_a_row_with_columns_of_a_newer_schema_still_reads(tmp_path: Path) -> None:
    with RunStore(tmp_path / "run.db", create=True) as store:
        store.conn.execute("ALTER TABLE run ADD COLUMN from_the_future TEXT")
        store.create_run(RunRecord(id="r", task="arith", agent="command", base_model="m", base_model_source="/m",
                                   budget_s=60, grace_s=5, status=RunStatus.CREATED, created_at=1.0))
        assert store.run().id == "r"
