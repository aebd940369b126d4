"""Agent profiles: command lines, user TOML, pre-flight, environment, and real runs of them."""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from support.runs import cli

from agent2rl_tui.record.store import RunStore
from agent2rl_tui.run.profiles import BUILTIN_PROFILES, ProfileError, get_profile, load_profiles, preflight
from agent2rl_tui.run.prompt import build_prompt

WS = Path("/ws")


def test_builtin_command_lines_follow_the_documented_flags() -> None:
    claude = BUILTIN_PROFILES["claude-code"].argv(prompt="P", model="opus", workspace=WS)
    assert claude == ["claude", "-p", "P", "--output-format", "stream-json", "--verbose",
                      "--dangerously-skip-permissions", "--model", "opus"]
    assert "--model" not in BUILTIN_PROFILES["claude-code"].argv(prompt="P", model=None, workspace=WS)
    codex = BUILTIN_PROFILES["codex"].argv(prompt="P", model="gpt-5", workspace=WS)
    assert codex[:3] == ["codex", "exec", "--json"] and codex[-3:] == ["-m", "gpt-5", "P"]
    assert codex[codex.index("-c") + 1] == "allow_login_shell=false"  # root's /etc/profile resets PATH
    gemini = BUILTIN_PROFILES["gemini-cli"].argv(prompt="P", model="gemini-2.5-pro", workspace=WS)
    assert gemini[-2:] == ["-p", "P"] and "--output-format" in gemini and "stream-json" in gemini
    opencode = BUILTIN_PROFILES["opencode"].argv(prompt="P", model="anthropic/claude", workspace=WS)
    assert opencode[:4] == ["opencode", "run", "--format", "json"] and opencode[-1] == "P"
    oh = BUILTIN_PROFILES["openhands"]
    assert oh.argv(prompt="P", model="m", workspace=WS) == ["openhands", "--headless", "--json",
                                                            "--override-with-envs", "-t", "P"]
    assert oh.agent_env({"LLM_API_KEY": "k", "SECRET_OTHER": "x"}, "litellm/m") == {
        "LLM_API_KEY": "k", "LLM_MODEL": "litellm/m", "OPENHANDS_SUPPRESS_BANNER": "1"}
    assert {p.stream_format for p in BUILTIN_PROFILES.values()} == {
        "claude-stream-json", "codex-jsonl", "gemini-stream-json", "opencode-json", "openhands-json", "text"}


def test_only_base_and_declared_variables_reach_a_cli_agent() -> None:
    source = {"PATH": "/bin", "HOME": "/root", "ANTHROPIC_API_KEY": "sk-a", "OPENAI_API_KEY": "sk-o",
              "AWS_SECRET_ACCESS_KEY": "x"}
    env = BUILTIN_PROFILES["claude-code"].agent_env(source, None)
    assert env["ANTHROPIC_API_KEY"] == "sk-a" and env["IS_SANDBOX"] == "1"
    assert "OPENAI_API_KEY" not in env and "AWS_SECRET_ACCESS_KEY" not in env
    assert BUILTIN_PROFILES["command"].agent_env(source, None)["OPENAI_API_KEY"] == "sk-o"


