"""Which eval items a run was graded on, in one line: every header, report and `run show` says it alike.

A score on the first 100 items of GSM8K's 1,319 (``--eval-limit``) is another measurement than a
score on all of them, and two runs compare item by item only on one draw (the eval seed): both
belong beside the score, not only in the config.
"""

from __future__ import annotations


def eval_label(eval_limit: int | None, eval_seed: int | None, n_items: int | None = None) -> str:
    """``eval: first 100 items (--eval-limit), draw seed 42`` or ``eval: 1,319 items, draw seed 42``;
    ``n_items``: how many the baseline was graded on, where known."""
    if eval_limit is not None:
        what = f"first {eval_limit:,} items (--eval-limit)"
    else:
        what = f"{n_items:,} items" if n_items else "all items"
    seed = f", draw seed {eval_seed}" if eval_seed is not None else ""
    return f"eval: {what}{seed}"
