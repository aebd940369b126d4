"""Reviewing runs graded under prompt profiles: the profile and our stricter reading in the
Run screen, the Items screen, the report, and Compare, which never mixes two profiles.

The runs are synthetic folders written through the project's store; their per-item results
and score settings come from the real evaluator judging chosen replies, as the grader writes them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.synthetic import make_run
from support.tui import plain, settle, table_rows
from textual.widgets import DataTable, Static

from agent2rl_tui.grader.evaluators.math_answer import MathAnswerEvaluator
from agent2rl_tui.record.store import RunStore
from agent2rl_tui.review.compare import compare, profile_notes
from agent2rl_tui.review.index import summarize
from agent2rl_tui.review.report import build_report, render_markdown
from agent2rl_tui.ui.app import Agent2RLApp
from agent2rl_tui.ui.screens.compare import CompareScreen
from agent2rl_tui.ui.screens.items import ItemsScreen
from agent2rl_tui.ui.screens.run import RunScreen
from agent2rl_tui.ui.widgets.virtual_table import VirtualTable

REFERENCE = {"prompt_profile": "reference", "extraction": "opencompass-gsm8k", "strip_reasoning": True,
             "prompt_template": "Question: {question}\nLet's think step by step\nAnswer:"}
GOLDS = ["1,000", "12", "7", "2,500", "40"]
REPLIES = ["The answer is 1,000", "The answer is 12", "The answer is 8", "The answer is 2500", "So 1,040 - 1,000 = 40"]


def graded_run(root: Path, name: str, profile: str) -> Path:
    """A gsm8k run whose submission 1 holds the evaluator's verdicts on REPLIES under ``profile``."""
    run = make_run(root, name, task="gsm8k", scores=(40.0,), n_items=len(GOLDS))
    spec = REFERENCE if profile == "reference" else {"prompt_profile": profile, "extraction": "hashes",
                                                    "prompt_template": "{question}"}
    ev = MathAnswerEvaluator(spec)
    items = [{"question": f"q{i}", "answer": f"#### {g}"} for i, g in enumerate(GOLDS)]
    results = ev.judge_all(items, [f"p{i}" for i in range(len(items))], REPLIES)
    with (run / "evals" / "1" / "results.jsonl").open("w") as fh:
        for r in results:
            fh.write(json.dumps(r.to_dict()) + "\n")
    with RunStore.of_run(run) as store:
        for sub_id in (0, 1):
            store.update_submission(sub_id, settings_json=json.dumps(
                {"evaluator": "math_answer", **spec, **(ev.details(results) if sub_id == 1 else {})}))
        store.update_submission(1, score=ev.score(results), n_correct=sum(r.correct for r in results))
    return run


@pytest.fixture
def profiled_root(tmp_path: Path) -> Path:
    graded_run(tmp_path, "20261122T233320-gsm8k-example", "reference")
    graded_run(tmp_path, "20261122T233321-gsm8k-example", "reference")
    graded_run(tmp_path, "20261122T233322-gsm8k-example", "zero-shot")
    return tmp_path


def test_compare_and_the_report_keep_profiles_apart(profiled_root: Path) -> None:
    runs = [summarize(p) for p in sorted(profiled_root.iterdir())]
    assert [r.prompt_profile for r in runs] == ["reference", "reference", "zero-shot"]
    groups = compare(runs)
    assert [(g.task, g.prompt_profile, g.runs) for g in groups] == [("gsm8k", "reference", 2), ("gsm8k", "zero-shot", 1)]
    # Under the reference rule "1,000" is 000 and "2500" / "So 1,040 - 1,000 = 40" are read as 2500 and 40.
    assert groups[0].best_mean == pytest.approx(60.0) and groups[1].best_mean == pytest.approx(80.0)
    (note,) = profile_notes(groups)
    assert "gsm8k" in note and "reference, zero-shot" in note and "different measurements" in note
    assert profile_notes(groups[:1]) == []
    report = build_report(runs[0].path)
    assert report.prompt_profile == "reference"
    strict = report.submissions[0].strict
    assert strict is not None and (strict.score, strict.n_differ, strict.differ) == (80.0, 1, [0])
    md = render_markdown(report)
    assert "(prompt profile reference)" in md and "- #1: 80.00 (1 item(s) read differently)" in md


@pytest.mark.asyncio
async def test_the_tui_shows_the_profile_and_both_readings(profiled_root: Path) -> None:
    run_dir = profiled_root / "20261122T233320-gsm8k-example"
    app = Agent2RLApp(root=profiled_root, open_run=run_dir)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.ready, what="the Run screen")
        run: RunScreen = app.screen
        assert "prompts reference" in plain(run.query_one("#budget", Static))
        subs = run.query_one("#subs", VirtualTable)
        await settle(pilot, lambda: subs.row_count == 2, what="the submissions")
        subs.focus()
        subs.move_to(1)
        await pilot.press("i")
        await settle(pilot, lambda: isinstance(app.screen, ItemsScreen), what="the items of submission 1")
        items = app.screen
        title = plain(items.query_one("#items-title", Static))
        assert "3 of 5 items correct (our stricter reading: 4, 1 differ)" in title
        table = items.query_one("#items-table", VirtualTable)
        detail = plain(items.query_one("#item-text", Static))
        assert "extracted '000'" in detail and "our stricter reading: '1,000', correct (differs" in detail
        for _ in range(5):
            await pilot.press("f")
        assert "filter: readings differ (1 shown)" in plain(items.query_one("#items-title", Static))
        assert [r[0] for r in table_rows(table)] == ["0"]
        await pilot.press("f")
        assert "filter: all" in plain(items.query_one("#items-title", Static))


@pytest.mark.asyncio
async def test_compare_warns_when_a_task_was_graded_under_two_profiles(profiled_root: Path) -> None:
    runs = [summarize(p) for p in sorted(profiled_root.iterdir())]
    app = Agent2RLApp(root=profiled_root)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause(0.2)
        app.push_screen(CompareScreen(runs))
        await settle(pilot, lambda: isinstance(app.screen, CompareScreen), what="Compare")
        rows = table_rows(app.screen.query_one("#compare", DataTable))
        assert [(r[0], r[1], r[6]) for r in rows] == [("gsm8k", "reference", "2"), ("gsm8k", "zero-shot", "1")]
        assert "different measurements" in plain(app.screen.query_one("#compare-notes", Static))
