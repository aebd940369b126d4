"""``runs``: every run under the root, a line each (or JSON).

Apart from ``run`` (cli/runs.py), whose ``start`` builds its options from every run setting at
import: listing runs is the command people type most, and it loads only the run index.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from agent2rl_tui.cli.common import _echo, _fmt
from agent2rl_tui.record.root import default_root
from agent2rl_tui.review.index import list_runs
from agent2rl_tui.util.inert import one_line
from agent2rl_tui.util.timeutil import human_duration


@click.command("runs")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per run.")
@click.pass_context
def runs_cmd(ctx: click.Context, as_json: bool) -> None:
    """List runs with status, scores and budget used."""
    runs = list_runs(ctx.obj["root"])
    if as_json:
        for r in runs:
            fields = {k: v for k, v in r.__dict__.items() if k not in ("path", "usage")}
            click.echo(json.dumps({**fields, "path": str(r.path), "improvement": r.improvement,
                                   "usage": r.usage.as_json() if r.usage else None}))
        return
    print_runs(runs, ctx.obj["root"])


def print_runs(runs: list[Any], root: Path | None = None) -> None:
    """One line a run: id, status, task, agent, baseline, best, improvement, submissions, budget used."""
    if not runs:
        click.echo(f"no runs under {root or default_root()}")
        return
    header = f"{'run':44} {'status':9} {'task':8} {'agent':8} {'base':>7} {'best':>7} {'delta':>7} {'subs':>4} {'used':>8}"
    click.echo(header)
    for r in runs:
        _echo(
            f"{one_line(r.id):44} {one_line(r.status):9} {one_line(r.task):8} {one_line(r.agent):8} "
            f"{_fmt(r.baseline):>7} {_fmt(r.best):>7} "
            f"{_fmt(r.improvement):>7} {r.n_submissions:>4} {human_duration(r.budget_used_s):>8}"
            + (f"  {one_line(r.flags)}" if r.flags else "")
        )
