"""Run options declared once, on the fields that hold them (record/runconfig.py, run/request.py,
gathered by run/options.py): the CLI's flags, the campaign file's [options] and the New Run
form's fields all come from the one declaration."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from agent2rl_tui import cli
from agent2rl_tui.cli import runs as cli_runs
from agent2rl_tui.record.root import RunError
from agent2rl_tui.record.runconfig import RunConfig
from agent2rl_tui.run import lifecycle, options
from agent2rl_tui.run.campaign import RUN_OPTIONS, CampaignSpec
from agent2rl_tui.run.request import RunRequest

CAMPAIGN_KEYS = {"eval_limit", "eval_timeout_s", "prompt_profile", "env", "judge", "search", "store", "engine",
                 "contain", "read_only_paths", "writable_paths", "allow_missing_key", "grace", "keep_submissions",
                 "eval_memory_gib", "driver_url", "meter", "max_tokens", "max_cost_usd", "prices_path", "eval_seed",
                 "mode"}
"""The keys campaign files have always taken: none may be lost."""

CAMPAIGN = """name = "x"
tasks = ["arith"]
base_models = ["/models/m"]
[[agents]]
agent = "command"
command = "true"
[options]
"""


def squeeze(text: str) -> str:
    return "".join(text.split())


def test_every_declared_flag_is_in_run_start_help_with_its_help() -> None:
    result = CliRunner().invoke(cli.main, ["run", "start", "--help"], terminal_width=100)
    assert result.exit_code == 0, result.output
    shown = squeeze(result.output)  # click wraps (also at hyphens): compare without whitespace
    for flag in options.flags():
        assert flag.name in result.output
        if flag.help:
            assert squeeze(flag.help) in shown, flag.name
    params = {p.name: p for p in cli_runs.run_start.params if isinstance(p, click.Option)}
    for flag in options.flags():
        param = params.pop(flag.dest)
        assert param.opts == [flag.name] and param.help == flag.help
        assert (param.required, param.multiple, param.is_flag) == (flag.required, flag.multiple, flag.kind == "flag")
        if flag.default is not None:
            assert param.default == flag.default
    assert set(params) == {"detach"}  # the one flag of the command, not of the run


def test_every_request_field_is_declared_once() -> None:
    declared = [o.field for o in options.OPTIONS]
    assert len(declared) == len(set(declared))
    assert {o.field for o in options.OPTIONS if not o.in_config} | {"root", "config"} == {
        f.name for f in fields(RunRequest)}
    decided_by_the_run = {"task_folder", "agent_command", "eval_timeout_s", "decoding_row", "agent_env", "profile",
                          "max_submission_gib", "max_queued", "train_env", "scripted_worker", "rest"}
    assert {o.field for o in options.OPTIONS if o.in_config} | decided_by_the_run == {
        f.name for f in fields(RunConfig)}
    dests = [f.dest for f in options.flags()]
    assert len(dests) == len(set(dests))


def test_a_new_option_is_one_field() -> None:
    """A setting declared on a config class is a flag, a form field, a campaign key and a JSON
    key at once, read back by the config's derived reader: nothing else is written for it."""
    from dataclasses import dataclass

    from agent2rl_tui.record.setting import Flag, FormField, setting

    @dataclass(frozen=True)
    class WithNewOption(RunConfig):
        max_episodes: int | None = setting(None, rank=305, group="eval", flags=(Flag(
            "--max-episodes", "max_episodes", "At most N episodes per game.", kind="int",
            form=FormField("max episodes")),), campaign="max_episodes")

    gathered = options.declared(RunRequest, WithNewOption)
    assert [o.field for o in gathered] == [o.field for o in options.OPTIONS] + ["max_episodes"]
    new = gathered[-1]
    assert new.in_config and new.campaign == "max_episodes" and new.flags[0].form == FormField("max episodes")
    assert new.value_from_flags({"max_episodes": 7}) == 7 and new.value_from_campaign(3) == 3
    assert WithNewOption(max_episodes=7).to_json()["max_episodes"] == 7  # recorded
    assert WithNewOption.from_json('{"max_episodes": 7}').max_episodes == 7  # read back
    assert WithNewOption.from_json('{"max_episodes": "7"}').max_episodes is None  # mistyped: the default
    assert "max_episodes" not in WithNewOption.from_json('{"max_episodes": 7}').rest


