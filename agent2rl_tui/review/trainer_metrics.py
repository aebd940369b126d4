"""What a trainer logs: the metrics drawn as training curves, and a logged value read as a number.

One place for both readers of trainer logs: the log dicts in the agent's output
(review/curves.py) and the files its trainers write (review/train_logs.py).
"""

from __future__ import annotations

import math
import re
from typing import Any

METRICS = ("loss", "reward", "kl", "learning_rate", "grad_norm", "entropy", "completion_length",
           "completions/mean_length", "reward_std")
"""The metrics drawn, in this order, where a run logged them (TRL's names, old and new)."""
NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][-+]?\d+)?")
LARGEST = 1e100
"""A logged value beyond this is no measurement (and would overflow a chart's axis)."""


def logged_number(value: Any) -> float | None:
    """A logged number, or None: recent transformers write them as strings (``'loss': '0.5606'``)."""
    if isinstance(value, str) and len(value) < 40 and NUMBER.fullmatch(value.strip()):
        value = float(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:  # an int too large for a float
            return None
        if math.isfinite(number) and abs(number) <= LARGEST:
            return number
    return None


def metric_of(tag: str) -> str | None:
    """The metric a logged key or TensorBoard tag names (``train/loss`` is ``loss``), or None."""
    name = tag.removeprefix("train/")
    return name if name in METRICS else None
