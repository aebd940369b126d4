"""The offline data generators: a task's train split and default eval split made from its seed.

A task whose ``[data] source = "generator"`` names one of ``GENERATORS`` gets its data here, with no
network: two-operand arithmetic (``arith``) and TextWorldExpress game ids (``twx_games``). A generator
with a draw (``EVAL_DRAWS``) also gives each run its own eval items, drawn with the run's eval seed
from an eval space (``EVAL_SPACES``) that the train split never touches and that is much larger than
one draw, so the exact items a run is graded on cannot be worked out from the train split, the task
folder or the package.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from agent2rl_tui.tasks.errors import TaskError

Split = list[dict[str, Any]]


def _arith_items(params: dict[str, Any]) -> Split:
    """Every (a, op, b) question with 0 <= a, b <= ``max_operand``, once, in a fixed order."""
    hi = int(params.get("max_operand", 19))
    ops = list(params.get("ops", ["+"]))
    fns: dict[str, Callable[[int, int], int]] = {
        "+": lambda a, b: a + b,
        "-": lambda a, b: a - b,
        "*": lambda a, b: a * b,
    }
    unknown = set(ops) - set(fns)
    if unknown:
        raise TaskError(f"arith: unsupported ops {sorted(unknown)}; use + - *")
    return [
        {"question": f"{a}{op}{b}=", "answer": f"#### {fns[op](a, b)}"}
        for op in ops
        for a in range(hi + 1)
        for b in range(hi + 1)
    ]


def _arith_train_and_pool(seed: int, params: dict[str, Any]) -> tuple[Split, Split, int]:
    """(train split, eval space, eval_size): a seeded shuffle of every question; the last
    ``train_size`` are the train split, the rest is where eval items come from."""
    items = _arith_items(params)
    eval_size = int(params.get("eval_size", 100))
    train_size = int(params.get("train_size", len(items) - eval_size))
    if not 0 < eval_size < len(items) or not 0 < train_size <= len(items) - eval_size:
        raise TaskError(f"arith: eval_size ({eval_size}) and train_size ({train_size}) must be positive and "
                        f"together at most the {len(items)} questions")
    random.Random(seed).shuffle(items)
    cut = len(items) - train_size
    return items[cut:], items[:cut], eval_size


def generate_arith(seed: int, params: dict[str, Any]) -> tuple[Split, Split]:
    """Two-operand arithmetic with GSM8K-style answers (``#### N``): (train split, default eval split).

    Every (a, op, b) question exists once; a seeded shuffle sends ``train_size`` of them to the
    train split and leaves the rest as the eval space, whose first ``eval_size`` questions are
    the default eval split (a run is graded on its own draw: ``draw_arith_eval``). Without
    ``train_size`` the train split is every question but the default eval split (the layout
    before eval draws: the eval space is then exhausted by one split).
    """
    train, pool, eval_size = _arith_train_and_pool(seed, params)
    return train, pool[:eval_size]


def arith_eval_space(seed: int, params: dict[str, Any]) -> Split:
    """Every question a run's eval draw can hold: those the train split does not."""
    return _arith_train_and_pool(seed, params)[1]


def draw_arith_eval(space: Split, params: dict[str, Any], eval_seed: int) -> Split:
    """A run's ``eval_size`` questions, drawn with its eval seed from the eval space."""
    return random.Random(eval_seed).sample(space, int(params.get("eval_size", 100)))


TWX_FOLDS = {"train": 0, "dev": 10000, "test": 20000}
"""First seed of each TextWorldExpress fold (the simulator's own lists: 1,000 seeds each)."""
TWX_FOLD_SIZE = 1000


def _twx_sizes(seed: int, params: dict[str, Any]) -> tuple[int, int]:
    n_train, n_eval = int(params.get("train_games", 200)), int(params.get("eval_games", 50))
    if not (0 < n_train <= TWX_FOLD_SIZE and 0 < n_eval <= TWX_FOLD_SIZE) \
            or not 0 <= seed <= TWX_FOLD_SIZE - max(n_train, n_eval):
        raise TaskError("twx_games: train_games and eval_games must be 1-1000, and seed + games at most 1000")
    return n_train, n_eval


def generate_twx_games(seed: int, params: dict[str, Any]) -> tuple[Split, Split]:
    """TextWorldExpress game ids: ``train_games`` from the train fold for the agent,
    ``eval_games`` from the test fold for the grader (the folds hold different objects).

    Seeds follow the simulator's own lists (train 0-999, test 20000-20999), offset by
    ``seed`` so two tasks can draw different games. The eval games returned here are the
    default draw; a run is graded on its own (``draw_twx_eval``).
    """
    n_train, n_eval = _twx_sizes(seed, params)
    train = [{"game": f"train:{seed + i}"} for i in range(n_train)]
    evals = [{"game": f"test:{TWX_FOLDS['test'] + seed + i}"} for i in range(n_eval)]
    return train, evals


def twx_eval_space(seed: int, params: dict[str, Any]) -> Split:
    """The test fold, in seed order: what a run's eval draw may hold once the games a train-fold
    game matches are taken out (the task's list: ``tasks.held_out``)."""
    _twx_sizes(seed, params)
    return [{"game": f"test:{TWX_FOLDS['test'] + i}"} for i in range(TWX_FOLD_SIZE)]


def draw_twx_eval(space: Split, params: dict[str, Any], eval_seed: int) -> Split:
    """A run's ``eval_games`` games of the eval space, drawn with its eval seed, in seed order."""
    n_eval = int(params.get("eval_games", 50))
    if n_eval > len(space):
        raise TaskError(f"twx_games: eval_games ({n_eval}) is more than the {len(space)} games a run may be graded on")
    return [space[i] for i in sorted(random.Random(eval_seed).sample(range(len(space)), n_eval))]


GENERATORS: dict[str, Callable[[int, dict[str, Any]], tuple[Split, Split]]] = {
    "arith": generate_arith,
    "twx_games": generate_twx_games,
}
EVAL_DRAWS: dict[str, Callable[[Split, dict[str, Any], int], Split]] = {
    "arith": draw_arith_eval,
    "twx_games": draw_twx_eval,
}
"""Generators whose tasks draw each run's eval items (``Task.eval_items``)."""
EVAL_SPACES: dict[str, Callable[[int, dict[str, Any]], Split]] = {
    "arith": arith_eval_space,
    "twx_games": twx_eval_space,
}
HELD_OUT_GAMES = {"twx_games"}
"""Generators whose eval space leaves out the games a train-fold game matches, as the task's
``eval_space.json`` lists them (``tasks.held_out``)."""