def test_a_user_toml_overrides_extends_and_adds_profiles(tmp_path: Path) -> None:
    path = tmp_path / "agents.toml"
    path.write_text(
        '[agents.claude-code]\ndefault_model = "claude-sonnet-4-5"\n\n'
        '[agents.claude-proxy]\nextends = "claude-code"\nenv_pass = ["ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"]\n'
        '[agents.claude-proxy.env]\nANTHROPIC_BASE_URL = "http://127.0.0.1:4000"\n\n'
        '[agents.aider]\ncommand = "aider --yes-always --message {prompt}"\ninstructions_file = "CONVENTIONS.md"\n'
        'required_env = ["OPENAI_API_KEY"]\n'
    )
    profiles = load_profiles(path)
    assert profiles["claude-code"].default_model == "claude-sonnet-4-5"
    assert profiles["claude-code"].stream_format == "claude-stream-json"  # the rest is inherited
    proxy = profiles["claude-proxy"]
    assert proxy.command == BUILTIN_PROFILES["claude-code"].command
    assert proxy.agent_env({"ANTHROPIC_API_KEY": "k"}, None)["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:4000"
    aider = profiles["aider"]
    assert aider.argv(prompt="do it", model=None, workspace=WS) == ["aider", "--yes-always", "--message", "do it"]
    assert aider.required_env == (("OPENAI_API_KEY",),) and aider.stream_format == "text"
    assert get_profile("aider", path).instructions_file == "CONVENTIONS.md"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[agents.x]\nstream_format = 'json'\ncommand = ['x']\n", "stream_format must be one of"),
        ("[agents.x]\ncolour = 'red'\ncommand = ['x']\n", "unknown keys ['colour']"),
        ("[agents.x]\nextends = 'nope'\n", "extends unknown profile 'nope'"),
        ("[agents.x]\ndescription = 'no command'\n", "needs a command"),
        ("[agents.x\n", "not valid TOML"),
    ],
)
def test_bad_profile_files_say_what_is_wrong(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "agents.toml"
    path.write_text(text)
    with pytest.raises(ProfileError, match=re.escape(message)):
        load_profiles(path)


def test_preflight_names_the_missing_cli_and_the_missing_key() -> None:
    claude = BUILTIN_PROFILES["claude-code"]
    missing = replace(claude, command=("claude-not-installed-anywhere", *claude.command[1:]))
    with pytest.raises(ProfileError, match="'claude-not-installed-anywhere' .* is neither on PATH nor among the agent "
                                           "CLIs `make agent-clis` installs.*npm install -g @anthropic-ai/claude-code"):
        preflight(missing, {"PATH": "/nonexistent"})
    with pytest.raises(ProfileError, match="needs ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN"):
        preflight(replace(claude, command=("bash",)), {"PATH": os.environ["PATH"]})
    with pytest.raises(ProfileError, match="needs --command"):
        preflight(BUILTIN_PROFILES["command"], dict(os.environ))
    with pytest.raises(ProfileError, match="unknown agent 'robot'"):
        get_profile("robot")


def test_the_prompt_holds_task_rules_listing_data_and_budget(tmp_path: Path, tiny_model: Path) -> None:
    from support.runs import make_prepared_run

    run = make_prepared_run(tmp_path, tiny_model, budget_s=3600)
    prompt = build_prompt(run / "workspace", 3600)
    for needle in ("# Task: arith", "GRADING_SERVER_URL", "1h00m00s", "models/", "tiny-llama/",
                   "data/train.jsonl", '"question"', "merge_and_unload"):
        assert needle in prompt, needle


FAKE_CLAUDE = """#!{python}
import json, os, sys, pathlib
if sys.argv[1:] == ["--version"]:  # the pre-flight's check, inside the sandbox
    print("2.1.0 (Claude Code, a stand-in)")
    sys.exit(0)
prompt = sys.argv[sys.argv.index("-p") + 1]
pathlib.Path("code").mkdir(exist_ok=True)
pathlib.Path("code/seen.json").write_text(json.dumps({{
    "prompt_has_task": "# Task: arith" in prompt,
    "claude_md": pathlib.Path("CLAUDE.md").read_text() == prompt,
    "is_sandbox": os.environ.get("IS_SANDBOX"),
    "model": sys.argv[sys.argv.index("--model") + 1] if "--model" in sys.argv else None,
    "key_prefix": os.environ.get("ANTHROPIC_API_KEY", "")[:8],
    "openai_key": "OPENAI_API_KEY" in os.environ,
    "extra": len(os.environ.get("LLM_AUTH", "")),
}}))
lines = [
  {{"type": "system", "subtype": "init", "session_id": "s1", "model": "claude-test"}},
  {{"type": "assistant", "message": {{"id": "m1", "content": [{{"type": "text", "text": "Looking at the data"}},
      {{"type": "tool_use", "id": "t1", "name": "Bash", "input": {{"command": "ls data"}}}}],
      "usage": {{"input_tokens": 100, "output_tokens": 20}}}}}},
  {{"type": "user", "message": {{"content": [{{"type": "tool_result", "tool_use_id": "t1", "content": "train.jsonl"}}]}}}},
  {{"type": "result", "subtype": "success", "is_error": False, "result": "done", "total_cost_usd": 0.0123,
    "usage": {{"input_tokens": 100, "output_tokens": 20}}}},
]
for line in lines:
    print(json.dumps(line), flush=True)
print("not json at all", flush=True)
# Half an emoji, as a stream cut mid-character writes it: JSON-valid, not storable as UTF-8.
print('{{"type": "assistant", "message": {{"content": [{{"type": "text", "text": "cut \\\\ud83d here"}}]}}}}', flush=True)
print(json.dumps({{"type": "assistant", "message": {{"content": [{{"type": "text", "text": "still recording"}}]}}}}),
      flush=True)
print("a warning on stderr", file=sys.stderr, flush=True)
"""


@pytest.mark.usefixtures("scripted_grading")  # what is tested happens around the evaluations: graded without torch
@pytest.mark.slow
def test_a_cli_profile_runs_end_to_end_with_its_transcript(tmp_path: Path, tiny_model: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "claude"  # a stand-in for the external CLI, speaking its documented stream
    fake.write_text(FAKE_CLAUDE.format(python=sys.executable))
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "ANTHROPIC_API_KEY": "sk-ant-supersecret",
           "OPENAI_API_KEY": "sk-other"}
    proc = cli("run", "start", "--task", "arith", "--agent", "claude-code", "--driver", "claude-opus-4-1",
               "--model", str(tiny_model), "--budget", "60s", "--env", "LLM_AUTH=tok-supersecret",
               root=tmp_path / "runs", env=env, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = Path(re.search(r"run folder: (\S+)", proc.stdout).group(1))
    seen = json.loads((run / "workspace" / "code" / "seen.json").read_text())
    assert seen == {"prompt_has_task": True, "claude_md": True, "is_sandbox": "1", "model": "claude-opus-4-1",
                    "key_prefix": "a2r-run-",  # the meter holds the key: the CLI has its run's token
                    "openai_key": False, "extra": len("tok-supersecret")}
    with RunStore.of_run(run) as store:
        assert store.run().driver == "claude-opus-4-1"
        steps = [dict(r) for r in store.conn.execute("SELECT * FROM steps ORDER BY seq")]
    kinds = [s["kind"] for s in steps if s["role"] != "stderr"]
    assert kinds[:5] == ["system", "message", "tool_call", "tool_result", "result"]
    assert "raw" in kinds  # the garbled line is kept, not dropped
    texts = [s["text"] for s in steps]
    assert any(t.startswith("cut ") and t.endswith(" here") for t in texts)  # half an emoji: kept, repaired
    assert "still recording" in texts  # and the transcript goes on after it
    assert json.loads((run / "report" / "report.json").read_text())["status"] == "finished"
    call = next(s for s in steps if s["kind"] == "tool_call")
    assert call["tool"] == "Bash" and json.loads(call["args_json"]) == {"command": "ls data"}
    assert any(s["role"] == "stderr" and "a warning on stderr" in s["text"] for s in steps)
    report = json.loads((run / "report" / "report.json").read_text())
    assert report["transcript"]["tokens_in"] == 100 and report["transcript"]["tokens_out"] == 20
    assert report["transcript"]["cost_usd"] == pytest.approx(0.0123)
    assert (run / "logs" / "agent.jsonl").read_text().count("\n") == 7
    assert (run / "prompt.md").read_text().startswith("You are an ML engineer")
    # Secrets reach the agent but never the record.
    for path in run.rglob("*"):
        if path.is_file() and "workspace" not in path.parts and "snapshots.git" not in path.parts:
            blob = path.read_bytes()
            assert b"supersecret" not in blob, path


def test_preflight_failures_leave_no_run_behind(tmp_path: Path, tiny_model: Path) -> None:
    root = tmp_path / "runs"
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")}
    env["PATH"] = "/usr/bin:/bin"
    profiles = tmp_path / "agents.toml"  # a CLI installed nowhere, on PATH or by make agent-clis
    profiles.write_text('[agents.ghost]\nextends = "claude-code"\ncommand = ["ghost-cli-not-installed", "-p", "{prompt}"]\n')
    cases = [
        (["--agent", "ghost", "--profiles", str(profiles)], "is neither on PATH nor among the agent CLIs"),
        (["--agent", "example", "--gpus", "99"], r"no NVIDIA GPU is visible|only \d+ GPU\(s\) visible"),
    ]
    for args, message in cases:
        proc = cli("run", "start", "--task", "arith", "--model", str(tiny_model), *args, root=root, env=env)
        assert proc.returncode == 1 and re.search(message, proc.stderr), proc.stderr
    broken = tmp_path / "broken-model"
    broken.mkdir()
    (broken / "config.json").write_text('{"model_type": "no-such-architecture"}')
    (broken / "model.safetensors").write_bytes(b"x")
    proc = cli("run", "start", "--task", "arith", "--agent", "example", "--model", str(broken), root=root)
    assert proc.returncode == 1 and "does not load with transformers" in proc.stderr
    assert not root.exists() or not any(root.iterdir())


def test_agents_lists_profiles() -> None:
    proc = cli("agents")
    assert proc.returncode == 0
    for name in ("claude-code", "codex", "gemini-cli", "opencode", "openhands", "example", "command"):
        assert name in proc.stdout
