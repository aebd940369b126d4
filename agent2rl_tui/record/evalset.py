"""A run's eval items, as its record fixes them.

A drawing task (``Task.draws_eval``: arith, twc) grades each run on items drawn with the run's
own eval seed, which lives in run.db's config only (``tasks.eval_settings.EVAL_SEED_KEY``). Whatever
looks at a run's eval items after the fact (the contamination check, a reviewer, a test) asks
here, so it sees the items the grader scored, never the task's default split. A run made before
eval seeds has none, and its items are the task's default split (``load_split("eval")``): for
arith that split is not the one such a run was graded on (its space grew from 0-19 to 0-29);
the items each submission was scored on are kept in its ``evals/<n>/results.jsonl`` either way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent2rl_tui.record.store import RunStore
from agent2rl_tui.tasks.registry import Task


def run_eval_seed(run_dir: Path) -> int | None:
    """The eval seed in a run's record, or None (a run made before eval seeds)."""
    with RunStore.of_run(Path(run_dir)) as store:
        return store.config().eval_seed


def run_eval_items(run_dir: Path, task: Task) -> list[dict[str, Any]]:
    """The items the grader scores in this run (before any ``eval_limit``)."""
    return task.eval_items(run_eval_seed(run_dir))
