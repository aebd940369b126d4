"""A whole run of the example agent on a GSM8K slice: real data, the real grader, the tiny model,
the reference prompt profile (AutoRL-Bench's 4-shot OpenCompass prompt, the task's default), at the
agent's default sizes under a 90-second budget: one run, read by both tests (a
whole GSM8K run is about 80 s of CPU)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support.runs import cli

from agent2rl_tui.record.store import RunStore

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def gsm8k_run(prepared_data: Path, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("gsm8k") / "runs"
    proc = cli("run", "start", "--task", "gsm8k", "--agent", "example", "--model", str(tiny_model),
               "--budget", "90s", "--grace", "5s", "--eval-limit", "4", root=root, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return Path(re.search(r"run folder: (\S+)", proc.stdout).group(1))


def test_example_agent_on_a_gsm8k_slice_with_the_reference_prompts(gsm8k_run: Path, prepared_data: Path) -> None:
    run = gsm8k_run
    with RunStore.of_run(run) as store:
        baseline = store.baseline()
        subs = store.submissions(kind="agent")
    assert baseline.status == "scored" and baseline.n_items == 4
    assert subs and subs[0].status == "scored"
    settings = json.loads(subs[0].settings_json)
    assert settings["evaluator"] == "math_answer" and settings["max_new_tokens"] == 512
    assert settings["prompt_profile"] == "reference" and settings["extraction"] == "opencompass-gsm8k"
    assert settings["engine_choice"].startswith("auto: ")  # how the score was produced is recorded
    strict = settings["strict"]  # our stricter reading, beside the reference's score
    assert 0 <= strict["n_differ"] <= 4 and 0.0 <= strict["score"] <= 100.0
    items = [json.loads(line) for line in (run / "evals" / "1" / "results.jsonl").open()]
    assert len(items) == 4
    prompt = items[0]["prompt"]  # four worked examples as chat turns, then the question in their form
    assert prompt.count("<|im_start|>user\nQuestion: ") == 5 and prompt.count("The answer is ") == 4
    assert prompt.endswith("Question: " + json.loads((prepared_data / "gsm8k" / "eval.jsonl").open().readline())[
        "question"] + "\nLet's think step by step\nAnswer:<|im_end|>\n<|im_start|>assistant\n")
    assert items[0]["gold"] == "18" and "strict" in items[0]["extra"]
    # The agent was told the profile, got the grader's rules, and trained on the grader's prompts.
    ws = run / "workspace"
    assert "prompt profile `reference`" in (ws / "description.md").read_text()
    assert json.loads((ws / "data" / "grading.json").read_text())["prompt_profile"] == "reference"
    assert "prompts: the grader's profile 'reference' (4 worked examples" in (run / "logs" / "agent.log").read_text()
    with (run / "workspace" / "data" / "train.jsonl").open(encoding="utf-8") as fh:
        train = [json.loads(line) for line in fh]
    assert len(train) == 7473  # the agent gets the train split, never the test split
    assert not any("Janet’s ducks" in row["question"] for row in train)
    # The example agent trains on the train split only: the contamination check finds nothing,
    # though every eval item is long enough to be checked.
    contamination = json.loads((run / "report" / "contamination.json").read_text())
    assert contamination["items"] == [] and contamination["checkable_items"] == 1319
    assert contamination["files_scanned"] > 0


def test_the_example_agent_fits_its_work_to_a_short_budget(gsm8k_run: Path) -> None:
    """Issue 41 (6): at its default sizes (1,000 SFT steps, then 400 of GRPO) the example agent ended a
    4-minute GSM8K run without a submission on a laptop's CPU. It reads the budget and gives each
    stage its share (timebox.py stops the training and saves what there is): every submission goes
    in before the deadline, whatever the machine's speed."""
    run = gsm8k_run
    with RunStore.of_run(run) as store:
        record = store.run()
        subs = store.submissions(kind="agent")
    log = (run / "logs" / "agent.log").read_text()
    assert "SFT: training until" in log and "time is up: stopping after step" in log, log[-3000:]
    assert record.end_reason != "timeout_no_submission" and subs, (record.end_reason, log[-3000:])
    deadline = record.budget_start + record.budget_s
    assert all(s.received_at <= deadline for s in subs)
    assert subs[0].status == "scored"  # the SFT model, saved when its time was up, is graded
