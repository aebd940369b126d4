"""Rewards for a searching task's train answers: exact match and token F1 against the gold answer.

The grader's own verdict is the run's LLM judge (``judge.verdict``); an agent training on the
100 train questions may prefer a reward that costs no judge call. Both follow SQuAD's answer
normalisation (lower case, no punctuation, no articles, single spaces), so "The Eiffel Tower."
and "eiffel tower" are the same answer. A Set Answer is compared as a whole: its items in any
order give the same tokens, so F1 credits a partial list and exact match wants all of them.
"""

from __future__ import annotations

import re
import string
from collections import Counter

EXACT, F1, JUDGE = "exact", "f1", "judge"
MODES = (EXACT, F1, JUDGE)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalise(text: str) -> str:
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCTUATION)).split())


def exact_match(predicted: str, gold: str) -> float:
    """1.0 when the normalised answers are equal (a Set Answer's items in any order), else 0.0."""
    p, g = normalise(predicted), normalise(gold)
    return 1.0 if p == g or (p and sorted(p.split()) == sorted(g.split()) and "," in gold) else 0.0


def token_f1(predicted: str, gold: str) -> float:
    """SQuAD's token F1 of the normalised answers (0.0 for an empty one)."""
    p, g = normalise(predicted).split(), normalise(gold).split()
    common = sum((Counter(p) & Counter(g)).values())
    if not p or not g or common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(g)
    return 2 * precision * recall / (precision + recall)
