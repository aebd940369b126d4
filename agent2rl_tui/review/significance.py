"""Whether a score moved more than its noise: paired comparisons of two evaluations on the same items.

A submission's score is a mean over the run's eval items. Against the baseline (or the best
before it) on the *same* items, what matters is the items that flipped, not the two means:
- binary items (correct or not): the exact McNemar test on the discordant pairs (items one
  model got and the other did not), two-sided; its p-value gives the label;
- graded items (judged preferences, episode rewards): a paired bootstrap of the mean
  difference; its 95% interval gives the label.
Both report the difference in points (100 x the mean difference) with a paired bootstrap 95%
interval, and a label: "better", "worse" or "within noise".

``resolution`` says what an eval of n binary items can tell apart at all: the difference in
points a paired comparison detects with 80% power at the 5% level when half the items are
discordant, a conservative figure for a task's page and report (a pair of close models flips
fewer items and is resolved more finely).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

ALPHA = 0.05
BETTER, WORSE, NOISE = "better", "worse", "within noise"


@dataclass(frozen=True)
class Comparison:
    """``after`` against ``before`` on the same items (points: 100 x the mean difference)."""

    n: int
    diff: float
    low: float
    high: float
    label: str
    p_value: float | None = None  # the exact McNemar test's (binary items)
    gained: int | None = None  # binary: items only ``after`` got
    lost: int | None = None  # binary: items only ``before`` got

    def describe(self) -> str:
        """``+12.00 points [+4.00, +20.00] better (100 items, McNemar p = 0.0120)``."""
        test = f", McNemar {p_text(self.p_value)}" if self.p_value is not None else ", paired bootstrap"
        return f"{self.diff:+.2f} points [{self.low:+.2f}, {self.high:+.2f}] {self.label} ({self.n} items{test})"

    def as_json(self) -> dict[str, object]:
        return {"n": self.n, "diff": round(self.diff, 4), "ci95": [round(self.low, 4), round(self.high, 4)],
                "label": self.label, "p_value": self.p_value, "gained": self.gained, "lost": self.lost}


P_FLOOR = 1e-4
"""Below it a p-value is written "p < 0.0001": four decimals of 0.0000 would claim a p of zero."""


def p_text(p: float) -> str:
    """``p = 0.0120``, or ``p < 0.0001`` for a smaller one."""
    return "p < 0.0001" if p < P_FLOOR else f"p = {p:.4f}"


def mcnemar_exact(gained: int, lost: int) -> float:
    """Two-sided exact McNemar p-value: the discordant pairs as a fair coin's tosses."""
    k, n = min(gained, lost), gained + lost
    if n == 0:
        return 1.0
    tail: float = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def paired_interval(before: Sequence[float], after: Sequence[float], *, draws: int = 10_000,
                    seed: int = 0) -> tuple[float, float, float]:
    """Mean of (after - before) in points and its 95% paired bootstrap interval."""
    diffs = [a - b for b, a in zip(before, after, strict=True)]
    if not diffs:
        raise ValueError("no items to compare")
    n = len(diffs)
    point = 100.0 * sum(diffs) / n
    rng = random.Random(seed)
    means = sorted(100.0 * sum(rng.choices(diffs, k=n)) / n for _ in range(draws))
    return point, means[int(0.025 * draws)], means[int(0.975 * draws) - 1]


def compare(before: Sequence[float], after: Sequence[float], *, binary: bool | None = None,
            draws: int = 10_000, seed: int = 0) -> Comparison:
    """``after`` against ``before``, item by item (the same items in the same order).

    ``binary`` (default: every value is 0 or 1) picks the exact McNemar test for the label;
    otherwise the bootstrap interval decides (excluding 0: better or worse)."""
    if len(before) != len(after):
        raise ValueError(f"the two evaluations hold {len(before)} and {len(after)} items: not the same items")
    if binary is None:
        binary = all(v in (0, 1) for v in (*before, *after))
    diff, low, high = paired_interval(before, after, draws=draws, seed=seed)
    if not binary:
        label = BETTER if low > 0 else WORSE if high < 0 else NOISE
        return Comparison(len(before), diff, low, high, label)
    gained = sum(1 for b, a in zip(before, after) if a and not b)
    lost = sum(1 for b, a in zip(before, after) if b and not a)
    p = mcnemar_exact(gained, lost)
    label = NOISE if p >= ALPHA or gained == lost else BETTER if gained > lost else WORSE
    return Comparison(len(before), diff, low, high, label, round(p, 6), gained, lost)


def resolution(n: int, *, discordant: float = 0.5, power: float = 0.8) -> float:
    """The difference in points a paired comparison of ``n`` binary items detects with
    ``power`` at the 5% level, when a ``discordant`` share of the items flip either way."""
    if n <= 0:
        raise ValueError("an eval needs items")
    normal = NormalDist()
    return 100.0 * (normal.inv_cdf(1 - ALPHA / 2) + normal.inv_cdf(power)) * math.sqrt(discordant / n)
