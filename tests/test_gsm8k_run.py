"""A whole run of the example agent on a GSM8K slice: real data, the real grader, the tiny model."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import cli

from agent2rl_tui.record.store import RunStore

pytestmark = pytest.mark.slow


def test_example_agent_on_a_gsm8k_slice(prepared_data: Path, tiny_model: Path, tmp_path: Path) -> None:
    proc = cli("run", "start", "--task", "gsm8k", "--agent", "example", "--model", str(tiny_model),
               "--budget", "5m", "--eval-limit", "12",
               "--env", "EXAMPLE_SFT_STEPS=20", "--env", "EXAMPLE_GRPO_STEPS=2", "--env", "EXAMPLE_MAX_COMPLETION=24",
               root=tmp_path / "runs", timeout=500)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = Path(re.search(r"run folder: (\S+)", proc.stdout).group(1))
    with RunStore.of_run(run) as store:
        baseline = store.baseline()
        subs = store.submissions(kind="agent")
    assert baseline.status == "scored" and baseline.n_items == 12
    assert [s.status for s in subs] == ["scored", "scored"]
    settings = json.loads(subs[0].settings_json)
    assert settings["evaluator"] == "math_answer" and settings["max_new_tokens"] == 512
    assert settings["engine_choice"].startswith("auto: ")  # how the score was produced is recorded
    items = [json.loads(line) for line in (run / "evals" / "1" / "results.jsonl").open()]
    assert len(items) == 12
    assert "Janet" in items[0]["prompt"] and "'#### <number>'" in items[0]["prompt"]
    assert items[0]["gold"] == "18"
    with (run / "workspace" / "data" / "train.jsonl").open(encoding="utf-8") as fh:
        train = [json.loads(line) for line in fh]
    assert len(train) == 7473  # the agent gets the train split, never the test split
    assert not any("Janet’s ducks" in row["question"] for row in train)
    # The example agent trains on the train split only: the contamination check finds nothing,
    # though every eval item is long enough to be checked.
    contamination = json.loads((run / "report" / "contamination.json").read_text())
    assert contamination["items"] == [] and contamination["checkable_items"] == 1319
    assert contamination["files_scanned"] > 0
