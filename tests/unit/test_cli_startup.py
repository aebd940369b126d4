"""The command line starts light: ``agent2rl-tui --help`` and ``agent2rl-tui runs`` load no model
library, no grader, no UI, and ``--help`` lists the commands without importing their modules
(``cli.LazyGroup``), from the first sentences declared in ``cli.COMMANDS``, which must be the
commands' own. How fast it starts is not asserted here (timings belong to bench/)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from support.synthetic import make_run

from agent2rl_tui import cli
from agent2rl_tui.record.store import RunStore

HEAVY = ("torch", "numpy", "transformers", "vllm", "textual", "rich", "git", "agent2rl_tui.grader",
         "agent2rl_tui.review.report", "agent2rl_tui.run.lifecycle", "agent2rl_tui.run.campaign",
         "agent2rl_tui.record.contamination.ngrams")
"""Modules (and their submodules) that neither `--help` nor `runs` may load."""


def loaded_by(*args: str) -> tuple[list[str], str]:
    """The modules a fresh interpreter holds after running ``agent2rl-tui ARGS``, and what it printed."""
    code = ("import json, sys\n"
            "from agent2rl_tui.cli import main\n"
            "try:\n"
            f"    main({list(args)!r}, prog_name='agent2rl-tui')\n"
            "except SystemExit as exc:\n"
            "    assert not exc.code, exc.code\n"
            "print('\\nMODULES ' + json.dumps(sorted(sys.modules)))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    printed, _, modules = out.stdout.rpartition("\nMODULES ")
    return json.loads(modules), printed


def heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]


def test_help_imports_no_command_module() -> None:
    modules, printed = loaded_by("--help")
    assert heavy(modules) == []
    assert [m for m in modules if m.startswith("agent2rl_tui.") and m != "agent2rl_tui.cli"] == []
    assert "runs        List runs with status, scores and budget used." in printed


def test_runs_loads_the_run_index_only(tmp_path: Path) -> None:
    run = make_run(tmp_path, "20261122T233320-arith-example")
    with RunStore.of_run(run) as store:  # read through the contamination result's typed reader
        store.event("supervisor", "contamination", "contamination check done", {"contaminated": True, "items": ["3"]})
    modules, printed = loaded_by("--root", str(tmp_path), "runs")
    assert heavy(modules) == []
    assert "20261122T233320-arith-example" in printed and "contaminated?" in printed
    modules, printed = loaded_by("--root", str(tmp_path), "runs", "--json")
    assert heavy(modules) == [] and json.loads(printed.strip())["contaminated"] is True


def test_the_listed_short_help_is_each_commands_own() -> None:
    ctx = click.Context(cli.main)
    assert sorted(cli.COMMANDS) == cli.main.list_commands(ctx)
    commands = {name: cli.main.get_command(ctx, name) for name in cli.COMMANDS}
    for name, command in commands.items():
        assert command is not None and command.name == name
        declared = click.Command(name, help=cli.COMMANDS[name][2])
        for limit in range(1, 400):  # the listing cuts the first sentence to fit the terminal
            assert declared.get_short_help_str(limit) == command.get_short_help_str(limit), (name, limit)
    eager = click.Group(cli.main.name, commands=list(commands.values()), params=cli.main.params, help=cli.main.help,
                        invoke_without_command=True)
    for width in (40, 80, 120, 200):
        lazy_help = CliRunner().invoke(cli.main, ["--help"], prog_name="agent2rl-tui", terminal_width=width)
        eager_help = CliRunner().invoke(eager, ["--help"], prog_name="agent2rl-tui", terminal_width=width)
        assert lazy_help.exit_code == 0 and lazy_help.output == eager_help.output


@pytest.mark.parametrize(("args", "hint"), [(["runz"], "(Did you mean one of: 'run', 'runs'?)"),
                                            (["camp"], "Did you mean 'campaign'?"),
                                            (["run", "shw"], "Did you mean 'show'?")])
def test_a_mistyped_command_is_offered_the_close_ones(args: list[str], hint: str) -> None:
    result = CliRunner().invoke(cli.main, args, prog_name="agent2rl-tui")
    assert result.exit_code == 2 and f"No such command '{args[-1]}'. {hint}" in result.output


def test_python_dash_m_runs_the_command_line() -> None:
    out = subprocess.run([sys.executable, "-m", "agent2rl_tui.cli", "run", "--help"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.startswith("Usage: python -m agent2rl_tui.cli run [OPTIONS] COMMAND")
