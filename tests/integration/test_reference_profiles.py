"""The reference profiles' engine-side quirks, each against a real engine, tokenizer or judge server.

What AutoRL-Bench's Level-2 and Level-3 evaluators do that ours does not (docs/grading.md, J):
vLLM's ``generate`` on chat-template text adds the tokenizer's BOS once more; a model without a
chat template gets AlpacaEval's bare instruction; vLLM's dtype stays ``auto`` and, for ALFWorld
and WebShop, the context the model's own; one failed AlpacaEval judge call ends the evaluation;
RD-Agent tries a DeepSearchQA judge call 10 times. Under ``reference`` each holds; under ours
(``default``) none does.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.alpaca import reference_items
from support.runs import Judge

from agent2rl_tui.grader.engines.hf import TransformersEngine
from agent2rl_tui.grader.evaluators import evaluator_for
from agent2rl_tui.grader.worker import prompt_texts
from agent2rl_tui.judge import JudgeError, JudgeSettings
from agent2rl_tui.judge.verdict import judge_answers
from agent2rl_tui.tasks.registry import TaskError, load_task


def with_bos(tiny_model: Path, folder: Path) -> Path:
    """The tiny model with a tokenizer that puts a BOS before every text, as Llama's and Mistral's
    do (here ``<|im_start|>``, already in its vocabulary)."""
    shutil.copytree(tiny_model, folder)
    path = folder / "tokenizer.json"
    tok = json.loads(path.read_text(encoding="utf-8"))
    bos = next(t for t in tok["added_tokens"] if t["content"] == "<|im_start|>")
    special = {"SpecialToken": {"id": "<|im_start|>", "type_id": 0}}
    tok["post_processor"] = {
        "type": "TemplateProcessing", "single": [special, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [special, {"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"<|im_start|>": {"id": "<|im_start|>", "ids": [bos["id"]], "tokens": ["<|im_start|>"]}}}
    path.write_text(json.dumps(tok), encoding="utf-8")
    return folder


def prompt_tokens(model: Path, profile: str, instructions: list[str]) -> int:
    """What the engine fed the model, in tokens, for AlpacaEval's prompts under ``profile``."""
    task = load_task("alpacaeval")
    settings = task.settings_for(profile)
    engine = TransformersEngine()
    engine.load(model)
    prompts = prompt_texts(engine, settings, [[{"role": "user", "content": i}] for i in instructions])
    engine.generate(prompts, settings.__class__(**{**settings.__dict__, "max_new_tokens": 2}))
    return engine.prefill.prompt_tokens


def test_alpacaeval_reference_gives_a_bos_adding_tokenizer_its_bos_twice(tiny_model: Path, tmp_path: Path) -> None:
    instructions = ["Name a colour.", "Say hello."]
    llama_like = with_bos(tiny_model, tmp_path / "bos-model")
    ours, reference = prompt_tokens(llama_like, "default", instructions), prompt_tokens(llama_like, "reference",
                                                                                       instructions)
    assert reference == ours + len(instructions)  # one more BOS per prompt, as vLLM's generate adds it
    # A tokenizer that adds none (Qwen's, the tiny model's) reads the same under both.
    assert prompt_tokens(tiny_model, "default", instructions) == prompt_tokens(tiny_model, "reference", instructions)


def test_alpacaeval_reference_asks_a_model_without_a_template_the_bare_instruction(tiny_model: Path,
                                                                                   tmp_path: Path) -> None:
    bare = tmp_path / "no-template"
    shutil.copytree(tiny_model, bare)
    config = json.loads((bare / "tokenizer_config.json").read_text(encoding="utf-8"))
    config.pop("chat_template", None)
    (bare / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    (bare / "chat_template.jinja").unlink(missing_ok=True)
    engine = TransformersEngine()
    engine.load(bare)
    assert not getattr(engine.tokenizer, "chat_template", None)
    task = load_task("alpacaeval")
    turns = [[{"role": "user", "content": "Name a colour."}]]
    assert prompt_texts(engine, task.settings_for("reference"), turns) == ["Name a colour."]  # the reference's
    assert prompt_texts(engine, task.settings_for("default"), turns) == ["Name a colour.\n"]


@pytest.mark.usefixtures("alpaca_data")
def test_alpacaeval_reference_ends_the_evaluation_on_a_failed_judge_call(judge_server) -> None:
    items = reference_items(4)
    failing: Judge = judge_server("--fail-on", items[1]["instruction"][:40], "--garbage-on", items[2]["instruction"][:40])
    task = load_task("alpacaeval")
    judge = {"base_url": failing.url, "model": "local-judge", "mode": "ranking", "retries": 1, "backoff_s": 0.01}
    outputs = ["an answer of some length"] * 4
    ours = evaluator_for(task, task.settings_for("default"), judge=judge).judge_all(items, ["p"] * 4, outputs)
    assert [r.extra["preference"] is None for r in ours] == [False, True, True, False]  # left out and counted
    with pytest.raises(JudgeError, match="1 of 4 items.*ends the evaluation"):  # the failed call; not the prose
        evaluator_for(task, task.settings_for("reference"), judge=judge).judge_all(items, ["p"] * 4,
                                                                                 ["another answer"] * 4)


def test_deepsearchqa_reference_tries_a_judge_call_ten_times(judge_server) -> None:
    flaky: Judge = judge_server("--fail-first", "6")
    settings = JudgeSettings(base_url=flaky.url, model="local-judge", retries=3, backoff_s=0.01)
    [verdict], _ = judge_answers([("heron-7", "heron-7", "Single Answer")], settings, style="reference")
    assert (verdict.correct, verdict.fallback, verdict.raw) == (True, False, "correct") and flaky.requests() == 7
    flaky = judge_server("--fail-first", "6")
    [ours], _ = judge_answers([("heron-7", "heron-7", "Single Answer")],
                              JudgeSettings(base_url=flaky.url, model="local-judge", retries=3, backoff_s=0.01))
    assert not ours.correct and "HTTP 500" in str(ours.error) and flaky.requests() == 4


@pytest.mark.parametrize("task_name, dtype, context", [("alfworld", "auto", None), ("webshop", "auto", None),
                                                        ("deepsearchqa", "auto", 4096), ("alpacaeval", "auto", 4096),
                                                        ("gsm8k", "bfloat16", 32768)])
def test_reference_profiles_start_the_engine_as_the_reference_does(task_name: str, dtype: str,
                                                                   context: int | None) -> None:
    task = load_task(task_name)
    reference = task.engine_for(task.settings_for("reference"))
    assert (reference.dtype, reference.max_model_len) == (dtype, context)
    ours = task.engine_for(task.inference)
    assert ours.dtype == "bfloat16" and ours.max_model_len == task.engine.max_model_len
    assert task.engine_for(task.settings_for("reference"), {"dtype": "float16"}).dtype == "float16"  # the run's wins


def test_a_profile_with_an_unknown_engine_setting_is_an_error_at_load(tmp_path: Path) -> None:
    folder = tmp_path / "odd"
    folder.mkdir()
    (folder / "description.md").write_text("# odd\n")
    (folder / "task.toml").write_text('name = "odd"\n[prompt_profiles.reference]\nengine = { dtpye = "auto" }\n')
    with pytest.raises(TaskError, match=r"\[prompt_profiles.reference\] engine: unknown engine setting 'dtpye'"):
        load_task(folder)
