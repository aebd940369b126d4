"""Labels that say what is known (issue 43, 4), each as a reader meets it.

Real run folders (run.db through RunStore, report.md and the page rendered from them), the real
CLI, the real GSM8K prompt rendered by the grader's own rules and the tiny model's chat template.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from support.runs import cli
from support.synthetic import make_run

from agent2rl_tui.record.contamination import ContaminationResult, write_contamination
from agent2rl_tui.record.store import RunStore
from agent2rl_tui.review.html_report import render_html
from agent2rl_tui.review.index import summarize
from agent2rl_tui.review.question import last_user_turn
from agent2rl_tui.review.report import render_markdown, write_report
from agent2rl_tui.review.significance import Comparison, p_text


def test_a_p_value_below_the_fourth_decimal_is_not_written_as_zero() -> None:
    assert p_text(3e-9) == "p < 0.0001" and p_text(0.00012) == "p = 0.0001" and p_text(0.5) == "p = 0.5000"
    c = Comparison(100, 41.0, 31.0, 52.0, "better", p_value=2e-12, gained=42, lost=1)
    assert c.describe() == "+41.00 points [+31.00, +52.00] better (100 items, McNemar p < 0.0001)"


def test_the_eval_limit_and_seed_are_said_where_the_score_is(tmp_path: Path) -> None:
    run = make_run(tmp_path, "20261122T233320-arith-example", scores=(44.0,))
    with RunStore.of_run(run) as store:
        store.update_run(config_json=json.dumps({"task_folder": "tasks/arith", "eval_limit": 10, "eval_seed": 4242}))
    report = write_report(run)
    assert (report.eval_limit, report.eval_seed) == (10, 4242)
    assert "- eval\\: first 10 items (--eval-limit), draw seed 4242" in render_markdown(report)
    assert "first 10 items (--eval-limit), draw seed 4242" in render_html(run, report)
    shown = cli("run", "show", str(run)).stdout
    assert "eval: first 10 items (--eval-limit), draw seed 4242" in shown


def test_nothing_checked_is_not_called_clean(tmp_path: Path) -> None:
    run = make_run(tmp_path, "20261122T233320-arith-example", scores=(44.0,))
    write_contamination(run, ContaminationResult(eval_items=100, checkable_items=0, files_scanned=3))
    report = write_report(run)
    text = render_markdown(report)
    assert "- contamination check: not checked (no checkable items" in text and "clean (0" not in text
    assert "not checked (no checkable items" in render_html(run, report)
    write_contamination(run, ContaminationResult(eval_items=100, checkable_items=100, files_scanned=3))
    assert "- contamination check: clean (100 eval items checked against 3 file(s))" in render_markdown(write_report(run))


def test_a_run_without_a_valid_submission_is_marked(tmp_path: Path) -> None:
    silent = make_run(tmp_path, "20261122T233320-arith-silent", scores=())
    live = make_run(tmp_path, "20261122T233321-arith-live", scores=(), status="running", heartbeat=time.time())
    assert "without a valid submission" in summarize(silent).flags
    assert "without a valid submission" not in summarize(live).flags  # still going: nothing to say yet
    listed = cli("runs", root=tmp_path).stdout
    assert next(x for x in listed.splitlines() if "silent" in x).count("without a valid submission") == 1


def test_the_items_question_is_the_last_user_turn_of_gsm8ks_four_shot_prompt(prepared_data: Path,
                                                                             tiny_model: Path) -> None:
    from agent2rl_tui.tasks import grading_rules as rules
    from agent2rl_tui.tasks.modelfiles import load_tokenizer
    from agent2rl_tui.tasks.registry import load_task

    task = load_task("gsm8k")
    spec = task.grading_spec(task.settings_for(None))  # the reference profile: four worked examples first
    tok = load_tokenizer(tiny_model)
    for item in task.load_split("eval")[:5]:
        prompt = rules.render(tok, item, spec)
        question = last_user_turn(prompt)
        assert item["question"] in question and prompt.count("Question:") == 5
        assert question.count("Question:") == 1 and question.endswith("Answer:")
    assert last_user_turn("Q: 1+1?\nA: 2\n\nQ: 2+2?\nA:") == "Q: 2+2?\nA:"  # a plain few-shot prompt
    assert last_user_turn("just one line") == "just one line"


@pytest.mark.asyncio
async def test_the_run_header_shows_the_eval_limit_and_seed(tmp_path: Path) -> None:
    from support.tui import plain, settle
    from textual.widgets import Static

    from agent2rl_tui.ui.app import Agent2RLApp
    from agent2rl_tui.ui.screens.run import RunScreen

    run = make_run(tmp_path, "20261122T233320-arith-example", scores=(44.0,))
    with RunStore.of_run(run) as store:
        store.update_run(config_json=json.dumps({"task_folder": "tasks/arith", "eval_limit": 10, "eval_seed": 7}))
    app = Agent2RLApp(root=tmp_path, open_run=run)
    async with app.run_test(size=(200, 48)) as pilot:
        await settle(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.ready, what="the Run screen")
        assert "eval: first 10 items (--eval-limit), draw seed 7" in plain(app.screen.query_one("#budget", Static))


def test_a_process_trains_when_the_script_it_runs_is_a_trainer_not_when_its_shell_names_one() -> None:
    from agent2rl_tui.review.iterations import runs_training

    assert runs_training("/usr/bin/python3 -u code/sft.py --model models/x")
    assert runs_training("torchrun --nproc_per_node 2 train.py")
    assert not runs_training("bash -c set -e; printf '%s' \"$X\" > code/grpo.py; python code/sft.py")
    assert not runs_training("python -c import trl")
    assert not runs_training("python code/eval.py")


def test_training_curves_are_read_from_the_agents_output_as_hostile_text() -> None:
    """Issue 43 (1): trainers' log dicts (numbers or, as recent transformers writes them, strings)
    become series; a line that looks like one and does not parse is skipped and counted; nothing runs."""
    from agent2rl_tui.review.curves import MAX_LINE, curves_of

    lines = [(60.0, "{'loss': '1.183', 'grad_norm': '1.227', 'learning_rate': '0.002', 'epoch': '5.263'}"),
             (120.0, "step 2 {'loss': 0.5606, 'learning_rate': 0.002}\nnoise {not a dict}"),
             (150.0, "{'loss': __import__('os').system('touch /tmp/pwned')}"),  # not a literal: skipped
             (170.0, "{'loss': nan}"), (175.0, "{'reward': float('inf')}"),
             (180.0, "{'reward': 0.27, 'kl': 0.02, 'completions/mean_length': 7.5}"),
             (190.0, "{'loss': 0.1, " + "'x': 1, " * MAX_LINE + "}")]  # past the cap: never parsed whole
    curves = curves_of(lines, start=0.0)
    assert curves.series["loss"] == [(1.0, 1.183), (2.0, 0.5606)]
    assert curves.series["learning_rate"] == [(1.0, 0.002), (2.0, 0.002)]
    assert curves.series["reward"] == [(3.0, 0.27)] and curves.series["kl"] == [(3.0, 0.02)]
    assert curves.series["completions/mean_length"] == [(3.0, 7.5)]
    assert curves.skipped == 3 and not Path("/tmp/pwned").exists()
