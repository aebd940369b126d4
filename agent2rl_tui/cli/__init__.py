"""The ``agent2rl-tui`` command line: start, list, show and stop runs; build the tiny model.

One front end over the run and record layers (the TUI is the other). Nothing here imports
textual or rich except the command that opens the TUI. Whatever prints the record prints
through ``_echo`` (control characters as escapes) and puts each agent-made field on one
line (``one_line``): an agent's text never drives the terminal nor forges a row
(``util.inert``). ``run cat`` and ``run diff`` print the same way unless given ``--raw``.

This module holds the ``main`` group and its global option; each command lives in the module
of its group (``COMMANDS``), imported only when that command runs or shows its help, so that
``agent2rl-tui --help`` and ``agent2rl-tui runs`` start without the grader, numpy, the report
or the campaigns (tests/unit/test_cli_startup.py). What the commands share is in ``cli.common``.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import click

COMMANDS: dict[str, tuple[str, str, str]] = {
    "agents": ("agents", "agents_cmd",
               "List agent profiles: built-in ones and those of your agents.toml (`agents check` tries them)."),
    "campaign": ("campaign", "campaign_group",
                 "Repeated runs over a matrix of tasks, agents, drivers, base models and seeds, queued."),
    "compare": ("report", "compare_cmd",
                "Group runs run alike: mean ± sd, bootstrap 95% CIs, expected best of k."),
    "data": ("tasks", "data_group", "Prepare tasks' data in the local cache (runs never download)."),
    "demo": ("demo", "demo", "Build the tiny model and run the example agent on an offline task (arith by default)."),
    "doctor": ("doctor", "doctor_cmd",
               "What works on this machine, part by part, and what fixes the rest (every part, or PARTS): python, "
               "torch, packages, bubblewrap, alfworld, textworld, java, chromium, slurm, agents, data, disk, vllm. "
               "vLLM's check grades one item with the tiny model (30-60 s on a CPU)."),
    "export": ("report", "export_cmd",
               "Write a run in another tool's format: an Inspect AI eval log (the agent's transcript as messages "
               "and tool events, each submission's score, best of budget, baseline and improvement)."),
    "open": ("runs", "open_cmd", "Open one run folder in the TUI (live or finished, here or copied from elsewhere)."),
    "prompt": ("tasks", "prompt_cmd", "Print the prompt template every coding agent gets."),
    "report": ("report", "report_cmd",
               "Write a run's report again (report/report.md and report.json); with --summarizer-url and "
               "--summarizer-model, first a narrative of each iteration (report/narrative.json, cached); with "
               "--html, also the whole report as one HTML page (report/report.html, or --out PATH)."),
    "run": ("runs", "run_group", "Start, show and stop runs."),
    "runs": ("listing", "runs_cmd", "List runs with status, scores and budget used."),
    "tasks": ("tasks", "tasks_cmd", "List the tasks the registry finds."),
    "tiny-model": ("tasks", "tiny_model", "Build the tiny Llama model and tokenizer at PATH (offline, in seconds)."),
    "tui": ("runs", "tui_cmd", "Open the TUI on the Runs screen (what `agent2rl-tui` alone does in a terminal)."),
}
"""Each command of ``main``: the module of ``agent2rl_tui.cli`` that defines it, its name there, and
the first sentence of its help, which ``agent2rl-tui --help`` lists without importing the module
(a test checks that each is the command's own)."""


def hoist_root(args: list[str]) -> list[str]:
    """``args`` with every ``--root DIR`` / ``--root=DIR`` before a ``--`` moved to the front, in order."""
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest += args[i:]
            break
        if arg == "--root" and i + 1 < len(args):
            front += args[i:i + 2]
            i += 2
            continue
        if arg.startswith("--root="):
            front.append(arg)
        else:
            rest.append(arg)
        i += 1
    return front + rest


class LazyGroup(click.Group):
    """A click group whose commands are imported when one is run or its help is shown (click's
    "lazy loading subcommands"); its own ``--help`` lists them from the declared first sentences."""

    def __init__(self, *args: object, lazy: dict[str, tuple[str, str, str]], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.lazy = lazy
        self._listing = False

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.lazy:
            return super().get_command(ctx, cmd_name)
        module, name, short = self.lazy[cmd_name]
        if self._listing:  # the listing needs only the help's first sentence: the same short help, unimported
            return click.Command(cmd_name, help=short)
        command = getattr(importlib.import_module(f"{__name__}.{module}"), name)
        assert isinstance(command, click.Command) and command.name == cmd_name, (module, name)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self._listing = True
        try:
            super().format_commands(ctx, formatter)
        finally:
            self._listing = False

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """``--root`` is the group's, but people type it where they type the rest: after the
        subcommand too (``run start ... --root DIR``). It is moved in front before click reads it."""
        return super().parse_args(ctx, hoist_root(args) if ctx.parent is None else args)

    def invoke(self, ctx: click.Context) -> object:
        """Any command: a full disk is said in one line that names it, not with a traceback."""
        try:
            return super().invoke(ctx)
        except Exception as exc:
            from agent2rl_tui.util.diskfull import disk_full_message, is_disk_full  # only now: --help stays light

            if not is_disk_full(exc):
                raise
            from agent2rl_tui.record.root import default_root

            where = (ctx.obj or {}).get("root") or default_root()
            raise click.ClickException(f"{disk_full_message(Path(where))}: free some space and try again") from None

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as exc:  # click offers close matches among the commands it holds: offer ours
            no_such = getattr(click.exceptions, "NoSuchCommand", None)  # click >= 8.4
            if no_such is None or not isinstance(exc, no_such):
                raise
            raise no_such(exc.command_name, possibilities=self.list_commands(ctx), ctx=ctx) from None


@click.group(cls=LazyGroup, lazy=COMMANDS, invoke_without_command=True)
@click.option("--root", type=click.Path(path_type=Path), help="Folder of run folders (default: workspaces/).")
@click.pass_context
def main(ctx: click.Context, root: Path | None) -> None:
    """Agent² RL-Bench on one workstation: run coding agents that post-train models."""
    ctx.ensure_object(dict)
    ctx.obj["root"] = root
    if ctx.invoked_subcommand is None:
        if sys.stdout.isatty():
            from agent2rl_tui.cli.common import _run_tui

            _run_tui(root)
            return
        from agent2rl_tui.cli.listing import print_runs
        from agent2rl_tui.review.index import list_runs

        print_runs(list_runs(root), root)
        click.echo("\n`agent2rl-tui --help` lists the commands; `agent2rl-tui demo` runs the demo.")
