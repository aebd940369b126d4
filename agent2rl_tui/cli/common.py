"""What the commands share: the errors that are the user's to fix, printing the agent's text,
opening the TUI, the tiny model, the scaling charts."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

from agent2rl_tui.record.root import RunError
from agent2rl_tui.record.store import StoreError
from agent2rl_tui.util.inert import visible

if TYPE_CHECKING:
    from agent2rl_tui.review.index import RunSummary

USER_ERRORS = (RunError, StoreError, ValueError)
"""Errors a command shows as one line (a task's ``TaskError`` and a profile's ``ProfileError`` are
subclasses of ``ValueError``: caught here without importing the registry or the profiles)."""


def _fail(exc: Exception) -> NoReturn:
    raise click.ClickException(visible(str(exc)))


def _echo(text: str = "", *, err: bool = False, nl: bool = True) -> None:
    """Print text that may hold the agent's: its control characters shown as escapes."""
    click.echo(visible(text), err=err, nl=nl)


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _run_tui(root: Path | None, open_run: Path | None = None, open_campaign: Path | None = None) -> None:
    """The only place the CLI imports the UI (and so textual and rich)."""
    from agent2rl_tui.ui.app import Agent2RLApp

    Agent2RLApp(root=root, open_run=open_run, open_campaign=open_campaign).run()


def _tiny_model(root: Path) -> Path:
    """The demo's tiny model under ``<root>/.models``, built the first time."""
    from agent2rl_tui.tasks.tinymodel import build_tiny_model

    model = root / ".models" / "tiny-llama"
    if not (model / "config.json").exists():
        build_tiny_model(model)
        click.echo(f"built the tiny model in {model}")
    return model


def _write_plots(plots_dir: Path, runs: list[RunSummary]) -> None:
    """The scaling charts of ``runs`` (``review.scaling``), one path a line."""
    from agent2rl_tui.review.scaling import write_plots

    try:
        paths = write_plots(plots_dir, runs)
    except OSError as exc:
        _fail(exc)
    for path in paths:
        _echo(str(path))


def command_for(what: str, run_dir: Path) -> str:
    """The command line that does ``what`` (``run show``) to a run, naming its root when it is not
    the default one, so a hint works where it is pasted."""
    from agent2rl_tui.record.root import default_root

    root = run_dir.resolve().parent
    where = "" if root == default_root().resolve() else f" --root {root}"
    return f"agent2rl-tui{where} {what} {run_dir.name}"
