"""``tasks``, ``data prepare|status|eval-space``, ``prompt`` and ``tiny-model``: the tasks, their data, the
prompt every agent gets, and the tiny model."""

from __future__ import annotations

import json
from pathlib import Path

import click

from agent2rl_tui.cli.common import USER_ERRORS, _fail
from agent2rl_tui.tasks.registry import TaskError, discover, load_task


@click.command("tasks")
def tasks_cmd() -> None:
    """List the tasks the registry finds."""
    from agent2rl_tui.review.significance import resolution

    for name, folder in sorted(discover().items()):
        try:
            task = load_task(folder)
            click.echo(f"{name:16} level {task.level}  {task.title}  ({folder})")
            if len(task.prompt_profiles) > 1:
                others = [p for p in task.prompt_profiles if p != task.inference.prompt_profile]
                click.echo(f"{'':16} prompt profiles: {task.inference.prompt_profile} (default), {', '.join(others)}")
            n = task.eval_size
            if n:
                click.echo(f"{'':16} resolution: {resolution(n):.1f} points on its {n} eval items (a paired "
                           "difference detected 4 times in 5 at the 5% level when half the items flip)")
        except TaskError as exc:
            click.echo(f"{name:16} BROKEN: {exc}")


@click.command("prompt")
def prompt_cmd() -> None:
    """Print the prompt template every coding agent gets."""
    from agent2rl_tui.run.prompt import PROMPT_TEMPLATE

    click.echo(PROMPT_TEMPLATE)


@click.group("data")
def data_group() -> None:
    """Prepare tasks' data in the local cache (runs never download)."""


@data_group.command("prepare")
@click.argument("task")
@click.option("--from", "source", type=click.Path(path_type=Path), multiple=True,
              help="Local files instead of the hub: a folder with the splits, or the one data file "
                   "(alfworld: the folder alfworld-download filled, holding json_2.1.1/; alpacaeval: the "
                   "reference outputs, the Alpaca rows and df_gamed.csv, files or folders, --from each).")
def data_prepare(task: str, source: tuple[Path, ...]) -> None:
    """Put TASK's train and eval splits into the data cache."""
    from agent2rl_tui.tasks.data import prepare
    from agent2rl_tui.tasks.registry import task_cache

    try:
        t = load_task(task)
        meta = prepare(t, list(source))
    except USER_ERRORS as exc:
        _fail(exc)
    click.echo(f"{t.name}: {meta['train']} train and {meta['eval']} eval rows from {meta['source']}")
    if "lc_source" in meta:
        click.echo(f"length-controlled win rate data: {meta['lc_source']}")
    click.echo(f"in {task_cache(t)}")


@data_group.command("eval-space")
@click.argument("task")
def data_eval_space(task: str) -> None:
    """Write TASK's eval_space.json: the test-fold games no train-fold game matches (TextWorldExpress tasks)."""
    from agent2rl_tui.envs.base import EnvError
    from agent2rl_tui.envs.held_out import write_task_file

    try:
        path, held = write_task_file(load_task(task))
    except (*USER_ERRORS, EnvError) as exc:
        _fail(exc)
    fold = held.test_fold[1] - held.test_fold[0] + 1
    click.echo(f"{held.game} {held.params!r} (textworld-express {held.simulator}): the train fold holds "
               f"{held.train_contents} different games, the test fold {held.test_contents}; {held.shared_games} of "
               f"the test fold's {fold} games are a train-fold game, {len(held.games)} are not")
    click.echo(f"a run is graded on those {len(held.games)}: {path}")


@data_group.command("status")
def data_status() -> None:
    """Which tasks have their data ready, and where it came from."""
    from agent2rl_tui.tasks.registry import cache_root, task_cache

    click.echo(f"data cache: {cache_root()}")
    for name, folder in sorted(discover().items()):
        t = load_task(folder)
        if t.data.get("source") != "prepared":
            click.echo(f"{name:12} built in ({t.data.get('source')})")
            continue
        meta_path = task_cache(t) / "source.json"
        if meta_path.exists():
            meta = json.loads(meta_path.read_text())
            click.echo(f"{name:12} ready: {meta['train']} train / {meta['eval']} eval, from {meta['source']} "
                       f"({meta['prepared_at']})")
            if "lc_source" in meta:
                click.echo(f"{'':12} length-controlled win rate data: {meta['lc_source']}")
        else:
            click.echo(f"{name:12} not prepared: agent2rl-tui data prepare {name}")


@click.command("tiny-model")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--seed", default=0, show_default=True)
@click.option("--max-positions", default=4096, show_default=True,
              help="its context; GSM8K's reference 4-shot prompt takes about 2,900 of its tokens")
def tiny_model(path: Path, seed: int, max_positions: int) -> None:
    """Build the tiny Llama model and tokenizer at PATH (offline, in seconds)."""
    from agent2rl_tui.tasks.tinymodel import build_tiny_model

    out = build_tiny_model(path, seed=seed, max_positions=max_positions)
    click.echo(f"tiny model written to {out}")
