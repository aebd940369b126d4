"""``demo``: the tiny model and the example agent on an offline task, in the TUI or printed."""

from __future__ import annotations

import os
import sys

import click

from agent2rl_tui.cli.common import USER_ERRORS, _fail, _run_tui, _tiny_model
from agent2rl_tui.cli.runs import _print_result, follow
from agent2rl_tui.record.root import default_root
from agent2rl_tui.run.request import RunRequest
from agent2rl_tui.util.timeutil import parse_duration

DEMOS: dict[str, tuple[str, dict[str, str]]] = {
    "arith": ("5m", {}),
    "coin": ("15m", {"EXAMPLE_SFT_STEPS": "300", "EXAMPLE_GRPO_STEPS": "200", "EXAMPLE_GENERATIONS": "8"}),
}
"""The tasks `demo` runs on a laptop's CPU: each one's budget and the example agent's settings
(its stages sized to end well inside the budget; bench/rl_vs_sft.py measures coin's stages
against each other)."""


@click.command("demo")
@click.option("--task", "task_name", type=click.Choice(sorted(DEMOS)), default="arith", show_default=True,
              help="arith: SFT then GRPO on sums (about a minute); coin: the paper's Level-3 route on a text "
                   "game, SFT on the gold paths then GRPO with online rollouts (about 10 minutes).")
@click.option("--budget", help="The run's budget (default: the task's demo budget, 5m for arith).")
@click.option("--no-tui", is_flag=True, help="Print progress instead of opening the TUI.")
@click.pass_context
def demo(ctx: click.Context, task_name: str, budget: str | None, no_tui: bool) -> None:
    """Build the tiny model and run the example agent on an offline task (arith by default).

    In a terminal the TUI opens on the live run; otherwise progress and the result are printed.
    """
    from agent2rl_tui.run.lifecycle import start_run

    root = ctx.obj["root"] or default_root()
    model = _tiny_model(root)
    tui = sys.stdout.isatty() and not no_tui
    default_budget, settings = DEMOS[task_name]
    for key, value in settings.items():  # the example agent reads them; a user's own values win
        os.environ.setdefault(key, value)
    try:
        req = RunRequest(task=task_name, agent="example", model=model, budget_s=parse_duration(budget or default_budget),
                         grace_s=10.0, root=root)
        run_dir, _pid = start_run(req)
    except USER_ERRORS as exc:
        _fail(exc)
    if tui:
        _run_tui(root, open_run=run_dir)
        click.echo(f"run folder: {run_dir}")
        _print_result(run_dir)
    else:
        click.echo(f"run {run_dir.name} started")
        click.echo(f"run folder: {run_dir}")
        follow(run_dir)
