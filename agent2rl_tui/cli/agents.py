"""``agents`` and ``agents check``: the agent profiles, and each agent CLI tried for real."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from agent2rl_tui.cli.common import USER_ERRORS, _echo, _fail, _tiny_model
from agent2rl_tui.record.root import default_root
from agent2rl_tui.run.profiles import load_profiles
from agent2rl_tui.util.inert import one_line
from agent2rl_tui.util.timeutil import parse_duration


@click.group("agents", invoke_without_command=True)
@click.option("--profiles", "profiles", type=click.Path(path_type=Path), help="Agent profiles TOML file.")
@click.pass_context
def agents_cmd(ctx: click.Context, profiles: Path | None) -> None:
    """List agent profiles: built-in ones and those of your agents.toml (`agents check` tries them)."""
    ctx.obj["profiles"] = profiles
    if ctx.invoked_subcommand is not None:
        return
    try:
        found = load_profiles(profiles)
    except USER_ERRORS as exc:
        _fail(exc)
    for p in sorted(found.values(), key=lambda p: p.name):
        keys = " | ".join(" or ".join(g) for g in p.required_env) or "-"
        click.echo(f"{p.name:12} {p.stream_format:20} needs {keys:28} {p.description}")


@agents_cmd.command("check")
@click.argument("names", nargs=-1)
@click.option("--model", "model", type=click.Path(path_type=Path, exists=True, file_okay=False),
              help="Base model for the check's runs (default: the tiny model, built on first use).")
@click.option("--budget", default="3m", show_default=True, help="Each agent's budget (it needs 10-30 s).")
@click.pass_context
def agents_check_cmd(ctx: click.Context, names: tuple[str, ...], model: Path | None, budget: str) -> None:
    """Run each installed agent CLI (or NAMES) through a short contained run against the scripted
    driver, and say whether it starts, finds its tools, reaches the grader, submits, and whether
    its transcript and tokens are read. No real API is called. Exit code 1 if one fails."""
    from agent2rl_tui.run.agents_check import check_agents

    root = ctx.obj["root"] or default_root()
    model = model or _tiny_model(root)
    failed = 0
    try:
        for result in check_agents(list(names), model=model, root=root, profiles_path=ctx.obj["profiles"],
                                   budget_s=parse_duration(budget)):
            failed += _print_agent_check(result, named=bool(names))
    except USER_ERRORS as exc:
        _fail(exc)
    if failed:
        raise SystemExit(1)


def _print_agent_check(result: Any, *, named: bool) -> int:
    """One CLI's verdict; 1 when it counts as a failure (not installed counts only when named)."""
    if not result.installed:
        click.echo(f"{result.agent:12} not installed ({result.executable} is not on PATH): {result.install_hint}")
        return 1 if named else 0
    verdict = "OK" if result.ok else "FAILED"
    _echo(f"{result.agent:12} {verdict:6} {result.version or '?'} ({result.found}), {result.seconds:.0f} s")
    if result.error:
        _echo(f"{'':12} {one_line(result.error)}")
    for check in result.checks:
        mark = "ok" if check.ok else ("FAIL" if check.required else "note")
        _echo(f"{'':12} {mark:4} {check.what:32} {one_line(check.detail)}")
    if result.run_dir is not None:
        _echo(f"{'':12} run folder: {result.run_dir}")
    return 0 if result.ok else 1
