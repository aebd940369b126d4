"""A TextWorldExpress task grades on test-fold games no train-fold game matches (issue 40, class 3).

The coin collector's test fold holds the train fold's games too; each task folder's
``eval_space.json`` lists the test-fold games whose first prompt no train-fold game has, and it
is checked here against the installed simulator, played seed by seed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.runs import cli

from agent2rl_tui.envs.held_out import content_of, survey_task
from agent2rl_tui.envs.twx import TextWorldExpress
from agent2rl_tui.tasks.generators import HELD_OUT_GAMES
from agent2rl_tui.tasks.held_out import FILE, HeldOutGames
from agent2rl_tui.tasks.registry import TaskError, discover, load_task

TWX_TASKS = sorted(n for n, f in discover().items() if load_task(f).data.get("generator") in HELD_OUT_GAMES)


def test_the_textworld_express_tasks_are_the_ones_with_a_list() -> None:
    assert TWX_TASKS == ["coin", "twc"]


@pytest.mark.parametrize("name", TWX_TASKS)
def test_each_tasks_list_is_what_the_simulator_plays_today(name: str) -> None:
    """The file in the task folder is the survey made now (a new simulator or changed parameters
    without a new file fail here), and its games are the task's eval space."""
    task = load_task(name)
    on_file = HeldOutGames.from_json(json.loads((task.folder / FILE).read_text()))
    assert survey_task(task) == on_file, f"run `agent2rl-tui data eval-space {name}`"
    assert [r["game"] for r in task.eval_space()] == list(on_file.games)


def test_no_coin_game_a_run_can_draw_is_a_train_fold_game() -> None:
    """Played independently of the survey: each game of the coin task's eval space against every
    train-fold seed, by what the model is shown first. The test fold's other games are train-fold
    games, and none of them can be drawn."""
    task = load_task("coin")
    env = task.env_table
    sim = TextWorldExpress(env["game"], env["params"], step_limit=1)
    try:
        train = {content_of(sim.reset(f"train:{seed}")) for seed in range(1000)}
        space = [r["game"] for r in task.eval_space()]
        fold = [f"test:{20000 + i}" for i in range(1000)]
        shared = [g for g in fold if content_of(sim.reset(g)) in train]
        drawable = [g for g in space if content_of(sim.reset(g)) in train]
    finally:
        sim.close()
    assert len(shared) > 400 and len(space) == 1000 - len(shared)  # 520 shared, 480 drawn from
    assert drawable == [] and not set(shared) & set(space)
    for seed in range(20):
        assert not {r["game"] for r in task.eval_items(seed)} & set(shared)


def copy_task(name: str, tmp_path: Path) -> Path:
    folder = tmp_path / name
    shutil.copytree(load_task(name).folder, folder)
    return folder


def test_a_task_whose_game_changed_or_whose_list_is_gone_is_refused_until_it_is_written(tmp_path: Path) -> None:
    folder = copy_task("coin", tmp_path)
    toml = folder / "task.toml"
    toml.write_text(toml.read_text().replace("numLocations=3", "numLocations=4"))
    with pytest.raises(TaskError, match=r"made for coin 'numLocations=3.*agent2rl-tui data eval-space"):
        load_task(folder).eval_items(7)
    (folder / FILE).unlink()
    with pytest.raises(TaskError, match=r"eval_space.json is missing.*agent2rl-tui data eval-space"):
        load_task(folder).load_split("eval")
    (folder / FILE).write_text("{not json")
    with pytest.raises(TaskError, match="cannot be read"):
        load_task(folder).eval_space()

    proc = cli("data", "eval-space", str(folder), root=tmp_path / "runs")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "games are a train-fold game" in proc.stdout and str(folder / FILE) in proc.stdout
    held = HeldOutGames.from_json(json.loads((folder / FILE).read_text()))
    assert held.params.startswith("numLocations=4") and held.games
    assert len(load_task(folder).eval_items(7)) == 100

    proc = cli("data", "eval-space", "arith", root=tmp_path / "runs")
    assert proc.returncode != 0 and "does not draw TextWorldExpress games" in proc.stdout + proc.stderr
