# ruff: noqa: E501 - the reference's prompt texts are kept verbatim, one string per turn
"""Prompt profiles: the reference's prompts character for character, its answer extraction case
by case, our stricter reading beside its score, prompts that do not fit the context, and the
workspace's copy of the grader's rules.

The expected texts are the reference's own: OpenCompass's dataset configs (copied below from
``gsm8k_gen_1d7fe4`` and ``humaneval_openai_sample_evals_gen_dcae0e``) turned into chat turns
the way its ``VLLMwithChatTemplate`` does (``_convert_chat_messages``: HUMAN -> user, BOT ->
assistant, consecutive turns of one role merged with a newline), then rendered through the
model's chat template with ``add_generation_prompt=True``.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.runs import cli

from agent2rl_tui.grader.engines.base import EngineError
from agent2rl_tui.grader.engines.hf import TransformersEngine
from agent2rl_tui.grader.evaluators import evaluator_for
from agent2rl_tui.grader.evaluators.humaneval import HumanEvalEvaluator
from agent2rl_tui.grader.evaluators.math_answer import MathAnswerEvaluator
from agent2rl_tui.run.lifecycle import create_run
from agent2rl_tui.run.request import RunRequest
from agent2rl_tui.tasks import grading_rules as rules
from agent2rl_tui.tasks.modelfiles import load_tokenizer
from agent2rl_tui.tasks.registry import load_task

# opencompass/configs/datasets/gsm8k/gsm8k_gen_1d7fe4.py, gsm8k_infer_cfg's template round, verbatim
GSM8K_REFERENCE_ROUND = [
    dict(role='HUMAN',
         prompt="Question: Angelo and Melanie want to plan how many hours over the next week they should study together for their test next week. They have 2 chapters of their textbook to study and 4 worksheets to memorize. They figure out that they should dedicate 3 hours to each chapter of their textbook and 1.5 hours for each worksheet. If they plan to study no more than 4 hours each day, how many days should they plan to study total over the next week if they take a 10-minute break every hour, include 3 10-minute snack breaks each day, and 30 minutes for lunch each day?\nLet's think step by step\nAnswer:"),
    dict(role='BOT',
         prompt='Angelo and Melanie think they should dedicate 3 hours to each of the 2 chapters, 3 hours x 2 chapters = 6 hours total.\nFor the worksheets they plan to dedicate 1.5 hours for each worksheet, 1.5 hours x 4 worksheets = 6 hours total.\nAngelo and Melanie need to start with planning 12 hours to study, at 4 hours a day, 12 / 4 = 3 days.\nHowever, they need to include time for breaks and lunch. Every hour they want to include a 10-minute break, so 12 total hours x 10 minutes = 120 extra minutes for breaks.\nThey also want to include 3 10-minute snack breaks, 3 x 10 minutes = 30 minutes.\nAnd they want to include 30 minutes for lunch each day, so 120 minutes for breaks + 30 minutes for snack breaks + 30 minutes for lunch = 180 minutes, or 180 / 60 minutes per hour = 3 extra hours.\nSo Angelo and Melanie want to plan 12 hours to study + 3 hours of breaks = 15 hours total.\nThey want to study no more than 4 hours each day, 15 hours / 4 hours each day = 3.75\nThey will need to plan to study 4 days to allow for all the time they need.\nThe answer is 4\n'),
    dict(role='HUMAN',
         prompt="Question: Mark's basketball team scores 25 2 pointers, 8 3 pointers and 10 free throws.  Their opponents score double the 2 pointers but half the 3 pointers and free throws.  What's the total number of points scored by both teams added together?\nLet's think step by step\nAnswer:"),
    dict(role='BOT',
         prompt="Mark's team scores 25 2 pointers, meaning they scored 25*2= 50 points in 2 pointers.\nHis team also scores 6 3 pointers, meaning they scored 8*3= 24 points in 3 pointers\nThey scored 10 free throws, and free throws count as one point so they scored 10*1=10 points in free throws.\nAll together his team scored 50+24+10= 84 points\nMark's opponents scored double his team's number of 2 pointers, meaning they scored 50*2=100 points in 2 pointers.\nHis opponents scored half his team's number of 3 pointers, meaning they scored 24/2= 12 points in 3 pointers.\nThey also scored half Mark's team's points in free throws, meaning they scored 10/2=5 points in free throws.\nAll together Mark's opponents scored 100+12+5=117 points\nThe total score for the game is both team's scores added together, so it is 84+117=201 points\nThe answer is 201\n"),
    dict(role='HUMAN',
         prompt="Question: Bella has two times as many marbles as frisbees. She also has 20 more frisbees than deck cards. If she buys 2/5 times more of each item, what would be the total number of the items she will have if she currently has 60 marbles?\nLet's think step by step\nAnswer:"),
    dict(role='BOT',
         prompt="When Bella buys 2/5 times more marbles, she'll have increased the number of marbles by 2/5*60 = 24\nThe total number of marbles she'll have is 60+24 = 84\nIf Bella currently has 60 marbles, and she has two times as many marbles as frisbees, she has 60/2 = 30 frisbees.\nIf Bella buys 2/5 times more frisbees, she'll have 2/5*30 = 12 more frisbees.\nThe total number of frisbees she'll have will increase to 30+12 = 42\nBella also has 20 more frisbees than deck cards, meaning she has 30-20 = 10 deck cards\nIf she buys 2/5 times more deck cards, she'll have 2/5*10 = 4 more deck cards.\nThe total number of deck cards she'll have is 10+4 = 14\nTogether, Bella will have a total of 14+42+84 = 140 items\nThe answer is 140\n"),
    dict(role='HUMAN',
         prompt="Question: A group of 4 fruit baskets contains 9 apples, 15 oranges, and 14 bananas in the first three baskets and 2 less of each fruit in the fourth basket. How many fruits are there?\nLet's think step by step\nAnswer:"),
    dict(role='BOT',
         prompt='For the first three baskets, the number of apples and oranges in one basket is 9+15=24\nIn total, together with bananas, the number of fruits in one basket is 24+14=38 for the first three baskets.\nSince there are three baskets each having 38 fruits, there are 3*38=114 fruits in the first three baskets.\nThe number of apples in the fourth basket is 9-2=7\nThere are also 15-2=13 oranges in the fourth basket\nThe combined number of oranges and apples in the fourth basket is 13+7=20\nThe fourth basket also contains 14-2=12 bananas.\nIn total, the fourth basket has 20+12=32 fruits.\nThe four baskets together have 32+114=146 fruits.\nThe answer is 146\n'),
    dict(role='HUMAN',
         prompt="Question: {question}\nLet's think step by step\nAnswer:"),
]

# opencompass/configs/datasets/humaneval/humaneval_openai_sample_evals_gen_dcae0e.py, verbatim
HUMANEVAL_REFERENCE_ROUND = [
    dict(role='HUMAN',
         prompt='Read the following function signature and docstring, and fully implement the function described. Your response should only contain the code for this function.\n{prompt}'),
]

# Qwen2.5-Instruct's chat template without its tool branch: a default system turn when none is given.
QWEN25_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}"
    "{%- endif %}{%- for message in messages %}{%- if not (message.role == 'system' and loop.first) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def opencompass_turns(round_: list[dict[str, str]], item: dict) -> list[dict[str, str]]:
    """The template's placeholders filled from the item, then OpenCompass's _convert_chat_messages."""
    turns: list[dict[str, str]] = []
    for entry in round_:
        text = entry["prompt"]
        for key, value in item.items():
            text = text.replace("{" + key + "}", str(value))
        role = {"HUMAN": "user", "BOT": "assistant", "SYSTEM": "system"}[entry["role"]]
        if not text:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"] += "\n" + text
        else:
            turns.append({"role": role, "content": text})
    return turns


@pytest.fixture(scope="module")
def engine(tiny_model: Path) -> TransformersEngine:
    e = TransformersEngine()
    e.load(tiny_model)
    return e


def test_gsm8k_reference_prompts_are_opencompass_rendering_character_for_character(
        prepared_data: Path, engine: TransformersEngine) -> None:
    task = load_task("gsm8k")
    assert task.inference.prompt_profile == "reference"  # the task's default
    ev = evaluator_for(task)
    tok = engine.tokenizer
    for item in task.load_split("eval")[:25]:
        expected = tok.apply_chat_template(opencompass_turns(GSM8K_REFERENCE_ROUND, item), tokenize=False,
                                           add_generation_prompt=True)
        assert engine.render(ev.prompt(item), require_template=True) == expected
    # Through another template too (Qwen2.5's adds a system turn of its own).
    item = task.load_split("eval")[0]
    tok.chat_template, saved = QWEN25_TEMPLATE, tok.chat_template
    try:
        ours = engine.render(ev.prompt(item), require_template=True)
        assert ours == tok.apply_chat_template(opencompass_turns(GSM8K_REFERENCE_ROUND, item), tokenize=False,
                                               add_generation_prompt=True)
    finally:
        tok.chat_template = saved
    assert ours.startswith("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant."
                           "<|im_end|>\n<|im_start|>user\nQuestion: Angelo and Melanie want to plan")
    assert ours.endswith(f"<|im_start|>user\nQuestion: {item['question']}\nLet's think step by step\nAnswer:"
                         "<|im_end|>\n<|im_start|>assistant\n")
    assert ours.count("<|im_start|>assistant\nAngelo and Melanie think") == 1 and ours.count("<|im_start|>") == 11
    s = task.inference  # the reference's decoding, as recorded with every score
    assert (s.chat, s.temperature, s.max_new_tokens, s.batch_size, s.stop) == (True, 0.0, 512, 16, ())
    assert s.strip_reasoning and s.require_chat_template and s.extraction == "opencompass-gsm8k"
    assert task.engine.max_model_len == 32768


def test_humaneval_reference_prompts_are_opencompass_rendering_character_for_character(
        prepared_data: Path, engine: TransformersEngine) -> None:
    task = load_task("humaneval")
    ev = evaluator_for(task)
    items = task.load_split("eval")
    assert items[0]["task_id"] == "HumanEval/82" and len(items) == 82
    for item in items[:10]:
        turns = opencompass_turns(HUMANEVAL_REFERENCE_ROUND, item)
        assert ev.prompt(item) == turns
        assert engine.render(ev.prompt(item), require_template=True) == engine.tokenizer.apply_chat_template(
            turns, tokenize=False, add_generation_prompt=True)
    assert ev.prompt(items[0])[0]["content"] == (
        "Read the following function signature and docstring, and fully implement the function described. "
        "Your response should only contain the code for this function.\n" + items[0]["prompt"])
    s = task.inference
    assert (s.chat, s.temperature, s.max_new_tokens, s.batch_size) == (True, 0.0, 8192, 16)
    assert s.extraction == "opencompass-humaneval-v2" and s.strip_reasoning
    # The earlier prompts stay as a named profile.
    completion = evaluator_for(task, task.settings_for("completion"))
    assert completion.prompt(items[0]) == items[0]["prompt"]


REFERENCE = {"extraction": "opencompass-gsm8k", "strip_reasoning": True}


@pytest.mark.parametrize(
    ("output", "gold", "reference", "reference_right", "ours", "ours_right"),
    [
        # The reply runs on into a question of its own: the reference cuts at the first "Question:".
        ("2 * 9 = 18.\nThe answer is 18\n\nQuestion: Tom has 5 apples and 3 pears", "#### 18", "18", True, "18", True),
        # Thousands separators: the reference reads "1,000" as 000; we read 1000.
        ("So they need 1,000 bricks.\nThe answer is 1,000", "#### 1,000", "000", False, "1,000", True),
        ("The answer is 18.00", "#### 18", "18.00", True, "18.00", True),
        ("The answer is 3.5", "#### 3", "3.5", False, "3.5", False),
        ("It drops by 5.\nThe answer is -5", "#### -5", "-5", True, "-5", True),
        ("The answer is 5.", "#### 5", "5", True, "5", True),
        # Reasoning blocks go first; a lone closing tag keeps what follows it.
        ("<think>It is 7.</think>The answer is 8", "#### 8", "8", True, "8", True),
        ("<think>It is 8.</think>The answer is 7", "#### 8", "7", False, "7", False),
        ("first I think it is 8.</think> Then 3", "#### 3", "3", True, "3", True),
        # The reference takes the last number, even after a "####".
        ("#### 72 because 70 + 2", "#### 72", "2", False, "72", True),
        ("I do not know", "#### 4", "NULL", False, None, False),
    ],
)
def test_gsm8k_answers_read_as_opencompass_reads_them_and_ours_beside(
        output: str, gold: str, reference: str, reference_right: bool, ours: str | None, ours_right: bool) -> None:
    item = {"question": "q", "answer": "worked answer\n" + gold}
    assert rules.read_answer(output, REFERENCE) == reference
    assert rules.is_correct(item, output, REFERENCE) is reference_right
    assert rules.strict_answer(output, REFERENCE) == ours
    result = MathAnswerEvaluator({**REFERENCE, "prompt_template": "{question}"}).judge(0, item, "p", output)
    assert (result.extracted, result.correct) == (reference, reference_right)
    assert result.extra == {"strict": ours, "strict_correct": ours_right}


def test_the_score_is_the_references_and_our_reading_is_recorded_beside_it() -> None:
    ev = MathAnswerEvaluator({**REFERENCE, "prompt_template": "{question}"})
    items = [{"question": str(i), "answer": f"#### {g}"} for i, g in enumerate(["1,000", "12", "7", "2,500"])]
    outputs = ["The answer is 1,000", "The answer is 12", "The answer is 8", "The answer is 2500"]
    results = ev.judge_all(items, ["p"] * 4, outputs)
    assert ev.score(results) == 50.0  # "000" != 1000; 12; 8 != 7; 2500
    strict = ev.details(results)["strict"]
    assert (strict["score"], strict["n_correct"], strict["n_differ"], strict["differ"]) == (75.0, 3, 1, [0])
    assert MathAnswerEvaluator({"prompt_template": "{question}"}).details(results[:0]) == {}


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        ("Here it is:\n```python\ndef f():\n    return 1\n```\nHope it helps.", "def f():\n    return 1\n"),
        ("```\nx = 1\n```", "x = 1\n"),
        ("```py\nfirst\n```\nor\n```py\nsecond\n```", "first\n"),  # the first block
        ("   def f(): return 2", "def f(): return 2"),  # no fence: the reply, left-stripped
        ("```python def f(): pass```", "```python def f(): pass```"),  # no newline after the fence: no block
        ("<think>```python\nbad()\n```</think>\n```python\ngood()\n```", "good()\n"),
    ],
)
def test_humaneval_code_is_taken_as_humaneval_postprocess_v2_takes_it(reply: str, code: str) -> None:
    assert rules.code_from_reply(reply, {"strip_reasoning": True}) == code


def test_humaneval_reference_programs_run_and_our_reading_is_kept_beside(prepared_data: Path) -> None:
    task = load_task("humaneval")
    ev = evaluator_for(task)
    assert isinstance(ev, HumanEvalEvaluator)
    items = task.load_split("eval")[:3]
    def_line = {i["task_id"]: "def " + i["prompt"].split("def ", 1)[1].split("\n", 1)[0] for i in items}
    fenced = [f"```python\n{def_line[i['task_id']]}\n{i['canonical_solution']}```" for i in items]
    body_only = items[1]["canonical_solution"]  # an indented body: left-stripped, the reference's program breaks
    outputs = [fenced[0], body_only, "<think>no</think>\n" + fenced[2]]
    results = ev.judge_all(items, [ev.prompt(i)[0]["content"] for i in items], outputs)
    assert [r.correct for r in results] == [True, False, True]
    assert [r.extra["strict_correct"] for r in results] == [True, True, True]
    assert ev.details(results)["strict"]["n_differ"] == 1 and ev.score(results) == pytest.approx(200 / 3)
    program = rules.program(items[1], body_only, ev.spec)
    assert items[1]["prompt"] + body_only.lstrip() in program and program.endswith(f"check({items[1]['entry_point']})\n")


def test_a_prompt_that_does_not_fit_the_context_is_an_error(prepared_data: Path, tmp_path: Path) -> None:
    from agent2rl_tui.tasks.tinymodel import build_tiny_model

    short = build_tiny_model(tmp_path / "tiny-512", max_positions=512)
    task = load_task("gsm8k")
    engine = TransformersEngine()
    engine.load(short)
    prompt = engine.render(evaluator_for(task).prompt(task.load_split("eval")[0]), require_template=True)
    with pytest.raises(EngineError, match=r"1 of 1 prompts do not fit the model's context of 512 tokens.*"
                                          r"prompt profile 'reference'.*nothing was truncated"):
        engine.generate([prompt], task.inference)
    # The run is refused before it exists, with what to do.
    proc = cli("run", "start", "--task", "gsm8k", "--agent", "command", "--command", "true", "--model", str(short),
               root=tmp_path / "runs")
    assert proc.returncode != 0 and "its context is 512 tokens" in proc.stderr and "--prompt-profile" in proc.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
    proc = cli("run", "start", "--task", "gsm8k", "--agent", "command", "--command", "true", "--model", str(short),
               "--prompt-profile", "eight-shot", root=tmp_path / "runs")
    assert proc.returncode != 0 and "no prompt profile 'eight-shot'" in proc.stderr and "zero-shot" in proc.stderr
    # The zero-shot profile's prompts fit: that run is made, and its record names the profile.
    run_dir = create_run(RunRequest.of(task="gsm8k", agent="command", command="true", model=short, budget_s=60,
                                    root=tmp_path / "runs", prompt_profile="zero-shot"))
    from agent2rl_tui.record.store import RunStore

    with RunStore.of_run(run_dir) as store:
        assert json.loads(store.run().config_json)["prompt_profile"] == "zero-shot"


def test_a_completion_ends_at_the_context(tmp_path: Path) -> None:
    from dataclasses import replace

    from agent2rl_tui.tasks.tinymodel import build_tiny_model

    model = build_tiny_model(tmp_path / "tiny-300", max_positions=300)
    engine = TransformersEngine()
    engine.load(model)
    prompts = [engine.render([{"role": "user", "content": "what is the answer " * 30 + str(i)}]) for i in range(3)]
    used = [len(ids) for ids in engine.tokenizer(prompts, add_special_tokens=False)["input_ids"]]
    assert max(used) < 300
    outputs = engine.generate(prompts, replace(load_task("humaneval").inference, max_new_tokens=8192))
    for out, n in zip(outputs, used):
        assert len(engine.tokenizer(out, add_special_tokens=False)["input_ids"]) <= 300 - n


def test_a_model_without_a_chat_template_is_refused_by_the_reference_profile(tiny_model: Path, tmp_path: Path) -> None:
    import shutil

    bare = tmp_path / "no-template"
    shutil.copytree(tiny_model, bare)
    cfg = json.loads((bare / "tokenizer_config.json").read_text())
    cfg.pop("chat_template", None)
    (bare / "tokenizer_config.json").write_text(json.dumps(cfg))
    (bare / "chat_template.jinja").unlink(missing_ok=True)
    engine = TransformersEngine()
    engine.load(bare)
    turns = [{"role": "user", "content": "hi"}]
    with pytest.raises(EngineError, match="no chat template.*--prompt-profile"):
        engine.render(turns, require_template=True)
    assert engine.render(turns) == "hi\n"  # a profile that does not require one gets the plain turns


def _import_kit(path: Path):
    spec = importlib.util.spec_from_file_location(f"kit_{abs(hash(path))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("task_name", "profile"), [("gsm8k", None), ("gsm8k", "zero-shot"), ("humaneval", None)])
def test_the_workspace_gets_the_graders_own_prompts_and_rules(prepared_data: Path, tiny_model: Path, tmp_path: Path,
                                                              task_name: str, profile: str | None) -> None:
    from support.runs import make_prepared_run

    run_dir = make_prepared_run(tmp_path, tiny_model, task=task_name, prompt_profile=profile)
    data = run_dir / "workspace" / "data"
    task = load_task(task_name)
    settings = task.settings_for(profile)
    kit = _import_kit(data / "grading.py")
    assert kit.SPEC["prompt_profile"] == settings.prompt_profile
    ev = evaluator_for(task, settings)
    tok = load_tokenizer(tiny_model)
    for item in task.load_split("eval")[:10]:  # the eval items, which the workspace never holds
        assert kit.messages(item) == ev.prompt(item)
        assert kit.render(tok, item) == rules.render(tok, item, ev.spec)
    description = (run_dir / "workspace" / "description.md").read_text()
    assert f"prompt profile `{settings.prompt_profile}`" in description and "<!-- grading -->" not in description
    if task_name == "gsm8k":
        item = task.load_split("eval")[0]
        for output in ("The answer is 18", "The answer is 1,8", "#### 18\nQuestion: 3"):
            assert kit.is_correct(item, output) == ev.judge(0, item, "", output).correct
    else:
        item = task.load_split("eval")[0]
        assert kit.program(item, "```python\nx\n```") == rules.program(item, "```python\nx\n```", ev.spec)
    shown = subprocess.run([sys.executable, str(data / "grading.py"), "show", "0", "--model", str(tiny_model)],
                           capture_output=True, text=True, timeout=120, cwd=run_dir / "workspace")
    assert shown.returncode == 0, shown.stderr
    train0 = json.loads((data / "train.jsonl").open().readline())
    assert f"prompt profile {settings.prompt_profile!r}" in shown.stdout
    assert (train0.get("question") or train0["prompt"])[:40] in shown.stdout and "tokens" in shown.stdout
