"""A judge's verdict on a short answer (DeepSearchQA): "correct" or "incorrect", read strictly.

The prompt is AutoRL-Bench's (``benchmarks/deepsearchqa/eval.py``, ``_judge_answer``), word for
word, with its system message. Reading the verdict: the first line of the reply, lower-cased,
stripped of spaces and ``.!,;:``, must be exactly ``correct`` or ``incorrect``; anything else
is an unparseable verdict (the item is not counted correct, and the record says why). So
"incorrect" can never count as correct, nor "correct, but ..." hedge into it. Set Answers need
every gold item: the prompt says so to the judge.

``style="reference"`` (the ``reference`` prompt profile) calls and reads the judge as the
reference does: its chat model's defaults (temperature 0.5, no token limit), no cache; any
reply other than "correct" is not correct; a missing answer is judged all the same; and when
the call fails (or the reply is empty) the verdict falls back to its string match, under which
an empty answer is correct, since the empty string is in every gold answer.
"""

from __future__ import annotations

import dataclasses
import hashlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent2rl_tui.judge import JudgeError, JudgeSettings, Unparseable
from agent2rl_tui.judge.cache import JudgementCache, cache_key
from agent2rl_tui.judge.client import JudgeClient

SYSTEM = "You are a strict answer evaluator."
TEMPLATE = (  # the reference's f-string, its indentation included
    "You are an answer evaluator. Compare the predicted answer to the gold answer.\n"
    "        Question answer type: {answer_type}\n"
    "        Gold answer: {gold}\n"
    "        Predicted answer: {predicted}\n"
    '        For "Single Answer": The predicted answer is correct if it contains the same key information as the '
    "gold answer.\n"
    '        For "Set Answer": The predicted answer is correct if it contains ALL items from the gold answer (order '
    "doesn't matter, minor wording variations are OK).\n"
    '        Reply with ONLY "correct" or "incorrect". No explanation.'
)
VERSION = "verdict-" + hashlib.sha256((SYSTEM + TEMPLATE).encode()).hexdigest()[:12]


REFERENCE = "reference"
REFERENCE_VERSION = VERSION + "-reference"
REFERENCE_RETRIES = 9
"""Further tries of a failed judge call under the reference: RD-Agent's ``max_retry`` is 10 tries,
``retry_wait_seconds`` 1 s apart (an HTTP 4xx that no retry changes, a wrong model or key, is not
tried again: the string match then decides at once, as it would after the tenth)."""


def request(predicted: str, gold: str, answer_type: str, style: str = "") -> dict[str, Any]:
    prompt = TEMPLATE.format(answer_type=answer_type, gold=gold, predicted=predicted)
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]
    if style == REFERENCE:  # RD-Agent's chat defaults: chat_temperature 0.5, chat_max_tokens None
        return {"messages": messages, "temperature": 0.5}
    return {"messages": messages, "temperature": 0, "max_tokens": 16}


def string_match(predicted: str, gold: str, answer_type: str) -> bool:
    """The reference's fallback when its judge fails (``_string_match``), as it is."""
    pred, gold = predicted.strip().lower(), gold.strip().lower()
    if answer_type == "Single Answer":
        return gold in pred or pred in gold
    return all(item in pred for item in [x.strip() for x in gold.split(",")])


def read_verdict(raw: str) -> bool:
    """True for "correct", False for "incorrect"; Unparseable for anything else."""
    first = raw.strip().splitlines()[0] if raw.strip() else ""
    word = first.strip().strip(".!,;: \t\r\n").lower()
    if word == "correct":
        return True
    if word == "incorrect":
        return False
    raise Unparseable(f"the judge's verdict is neither 'correct' nor 'incorrect': {raw[:120]!r}")


@dataclass
class Verdict:
    correct: bool = False
    raw: str | None = None
    error: str | None = None
    cached: bool = False
    fallback: bool = False
    """The reference's string match decided it (its judge failed)."""


def judge_answers(answers: list[tuple[str | None, str, str]], settings: JudgeSettings,
                  cache_path: Path | None = None, style: str = "") -> tuple[list[Verdict], int]:
    """Verdicts for ``(predicted, gold, answer_type)`` triples (a missing answer is wrong without
    asking), concurrently, cached; and how many judge calls were made. ``style="reference"``:
    as the reference judges (the module's docstring)."""
    if style == REFERENCE:  # RD-Agent's chat API tries a call 10 times before its caller falls back
        return _reference_verdicts(answers, JudgeClient(dataclasses.replace(
            settings, retries=REFERENCE_RETRIES, backoff_s=1.0, backoff_growth=1.0)))
    client = JudgeClient(settings)
    cache = JudgementCache(cache_path) if cache_path else None

    def one(triple: tuple[str | None, str, str]) -> Verdict:
        predicted, gold, kind = triple
        if not predicted:
            return Verdict(error="no answer")
        key = cache_key(f"{kind}\n{gold}", predicted, "", settings.model, VERSION)
        hit = cache.get(key) if cache is not None else None
        if hit:
            return Verdict(correct=hit[1] == 1.0, raw=hit[0], cached=True)
        try:
            body = client.chat(request(predicted, gold, kind)).body
            raw = str(((body.get("choices") or [{}])[0].get("message") or {}).get("content") or "")
        except JudgeError as exc:
            return Verdict(error=str(exc))
        try:
            correct = read_verdict(raw)
        except Unparseable as exc:
            return Verdict(raw=raw, error=str(exc))
        if cache is not None:
            cache.put(key, raw, 1.0 if correct else 0.0, settings.model, VERSION)
        return Verdict(correct=correct, raw=raw)

    try:
        with ThreadPoolExecutor(max_workers=settings.concurrency) as pool:
            verdicts = list(pool.map(one, answers))
    finally:
        if cache is not None:
            cache.close()
    return verdicts, sum(1 for v in verdicts if v.raw is not None and not v.cached)


def _reference_verdicts(answers: list[tuple[str | None, str, str]],
                        client: JudgeClient) -> tuple[list[Verdict], int]:
    def one(triple: tuple[str | None, str, str]) -> Verdict:
        predicted, gold, kind = triple
        predicted = predicted or ""
        try:
            body = client.chat(request(predicted, gold, kind, REFERENCE)).body
            raw = str(((body.get("choices") or [{}])[0].get("message") or {}).get("content") or "")
        except JudgeError as exc:
            return Verdict(correct=string_match(predicted, gold, kind), error=str(exc), fallback=True)
        lines = raw.strip().lower().splitlines()
        if not lines:  # the reference's splitlines()[0] raises here, and it falls back
            return Verdict(correct=string_match(predicted, gold, kind), raw=raw, error="an empty verdict",
                           fallback=True)
        return Verdict(correct=lines[0].strip().strip(".!,;: \t\r\n") == "correct", raw=raw)

    with ThreadPoolExecutor(max_workers=client.settings.concurrency) as pool:
        verdicts = list(pool.map(one, answers))
    return verdicts, sum(1 for v in verdicts if v.raw is not None)