def test_every_campaign_option_is_declared() -> None:
    assert set(RUN_OPTIONS) == CAMPAIGN_KEYS
    for key in RUN_OPTIONS:
        assert options.CAMPAIGN_OPTIONS[key].campaign == key


def test_an_unknown_campaign_option_is_refused_with_the_known_ones() -> None:
    with pytest.raises(RunError) as caught:
        CampaignSpec.from_toml(CAMPAIGN + "colour = 'red'\n")
    message = str(caught.value)
    assert "unknown [options] ['colour']" in message
    assert all(key in message for key in CAMPAIGN_KEYS)


def test_an_unknown_key_anywhere_in_a_campaign_file_is_refused_naming_it() -> None:
    """Issue 41 (4): a typo among the top-level keys started the campaign without a word."""
    top = CAMPAIGN.replace("[[agents]]", "max_paralel = 2\n[[agents]]")
    with pytest.raises(RunError, match=r"unknown key\(s\) max_paralel \(did you mean max_parallel\?\)"):
        CampaignSpec.from_toml(top)
    with pytest.raises(RunError, match=r"unknown key\(s\) driver in \[\[agents\]\] \(did you mean drivers\?\)"):
        CampaignSpec.from_toml(CAMPAIGN.replace('command = "true"', 'command = "true"\ndriver = "x"'))
    assert CampaignSpec.from_toml(CAMPAIGN.replace("[[agents]]", "max_parallel = 2\n[[agents]]")).max_parallel == 2


def test_two_agents_that_would_share_a_cell_are_refused(tmp_path: Path) -> None:
    """A cell's key names the agent, not its command: two command agents in one file were one cell in
    the results, their runs' statistics merged. A new campaign is refused before anything is made."""
    from agent2rl_tui.run.campaign.queue import create_campaign

    two = CAMPAIGN + '\n[[agents]]\nagent = "command"\ncommand = "python other.py"\n'
    with pytest.raises(RunError, match=r"two cells would both be .*command.*commands 'true' and 'python other.py'"
                                       r".*name each command as an agent of its own in agents.toml"):
        create_campaign(two, root=tmp_path)
    with pytest.raises(RunError, match="the same entry twice"):
        create_campaign(CAMPAIGN.replace('tasks = ["arith"]', 'tasks = ["arith", "arith"]'), root=tmp_path)
    assert not any(tmp_path.iterdir())
    assert len(CampaignSpec.from_toml(two).cells) == 2  # an existing folder's file still reads


def test_campaign_options_become_the_request_fields() -> None:
    spec = CampaignSpec.from_toml(CAMPAIGN + 'grace = "10s"\nenv = { A = "1" }\nread_only_paths = ["/tmp"]\n'
                                  'judge = { base_url = "u", model = "m" }\nmeter = false\nstore = { url = "w" }\n')
    req = spec.request(spec.cells[0], 3, Path("/runs"))
    cfg = req.config
    assert (req.grace_s, req.agent_env, cfg.read_only_paths) == (10.0, {"A": "1"}, ("/tmp",))
    assert (cfg.judge, cfg.meter, cfg.webshop, req.seed) == ({"base_url": "u", "model": "m"}, False, {"url": "w"}, 3)
    assert CampaignSpec.from_toml(CAMPAIGN).request(spec.cells[0], 0, Path("/runs")).grace_s == 30.0


