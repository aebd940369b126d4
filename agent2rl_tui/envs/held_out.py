"""Which test-fold games of a TextWorldExpress task no train-fold game matches: played, not assumed.

``tasks.held_out`` reads the list from the task's ``eval_space.json``; this module makes it. It
starts every seed of the train fold and of the test fold in one simulator (a reset each, no
action: 2,000 games in about 3 s), takes each game's content as what the model is shown before
its first action (goal and first observation, hashed), and keeps the test-fold games whose
content no train-fold game has. The whole train fold is compared, not only a task's train split:
a task may grow its split, and an agent with the simulator may play any train seed.
"""

from __future__ import annotations

import hashlib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from agent2rl_tui.envs.base import Start
from agent2rl_tui.envs.twx import TextWorldExpress
from agent2rl_tui.tasks.errors import TaskError
from agent2rl_tui.tasks.generators import HELD_OUT_GAMES, TWX_FOLD_SIZE, TWX_FOLDS
from agent2rl_tui.tasks.held_out import FILE, HeldOutGames
from agent2rl_tui.tasks.registry import Task


def content_of(start: Start) -> str:
    """A game's content as the model first meets it (``tasks.held_out.FINGERPRINT``)."""
    return hashlib.sha256(f"{start.goal}\n{start.observation}".encode()).hexdigest()


def fold_contents(sim: TextWorldExpress, fold: str) -> dict[str, str]:
    """``{"<fold>:<seed>": content}`` for every seed of a fold."""
    first = TWX_FOLDS[fold]
    return {f"{fold}:{seed}": content_of(sim.reset(f"{fold}:{seed}"))
            for seed in range(first, first + TWX_FOLD_SIZE)}


def survey(game: str, params: str) -> HeldOutGames:
    """The test-fold games of ``game`` with ``params`` whose content no train-fold game has."""
    sim = TextWorldExpress(game, params, step_limit=1)
    try:
        train, test = fold_contents(sim, "train"), fold_contents(sim, "test")
    finally:
        sim.close()
    seen = set(train.values())
    apart = tuple(g for g, content in test.items() if content not in seen)
    try:
        simulator = version("textworld-express")
    except PackageNotFoundError:
        simulator = "unknown"
    span = (TWX_FOLDS["train"], TWX_FOLDS["train"] + TWX_FOLD_SIZE - 1)
    return HeldOutGames(game=game, params=params, simulator=simulator, train_fold=span,
                        test_fold=(TWX_FOLDS["test"], TWX_FOLDS["test"] + TWX_FOLD_SIZE - 1),
                        train_contents=len(seen), test_contents=len(set(test.values())),
                        shared_games=len(test) - len(apart), games=apart)


def survey_task(task: Task) -> HeldOutGames:
    """``survey`` of a TextWorldExpress task's ``[env]`` game and parameters."""
    if task.data.get("generator") not in HELD_OUT_GAMES:
        raise TaskError(f"task {task.name} does not draw TextWorldExpress games: it has no eval-space file")
    env = task.env_table
    return survey(str(env.get("game", "")), str(env.get("params", "")))


def write_task_file(task: Task) -> tuple[Path, HeldOutGames]:
    """Survey the task and write its ``eval_space.json``; the path and what it holds."""
    held = survey_task(task)
    path = task.folder / FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(held.to_json(), encoding="utf-8")
    tmp.replace(path)
    return path, held
