"""GSM8K answer extraction and comparison, on strings and on the real GSM8K test file."""

from __future__ import annotations

import json
import random

import pytest
from support.paths import SHARED_DATA

from agent2rl_tui.grader.evaluators import get_evaluator
from agent2rl_tui.tasks.grading_rules import answers_match
from agent2rl_tui.tasks.grading_rules import extract_hashes as extract_answer


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("#### 42", "42"),
        ("so 3 + 4 = 7\n#### 7", "7"),
        ("The answer is 1,234 apples", "1,234"),
        ("costs $18 and then 20", "20"),
        ("#### -5", "-5"),
        ("#### $1,000.", "$1,000"),
        ("no number here", None),
        ("first #### 3 then #### 4", "3"),
    ],
)
def test_extract_answer_follows_the_gsm8k_rule(text: str, expected: str | None) -> None:
    assert extract_answer(text) == expected


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [("1,000", "1000", True), ("$18", "18", True), ("7.0", "7", True), ("7.", "7", True),
     ("7.5", "7", False), ("-3", "3", False), (None, "3", False)],
)
def test_numbers_compare_by_value(a, b, same: bool) -> None:
    assert answers_match(a, b) is same


def test_gsm8k_reference_answers_score_100_and_shuffled_ones_do_not() -> None:
    items = [json.loads(line) for line in (SHARED_DATA / "gsm8k" / "test.jsonl").open()]
    assert len(items) == 1319
    ev = get_evaluator("math_answer")
    results = [ev.judge(i, it, "", it["answer"]) for i, it in enumerate(items)]
    assert ev.score(results) == 100.0
    shuffled = [it["answer"] for it in items]
    random.Random(0).shuffle(shuffled)
    wrong = [ev.judge(i, it, "", out) for i, (it, out) in enumerate(zip(items, shuffled))]
    assert ev.score(wrong) < 10.0
    assert ev.prompt(items[0]) == [{"role": "user", "content": items[0]["question"]}]


def test_fewshot_prompts_in_chat_and_completion_form(prepared_data) -> None:  # noqa: ANN001
    from dataclasses import replace

    from agent2rl_tui.tasks.registry import load_task

    task = load_task("gsm8k")
    train, item = task.load_split("train"), task.load_split("eval")[0]
    zero_shot = task.settings_for("zero-shot")
    chat = get_evaluator("math_answer", task.grading_spec(replace(zero_shot, fewshot=8))).prompt(item)
    assert [t["role"] for t in chat] == ["user", "assistant"] * 8 + ["user"]
    assert chat[1]["content"] == train[0]["answer"] and chat[-1]["content"].startswith(item["question"])
    plain = get_evaluator("math_answer", task.grading_spec(replace(zero_shot, fewshot=2, chat=False))).prompt(item)
    assert isinstance(plain, str) and plain.index(train[0]["question"]) < plain.index(item["question"])