def test_run_start_maps_its_flags_to_the_request(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: list[RunRequest] = []

    def start_run(req: RunRequest) -> Any:
        seen.append(req)
        raise RunError("stop here")

    monkeypatch.setattr(lifecycle, "start_run", start_run)  # `run start` imports it when it runs
    corpus = tmp_path / "c.jsonl"
    result = CliRunner().invoke(cli.main, [
        "--root", str(tmp_path), "run", "start", "--task", "arith", "--agent", "command", "--model", "/m",
        "--grace", "0", "--env", "A=1", "--engine", "vllm", "--engine-option", "dtype=bfloat16",
        "--judge-url", "http://j/v1", "--judge-model", "jm", "--judge-concurrency", "2", "--search-corpus",
        str(corpus), "--webshop-url", "http://w", "--no-contain", "--no-meter", "--max-cost", "1.5",
        "--eval-timeout", "2m", "--summarizer-url", "http://s/v1", "--summarizer-model", "sm"])
    assert "stop here" in result.output
    req = seen[0]
    assert (req.task, req.agent, req.model, req.budget_s, req.grace_s, req.root) == (
        "arith", "command", Path("/m"), 300.0, 0.0, tmp_path)
    cfg = req.config
    assert req.agent_env == {"A": "1"} and cfg.engine == {"dtype": "bfloat16", "engine": "vllm"}
    assert cfg.judge == {"base_url": "http://j/v1", "model": "jm", "concurrency": 2}
    assert cfg.search == {"corpus": str(corpus)} and cfg.webshop == {"url": "http://w"}
    assert (cfg.contain, cfg.meter, cfg.max_cost_usd, req.eval_timeout_s) == (False, False, 1.5, 120.0)
    assert cfg.summarizer is not None and cfg.summarizer["model"] == "sm"
    bare = options.request_from_flags({"task": "t", "agent": "a", "model": Path("/m"), "budget": "5m"})
    assert bare == RunRequest.of(task="t", agent="a", model=Path("/m"), budget_s=300.0, judge={})


def test_a_bad_pair_is_a_bad_parameter_of_its_flag() -> None:
    result = CliRunner().invoke(cli.main, ["run", "start", "--task", "arith", "--agent", "command", "--model",
                                           "/m", "--env", "NOEQUALS"])
    assert result.exit_code == 2 and "Invalid value for --env: 'NOEQUALS' is not KEY=VALUE" in result.output


@pytest.mark.asyncio
async def test_the_new_run_form_shows_the_declared_fields(tmp_path: Path) -> None:
    from textual.app import App
    from textual.widgets import Input, Label

    from agent2rl_tui.ui.screens.new_run import FORM_FLAGS, NewRunScreen

    class FormApp(App[None]):
        def on_mount(self) -> None:
            self.push_screen(NewRunScreen(tmp_path))

    async with FormApp().run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        form = pilot.app.screen
        assert isinstance(form, NewRunScreen)
        for name in (*FORM_FLAGS, "--search-key-env", "--allow-missing-key"):
            flag = options.flag(name)
            assert flag.form is not None, name
            widget = form.query_one(f"#{flag.widget_id}")
            label = widget.parent.query_one(Label)
            assert str(label.render()) == flag.form.label
            if isinstance(widget, Input):
                assert widget.placeholder == flag.form.placeholder
        assert form.query_one("#budget", Input).value == options.flag("--budget").default == "5m"  # as `run start`
        shown = {f.name for f in options.flags() if f.form is not None}
        assert shown == {*FORM_FLAGS, "--search-key-env", "--allow-missing-key"}


def test_an_agent_cli_make_installed_is_found_where_path_has_none(tmp_path: Path) -> None:
    """Issue 41 (4): `agents check`, the pre-flight and the run find the CLIs of `make agent-clis`
    (.agent-clis/) when PATH has none; only the folder of the CLI asked for is added."""
    from agent2rl_tui.run.profiles import path_with_agent_clis

    npm_bin = tmp_path / ".agent-clis" / "node_modules" / ".bin"
    venv_bin = tmp_path / ".agent-clis" / "openhands" / "bin"
    for folder, name in ((npm_bin, "claude"), (venv_bin, "openhands"), (venv_bin, "pip")):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("#!/bin/sh\n")
        (folder / name).chmod(0o755)
    on_path = tmp_path / "bin"
    on_path.mkdir()
    assert path_with_agent_clis(str(on_path), "claude", tmp_path) == f"{on_path}:{npm_bin}"
    assert path_with_agent_clis(str(on_path), "openhands", tmp_path) == f"{on_path}:{venv_bin}"
    (on_path / "claude").write_text("#!/bin/sh\n")
    (on_path / "claude").chmod(0o755)
    assert path_with_agent_clis(str(on_path), "claude", tmp_path) == str(on_path)  # PATH's own wins
    assert path_with_agent_clis(str(on_path), "codex", tmp_path) == str(on_path)  # nowhere: PATH as it was
