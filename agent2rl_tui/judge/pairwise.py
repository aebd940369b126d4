"""AlpacaEval's pairwise judgement: the prompt the judge reads and the preference in its answer.

Two modes, as alpaca_eval defines them:

- ``weighted`` (``weighted_alpaca_eval_gpt4_turbo``): the judge answers one token, ``m`` or
  ``M``, for the better of the two outputs; the preference is read from the top-5 logprobs of
  that token, ``2 - p(m) / (p(m) + p(M))``, a number in [1, 2].
- ``ranking`` (AutoRL-Bench's default judge, ``annotators_gpt52_fn``): the judge calls the
  function ``make_partial_leaderboard`` with ``ordered_models``; the preference is the rank
  given to ``m`` (1 or 2). For judges that return no logprobs.

In alpaca_eval's convention a preference of 1 means output_1 is better and 2 means output_2
is; ``m`` is always the first output shown. The templates are the tasks' own files (ChatML
text, turned into chat messages as alpaca_eval's ``prompt_to_chatml`` does), and a template's
hash is its prompt version, so an edited template never reuses old judgements.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any

from agent2rl_tui.judge import JudgeError, Unparseable

Messages = list[dict[str, str]]

LEADERBOARD_TOOL: dict[str, Any] = {
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
                    "description": "A list of models ordered by the preference of their outputs. The first model in "
                                   "the list has the best output.",
                    "items": {
                        "type": "object",
                        "properties": {
                            "model": {"type": "string", "description": "The name of the model"},
                            "rank": {"type": "number", "description": "Order of preference of the model, 1 has the "
                                                                      "best output"},
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
}
"""AutoRL-Bench's tool (its ``annotators_gpt52_fn/configs.yaml``), with ``max_tokens`` 100, temperature 0."""

IDENTIFIERS = ("m", "M")


def prompt_version(template: str, mode: str) -> str:
    """What the judgement cache is keyed by besides the texts and the judge: mode and template hash."""
    return f"{mode}-{hashlib.sha256(template.encode('utf-8')).hexdigest()[:12]}"


def fill(template: str, instruction: str, output_1: str, output_2: str) -> str:
    """The template with its placeholders filled as alpaca_eval's ``make_prompts`` does: each
    placeholder's first occurrence, in the order they first appear, by plain replacement."""
    values = {"instruction": instruction, "output_1": output_1, "output_2": output_2}
    text = template
    for name in dict.fromkeys(re.findall(r"{([^ \s]+?)}", template)):
        if name in values:
            text = text.replace("{" + name + "}", values[name], 1)
    return text


def to_chat(prompt: str) -> Messages:
    """ChatML text to chat messages (alpaca_eval's ``prompt_to_chatml``)."""
    prompt = prompt.strip()
    if not (prompt.startswith("<|im_start|>") and prompt.endswith("<|im_end|>")):
        raise JudgeError("a judge template must be ChatML text: <|im_start|>role ... <|im_end|>")
    messages = []
    for part in prompt.split("<|im_start|>")[1:]:
        role, _, rest = part.partition("\n")
        messages.append({"role": role.strip(), "content": rest.split("<|im_end|>", 1)[0].strip()})
    return messages


def request(mode: str, template: str, instruction: str, output_1: str, output_2: str) -> dict[str, Any]:
    """The chat-completions request body (without ``model``) for one pair."""
    messages = to_chat(fill(template, instruction, output_1, output_2))
    if mode == "weighted":  # weighted_alpaca_eval_gpt4_turbo's completions_kwargs
        return {"messages": messages, "max_tokens": 1, "temperature": 1, "logprobs": True, "top_logprobs": 5}
    return {"messages": messages, "max_tokens": 100, "temperature": 0, "tools": [LEADERBOARD_TOOL],
            "tool_choice": {"type": "function", "function": {"name": "make_partial_leaderboard"}}}


def raw_answer(mode: str, body: dict[str, Any]) -> str:
    """What the judge said, as kept with the item: the top logprobs of its one token
    (weighted), or the tool call's arguments, else the message text (ranking)."""
    try:
        choice = body["choices"][0]
    except (KeyError, IndexError, TypeError):
        raise Unparseable(f"the judge's answer has no choices: {json.dumps(body)[:200]}") from None
    if mode == "weighted":
        content = ((choice.get("logprobs") or {}).get("content") or [])
        if not content or "top_logprobs" not in content[0]:
            raise Unparseable("the judge returned no logprobs; judges without them need --judge-mode ranking")
        return json.dumps([{"token": t.get("token"), "logprob": t.get("logprob")}
                           for t in content[0]["top_logprobs"]])
    message = choice.get("message") or {}
    calls = message.get("tool_calls") or []
    if calls:
        return str(calls[0].get("function", {}).get("arguments", ""))
    return str(message.get("content") or "")


def preference(mode: str, raw: str) -> float:
    """The preference in [1, 2] (1: the first output ``m`` is better) from ``raw_answer``'s text."""
    if mode == "weighted":
        tops = json.loads(raw)
        logprobs = {t["token"]: float(t["logprob"]) for t in tops if t.get("token") in IDENTIFIERS}
        if not logprobs:
            raise Unparseable(f"the judge's top tokens hold neither m nor M: {[t.get('token') for t in tops]}")
        p_m, p_big = (math.exp(logprobs.get(t, -math.inf)) for t in IDENTIFIERS)
        return 2.0 - p_m / (p_m + p_big)
    return _ranking_preference(raw)


def _ranking_preference(raw: str) -> float:
    """Strict: a JSON object whose ``ordered_models`` ranks exactly m and M, as 1 and 2."""
    try:
        answer = json.loads(raw)
    except ValueError:
        raise Unparseable(f"the judge's ranking is not JSON: {raw[:200]!r}") from None
    ordered = answer.get("ordered_models") if isinstance(answer, dict) else answer
    if not isinstance(ordered, list) or not all(isinstance(e, dict) for e in ordered):
        raise Unparseable(f"the judge's ranking has no list ordered_models: {raw[:200]!r}")
    ranks = {e.get("model"): e.get("rank") for e in ordered}
    numbers = [r for r in ranks.values() if isinstance(r, (int, float)) and not isinstance(r, bool)]
    if len(ordered) != 2 or set(ranks) != set(IDENTIFIERS) or sorted(numbers) != [1, 2]:
        raise Unparseable(f"the judge's ranking must rank m and M as 1 and 2: {raw[:200]!r}")
    return float(ranks["m"])
