"""The real agent CLIs, contained, against the scripted driver, through `agent2rl-tui run start`.

`make test` installs Claude Code, Codex, Gemini CLI and OpenCode at the versions pinned in
locks/agent-clis/ into .agent-clis/ (npm), and OpenHands from locks/openhands.txt into
.agent-clis/openhands (a Python 3.12 venv); where one is missing its tests skip and say how to
install it (under CI they fail: tests/support/skip_policy.py). Each CLI runs a whole arith run with the
tiny model, with no flag beyond the driver's URL: the scripted driver (a real process, agent2rl_tui/llm/scripted.py) plays its
model for four steps (run a command, write a file, run it and submit, answer). Checked: the
commands ran in the sandbox, the revision holds the file it wrote, the submission is scored,
the transcript has its tool calls, its home was the run's own. OpenHands is also checked on a
stream it printed here (tests/fixtures/streams/).

Also here, without the CLIs: the sandbox starts a CLI wherever it is installed (an npm prefix
under the home, a uv tool's venv), the pre-flight refuses one it cannot start, and the run's
own home gets the CLI's configuration and login and nothing else.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.paths import FIXTURES, REPO
from support.runs import cli, wait_for

from agent2rl_tui.record.revisions import file_at, list_revisions
from agent2rl_tui.record.store import RunStore
from agent2rl_tui.review.index import summarize
from agent2rl_tui.run import containment
from agent2rl_tui.run.profiles import BUILTIN_PROFILES, ProfileError, driver_setup
from agent2rl_tui.run.streams import normalize_lines

AGENT_CLIS = REPO / ".agent-clis"
BIN = AGENT_CLIS / "node_modules" / ".bin"
PINS: dict[str, str] = json.loads((REPO / "locks" / "agent-clis" / "package.json").read_text())["dependencies"]
UNAVAILABLE = containment.probe()
needs_bwrap = pytest.mark.skipif(UNAVAILABLE is not None, reason=f"containment unavailable: {UNAVAILABLE}")
STREAMS = FIXTURES / "streams"
# The runs are graded by a scripted worker: each CLI's part (sandbox, driver, stream, meter) is
# what is tested here; grading with a model is the end-to-end run's (test_run_e2e).
pytestmark = pytest.mark.usefixtures("scripted_grading")

# profile -> (executable, npm package, the key variable it needs: any value does for the driver)
CLIS = {
    "claude-code": ("claude", "@anthropic-ai/claude-code", "ANTHROPIC_API_KEY"),
    "codex": ("codex", "@openai/codex", "CODEX_API_KEY"),
    "gemini-cli": ("gemini", "@google/gemini-cli", "GEMINI_API_KEY"),
    "opencode": ("opencode", "opencode-ai", "OPENAI_API_KEY"),
    "openhands": ("openhands", None, "LLM_API_KEY"),  # pip (Python 3.12): locks/openhands.txt
}
OPENHANDS = shutil.which("openhands") or next(
    (str(p) for p in [AGENT_CLIS / "openhands" / "bin" / "openhands"] if p.exists()), None)


def installed(exe: str) -> bool:
    return (BIN / exe).exists()


def needs_cli(exe: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(not installed(exe), reason=(
        f"{exe} is not installed in .agent-clis/: `make agent-clis` installs the pinned CLIs (needs npm), "
        f"or npm install --prefix .agent-clis {' '.join(f'{p}@{v}' for p, v in PINS.items())}"))


SUBMIT = ("python -c 'import json, os, urllib.request as u; "
          "r = u.Request(os.environ[\"GRADING_SERVER_URL\"] + \"/submit?wait=0\", "
          "data=json.dumps({\"model_path\": \"output/v1\"}).encode(), headers={\"Content-Type\": \"application/json\"}); "
          "print(\"submit answered\", u.urlopen(r, timeout=120).status)'")


def script_for(name: str) -> dict:
    """Four steps: a command (is python there, as the sandbox runs it?), a file written with the
    CLI's own write tool, that file run and a submission, the answer."""
    tag = name.replace("-", "_")
    return {"steps": [
        {"run": "cp -r models/$BASE_MODEL output/v1 && python -c 'import sys; print(\"python\", sys.version_info[0])'",
         "say": "Copying the base model."},
        {"write": {"path": f"code/hello_{tag}.py", "content": f"print('written by {name}')\n"}},
        {"run": f"python code/hello_{tag}.py && {SUBMIT}"},
        {"answer": "Submitted output/v1."},
    ]}


class Driver:
    """The scripted driver as a real process: its URL, and the calls it served."""

    def __init__(self, folder: Path, script: dict) -> None:
        path = folder / "script.json"
        path.write_text(json.dumps(script))
        self.log = folder / "driver-calls.jsonl"
        # --priced: answered as the real API would, so the meter's pricing of each CLI's calls is tried too.
        self.proc = subprocess.Popen([sys.executable, "-m", "agent2rl_tui.llm.scripted", "--script", str(path),
                                      "--log", str(self.log), "--priced"], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.url = (self.proc.stdout.readline() if self.proc.stdout else "").strip()
        assert self.url.startswith("http://"), self.proc.stderr.read() if self.proc.stderr else ""

    def calls(self) -> list[dict]:
        return [json.loads(line) for line in self.log.read_text().splitlines()] if self.log.exists() else []

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


def run_folder(stdout: str) -> Path:
    return Path(re.search(r"run folder: (\S+)", stdout).group(1))


def start_run(name: str, driver: Driver, tiny_model: Path, root: Path, env: dict[str, str]) -> tuple[Path, float]:
    started = time.monotonic()
    proc = cli("run", "start", "--task", "arith", "--agent", name, "--model", str(tiny_model),
               "--driver-url", driver.url, "--budget", "5m", "--grace", "5s", root=root, env=env, timeout=900)
    took = time.monotonic() - started
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "NOT CONTAINED" not in proc.stdout + proc.stderr
    return run_folder(proc.stdout), took


def cli_env(name: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "CODEX_", "GEMINI_",
                                                                     "GOOGLE_", "LLM_"))}
    where = Path(OPENHANDS).parent if name == "openhands" and OPENHANDS else BIN
    env["PATH"] = f"{where}{os.pathsep}{env['PATH']}"
    env[CLIS[name][2]] = "sk-scripted-not-a-key"
    env.update(extra)
    return env


def check_run(run: Path, name: str, driver: Driver) -> dict:
    """What every CLI's run must show; the report, for more."""
    tag = name.replace("-", "_")
    report = json.loads((run / "report" / "report.json").read_text())
    log = (run / "logs" / "agent.log").read_text(errors="replace")
    assert report["status"] == "finished", log[-3000:]
    assert report["agent_exit_code"] == 0, log[-3000:]
    assert report["containment"]["contained"] is True
    # Its commands ran, in the sandbox, with the workspace's python on PATH.
    assert (run / "workspace" / "output" / "v1" / "config.json").is_file(), log[-3000:]
    with RunStore.of_run(run) as store:
        subs = store.submissions(kind="agent")
        steps = [dict(r) for r in store.conn.execute("SELECT * FROM steps ORDER BY seq")]
        events = {e["kind"]: json.loads(e["data_json"] or "{}") for e in store.events()}
    results = "\n".join(s["text"] for s in steps if s["kind"] == "tool_result")
    assert "python 3" in results and f"written by {name}" in results and "submit answered 202" in results, results
    # The revision holds the file it wrote, byte for byte.
    final = list_revisions(run)[-1]
    assert file_at(run, final, f"code/hello_{tag}.py") == f"print('written by {name}')\n".encode()
    # Its submission was scored.
    assert [(s.status, s.model_path) for s in subs] == [("scored", "output/v1")], [(s.status, s.error) for s in subs]
    # The transcript has its tool calls: two commands and a write (some CLIs write through the shell).
    calls = [s for s in steps if s["kind"] == "tool_call"]
    assert len(calls) >= 3, [(s["kind"], s["text"][:80]) for s in steps]
    assert any(f"hello_{tag}.py" in (s["args_json"] or "") for s in calls)
    # Every step of the script was served, and the run recorded the driver.
    served = {c["step"] for c in driver.calls() if c.get("step") is not None}
    assert served >= {0, 1, 2, 3}, driver.calls()
    assert events["agent_home"]["driver_url"] == driver.url
    # The tokens the stream reported are those the driver served (a normal end): every call for
    # Claude Code (its result's usage), Codex (per turn) and Gemini CLI (its result's stats);
    # OpenCode's stream reports its steps only, not the side call that titles the session.
    # OpenHands' events carry no usage at all.
    billed = [c for c in driver.calls() if c.get("usage") and (name != "opencode" or c.get("step") is not None)
              and name != "openhands"]
    if name != "openhands":
        assert (report["transcript"]["tokens_in"], report["transcript"]["tokens_out"]) == (
            sum(c["usage"]["input_tokens"] for c in billed), sum(c["usage"]["output_tokens"] for c in billed))
    # The meter stood between the CLI and the driver: every call it served, side calls included,
    # is a row, and the run's tokens are exactly what was served, whatever the stream said.
    check_metered(run, driver)
    # Its own sessions stayed with the run, and the report points at them.
    sessions = report["agent_sessions"]
    assert sessions["files"] >= 1 and sessions["folders"] == [
        "agent-home/" + BUILTIN_PROFILES[name].session_dirs[0][2:]], sessions
    assert "the agent CLI's own sessions, kept with the run: `agent-home/" in (run / "report" / "report.md").read_text()
    # The Transcript pane can show them (``o``): the files are read, the text ones as text.
    from agent2rl_tui.record.sessions import session_texts

    with RunStore.of_run(run) as store:
        shown = session_texts(run, store)
    assert shown and all(f.path.startswith(sessions["folders"][0]) for f in shown)
    assert any(f.text for f in shown) or all(f.sqlite for f in shown)  # OpenCode keeps a database
    return report


def check_metered(run: Path, driver: Driver) -> None:
    served = [c for c in driver.calls() if c.get("usage")]
    report = json.loads((run / "report" / "report.json").read_text())
    usage = report["usage"]
    assert usage["source"] == "metered", usage
    assert (usage["tokens_in"], usage["tokens_out"]) == (
        sum(c["usage"]["input_tokens"] for c in served), sum(c["usage"]["output_tokens"] for c in served))
    with RunStore.of_run(run) as store:
        rows = [r for r in store.llm_calls() if r.endpoint == "generate"]
    assert len(rows) == len(served) and all(r.status == 200 and r.complete for r in rows), rows
    assert report["usage"]["meter"]["upstream"].rstrip("/") == driver.url.rstrip("/")


@pytest.fixture
def driver_for(tmp_path: Path):
    made: list[Driver] = []

    def make(name: str, script: dict | None = None) -> Driver:
        folder = tmp_path / f"driver-{len(made)}"  # its own script and log
        folder.mkdir()
        made.append(Driver(folder, script or script_for(name)))
        return made[-1]

    yield make
    for d in made:
        d.close()


# --- the four npm CLIs, live --------------------------------------------------------------------

@pytest.mark.slow
@needs_bwrap
@needs_cli("claude")
def test_claude_code_runs_contained_against_the_scripted_driver(tmp_path: Path, tiny_model: Path, driver_for) -> None:
    """Claude Code in a home of the run's own: its configuration and login copied in, its
    history left out, its session kept with the run, the login gone from the record."""
    home = tmp_path / "home"  # the user's home, with a login, settings and an earlier session
    (home / ".claude" / "projects" / "-earlier-run").mkdir(parents=True)
    (home / ".claude" / "projects" / "-earlier-run" / "s.jsonl").write_text('{"answer": "42"}\n')
    (home / ".claude" / "settings.json").write_text('{"cleanupPeriodDays": 30}')
    (home / ".claude" / ".credentials.json").write_text('{"claudeAiOauth": {"accessToken": "tok-supersecret"}}')
    (home / ".claude.json").write_text(json.dumps({"userID": "u1", "projects": {"/earlier": {"history": ["x"]}}}))
    script = script_for("claude-code")
    script["steps"][0]["run"] += " && ls -a ~/.claude ~/.claude/projects"
    driver = driver_for("claude-code", script)
    run, took = start_run("claude-code", driver, tiny_model, tmp_path / "runs", cli_env("claude-code", HOME=str(home)))
    report = check_run(run, "claude-code", driver)
    agent_home = run / containment.AGENT_HOME
    listing = next(s for s in normalize_lines("claude-stream-json", [
        (line, 0.0) for line in (run / "logs" / "agent.jsonl").read_text().splitlines()]) if "python 3" in s.text)
    assert "settings.json" in listing.text and "-earlier-run" not in listing.text  # config in, history not
    assert json.loads((agent_home / ".claude" / "settings.json").read_text()) == {"cleanupPeriodDays": 30}
    assert not (agent_home / ".claude" / ".credentials.json").exists() and not (agent_home / ".claude.json").exists()
    sessions = list((agent_home / ".claude" / "projects").rglob("*.jsonl"))
    assert sessions and all("-earlier-run" not in str(p) for p in sessions)  # its own session, kept with the run
    assert list((home / ".claude" / "projects").iterdir()) == [home / ".claude" / "projects" / "-earlier-run"]
    for path in run.rglob("*"):  # the login never reaches the record
        if path.is_file() and "snapshots.git" not in path.parts:
            assert b"tok-supersecret" not in path.read_bytes(), path
    assert report["transcript"]["cost_usd"] > 0  # Claude's own price for what it was served
    print(f"claude-code: run start to end {took:.0f} s")


@pytest.mark.slow
@needs_bwrap
@pytest.mark.parametrize("name", ["codex", "gemini-cli", "opencode"])
def test_an_npm_cli_runs_contained_against_the_scripted_driver(name: str, tmp_path: Path, tiny_model: Path,
                                                              driver_for) -> None:
    exe = CLIS[name][0]
    if not installed(exe):
        pytest.skip(f"{exe} is not installed in .agent-clis/: `make agent-clis` installs the pinned CLIs (needs npm)")
    driver = driver_for(name)
    run, took = start_run(name, driver, tiny_model, tmp_path / "runs", cli_env(name))
    check_run(run, name, driver)
    home = run / containment.AGENT_HOME
    sessions = {"codex": ".codex/sessions", "gemini-cli": ".gemini/tmp", "opencode": ".local/share/opencode"}[name]
    assert any(p.is_file() for p in (home / sessions).rglob("*")), f"{name} kept no session in the run's home"
    print(f"{name}: run start to end {took:.0f} s")


@pytest.mark.slow
@needs_bwrap
@pytest.mark.skipif(OPENHANDS is None, reason=(
    "openhands is missing: `make agent-clis` installs it (needs Python 3.12), or python3.12 -m venv "
    ".agent-clis/openhands && .agent-clis/openhands/bin/pip install --no-deps -r locks/openhands.txt"))
def test_openhands_runs_contained_against_the_scripted_driver(tmp_path: Path, tiny_model: Path, driver_for) -> None:
    driver = driver_for("openhands")
    run, took = start_run("openhands", driver, tiny_model, tmp_path / "runs", cli_env("openhands"))
    check_run(run, "openhands", driver)
    assert any((run / containment.AGENT_HOME / ".openhands" / "conversations").rglob("*"))  # kept with the run
    print(f"openhands: run start to end {took:.0f} s")


# --- pointing each CLI at the driver ------------------------------------------------------------

def test_each_profile_points_its_cli_at_the_driver_url() -> None:
    """One run option, --driver-url, mapped onto each CLI's own variable or configuration."""
    url = "http://127.0.0.1:8123"
    env = {"CODEX_API_KEY": "k", "OPENAI_API_KEY": "o"}
    claude = driver_setup(BUILTIN_PROFILES["claude-code"], url + "/v1/", "opus", env)
    assert (claude.env, claude.args, claude.model) == ({"ANTHROPIC_BASE_URL": url}, (), "opus")
    codex = driver_setup(BUILTIN_PROFILES["codex"], url, None, env)
    assert codex.model == "driver"  # Codex's own default model gets no tools through a custom provider
    argv = BUILTIN_PROFILES["codex"].argv(prompt="P", model=codex.model, workspace=Path("/ws"), driver_args=codex.args)
    assert argv[-1] == "P" and argv[argv.index("-m") + 1] == "driver"
    overrides = [argv[i + 1] for i, a in enumerate(argv) if a == "-c"]
    assert overrides == ["allow_login_shell=false", 'model_provider="agent2rl"',
                         'model_providers.agent2rl.name="agent2rl driver"', f'model_providers.agent2rl.base_url="{url}/v1"',
                         'model_providers.agent2rl.wire_api="responses"', 'model_providers.agent2rl.env_key="CODEX_API_KEY"']
    gemini = driver_setup(BUILTIN_PROFILES["gemini-cli"], url, None, env)
    assert gemini.env == {"GOOGLE_GEMINI_BASE_URL": url}
    assert gemini.files == {"~/.gemini/settings.json": {"security": {"auth": {"selectedType": "gemini-api-key"}}}}
    opencode = driver_setup(BUILTIN_PROFILES["opencode"], url, "qwen3", env)
    config = json.loads(opencode.env["OPENCODE_CONFIG_CONTENT"])
    assert config["permission"] == "allow" and config["autoupdate"] is False  # the profile's own settings kept
    assert config["provider"]["agent2rl"] == {"npm": "@ai-sdk/openai-compatible", "name": "agent2rl driver",
                                              "options": {"baseURL": f"{url}/v1", "apiKey": "{env:OPENAI_API_KEY}"},
                                              "models": {"qwen3": {}}}
    assert opencode.model == "agent2rl/qwen3"
    openhands = driver_setup(BUILTIN_PROFILES["openhands"], url, "qwen3", env)
    assert (openhands.env, openhands.model) == ({"LLM_BASE_URL": f"{url}/v1"}, "openai/qwen3")
    assert driver_setup(BUILTIN_PROFILES["claude-code"], None, "opus", env).env == {}  # the CLI's defaults
    with pytest.raises(ProfileError, match="takes no --driver-url"):
        driver_setup(BUILTIN_PROFILES["example"], url, None, env)
    with pytest.raises(ProfileError, match="give the driver API's root"):
        driver_setup(BUILTIN_PROFILES["codex"], "127.0.0.1:8123", None, env)


# --- a CLI wherever it is installed ---------------------------------------------------------------

def executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def link(path: Path, target: str | Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)


@needs_bwrap
def test_the_sandbox_starts_a_cli_wherever_it_is_installed(tmp_path: Path) -> None:
    """An npm prefix under the home (its .bin entries link into the packages, and the script
    runs the node PATH finds, itself under the home) and a uv tool (a link into a venv whose
    python links elsewhere): each starts inside the sandbox, which binds what it needs and
    not the rest of ~/.local."""
    home = tmp_path / "home"
    node = home / ".nvm" / "versions" / "node" / "v20" / "bin" / "node"
    link(node, sys.executable)  # a stand-in node: Python runs the package's script
    executable(home / "prefix" / "node_modules" / "tool-cli" / "bin" / "tool.js",
               "#!/usr/bin/env node\nprint('tool 1.0')\n")
    link(home / "prefix" / "node_modules" / ".bin" / "tool", "../tool-cli/bin/tool.js")
    venv = home / ".local" / "share" / "uv" / "tools" / "oh"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    executable(venv / "bin" / "oh", f"#!{venv}/bin/python\nimport sys; print('oh', sys.prefix == {str(venv)!r})\n")
    link(home / ".local" / "bin" / "oh", venv / "bin" / "oh")
    session = home / ".local" / "share" / "opencode" / "storage" / "session.json"
    session.parent.mkdir(parents=True)
    session.write_text("an earlier session")
    path = os.pathsep.join([str(home / "prefix" / "node_modules" / ".bin"), str(node.parent),
                            str(home / ".local" / "bin"), "/usr/bin", "/bin"])
    env = {"HOME": str(home), "PATH": path}

    found = containment.executable_paths("tool", path, home)
    ours = Path(sys.prefix)  # the stand-in node's real file: bound too where /tmp hides it (a clone in /tmp)
    assert [p for p in found if p != ours] == [home / "prefix" / "node_modules", node.parent.parent]
    assert (ours in found) == ours.is_relative_to("/tmp")
    needed = containment.executable_paths("oh", path, home)
    assert venv in needed and home / ".local" / "bin" in needed
    assert not any(p in (home / ".local", home / ".local" / "share") for p in needed)
    loose = executable(home / "claude", "#!/bin/sh\necho loose\n")  # a program lying loose in the home
    assert containment.executable_paths("claude", str(home), home) == [loose]  # bound alone, never the home
    runs, cache = tmp_path / "runs", tmp_path / "cache"
    for argv in (["tool", "--version"], ["oh", "--version"], [str(loose)]):
        assert containment.check_start(argv, env=env, contain=True, runs_root=runs, data_cache=cache).why is None, argv

    run = tmp_path / "runs" / "r"
    (run / "workspace").mkdir(parents=True)
    made = containment.build(run_dir=run, workspace=run / "workspace", runs_root=runs, data_cache=cache, env=env,
                             executable="oh")
    out = subprocess.run(made.wrap(["sh", "-c", f"oh; tool; cat {session} || echo hidden"]), env=env,
                         cwd=run / "workspace", capture_output=True, text=True, timeout=60)
    assert out.stdout.split("\n")[:3] == ["oh True", "tool 1.0", "hidden"], out.stdout + out.stderr


@pytest.mark.slow
@needs_bwrap
def test_a_cli_the_sandbox_cannot_start_is_refused_before_the_run_exists(tmp_path: Path, tiny_model: Path) -> None:
    """Found on PATH, it starts outside the sandbox but not inside (it runs a program from a
    folder the sandbox hides): `run start` says so and leaves no run behind."""
    hidden = executable(tmp_path / "elsewhere" / "claude-real", "#!/bin/sh\necho '2.1.0 (Claude Code)'\n")
    fake = executable(tmp_path / "cli" / "claude", f"#!/bin/sh\nexec {hidden} \"$@\"\n")
    assert subprocess.run([str(fake), "--version"], capture_output=True).returncode == 0
    env = {**os.environ, "PATH": f"{fake.parent}{os.pathsep}{os.environ['PATH']}", "ANTHROPIC_API_KEY": "k"}
    root = tmp_path / "runs"
    proc = cli("run", "start", "--task", "arith", "--agent", "claude-code", "--model", str(tiny_model),
               root=root, env=env, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "agent claude-code: `claude --version` failed (it exited with code 127 inside the sandbox" in proc.stderr
    assert "--read-only-path" in proc.stderr
    assert not root.exists() or not any(root.iterdir())
    proc = cli("run", "start", "--task", "arith", "--agent", "claude-code", "--model", str(tiny_model),
               "--read-only-path", str(hidden.parent), "--budget", "1s", "--detach", root=root, env=env, timeout=300)
    assert "failed" not in proc.stderr, proc.stderr  # given the folder, it starts
    cli("run", "stop", run_folder(proc.stdout).name, root=root, timeout=120)


# --- the run's own home ---------------------------------------------------------------------------

def test_the_runs_home_gets_the_clis_configuration_and_login_and_nothing_else(tmp_path: Path) -> None:
    home = tmp_path / "home"
    files = {
        ".claude/settings.json": '{"model": "opus"}',
        ".claude/.credentials.json": '{"token": "secret"}',
        ".claude/projects/-ws/old.jsonl": "an earlier session",
        ".claude.json": json.dumps({"userID": "u", "projects": {"/ws": {"history": ["the answer is 42"]}}}),
        ".gemini/settings.json": '{"ui": {"theme": "dark"}, "security": {"auth": {"selectedType": "oauth-personal"}}}',
        ".gemini/tmp/abc/chats/c.json": "an earlier chat",
        "codex-elsewhere/auth.json": '{"OPENAI_API_KEY": "sk"}',
        "codex-elsewhere/config.toml": 'model = "o4"',
        "codex-elsewhere/sessions/2026/11/25/rollout.jsonl": "an earlier rollout",
        "xdg/opencode/opencode.json": '{"theme": "x"}',
    }
    for name, text in files.items():
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(text)
    env = {"CODEX_HOME": str(home / "codex-elsewhere"), "XDG_CONFIG_HOME": str(home / "xdg")}
    agent_home = tmp_path / "run" / containment.AGENT_HOME
    copied = {}
    for name in ("claude-code", "codex", "gemini-cli", "opencode"):
        p = BUILTIN_PROFILES[name]
        settings = driver_setup(p, "http://127.0.0.1:1", None, {}).files
        copied[name] = containment.prepare_home(agent_home, home=home, env=env, files=p.home_files,
                                                logins=p.login_files, config_dirs=p.config_dirs, settings=settings)
    assert copied == {"claude-code": ["~/.claude/settings.json", "~/.claude/.credentials.json", "~/.claude.json"],
                      "codex": ["~/.codex/config.toml", "~/.codex/auth.json"],
                      "gemini-cli": ["~/.gemini/settings.json"],
                      "opencode": ["~/.config/opencode/opencode.json"]}
    got = sorted(str(p.relative_to(agent_home)) for p in agent_home.rglob("*") if p.is_file())
    assert got == [".claude.json", ".claude/.credentials.json", ".claude/settings.json", ".codex/auth.json",
                   ".codex/config.toml", ".config/opencode/opencode.json", ".gemini/settings.json"]
    assert json.loads((agent_home / ".claude.json").read_text()) == {"userID": "u"}  # no project history
    assert stat.S_IMODE((agent_home / ".codex" / "auth.json").stat().st_mode) == 0o600
    assert json.loads((agent_home / ".gemini" / "settings.json").read_text()) == {
        "ui": {"theme": "dark"}, "security": {"auth": {"selectedType": "gemini-api-key"}}}  # merged over the user's

    # The logins go once the agent has ended; a folder the agent made into a link to the
    # user's own is not followed.
    shutil.rmtree(agent_home / ".codex")
    (agent_home / ".codex").symlink_to(home / "codex-elsewhere")
    removed = containment.forget_logins(agent_home, (*BUILTIN_PROFILES["claude-code"].login_files,
                                                     *BUILTIN_PROFILES["codex"].login_files))
    assert removed == ["~/.claude/.credentials.json", "~/.claude.json"]
    assert (home / "codex-elsewhere" / "auth.json").exists() and (home / ".claude" / ".credentials.json").exists()


# --- an agent that fails before printing anything ---------------------------------------------------

@pytest.mark.slow
@needs_bwrap
def test_an_agent_failing_with_only_stderr_gets_an_error_step_in_the_transcript(tmp_path: Path, tiny_model: Path) -> None:
    """As Gemini CLI 0.61 did with a base URL and no auth type selected: exit 41, stdout empty."""
    fake = executable(tmp_path / "cli" / "gemini", "#!/bin/sh\n[ \"$1\" = --version ] && { echo 0.61.0; exit 0; }\n"
                      "echo 'YOLO mode is enabled.' >&2\necho 'Invalid auth method selected.' >&2\nexit 41\n")
    env = {**os.environ, "PATH": f"{fake.parent}{os.pathsep}{os.environ['PATH']}", "GEMINI_API_KEY": "k"}
    proc = cli("run", "start", "--task", "arith", "--agent", "gemini-cli", "--model", str(tiny_model),
               "--driver-url", "http://127.0.0.1:9", "--budget", "2m", root=tmp_path / "runs", env=env, timeout=300)
    run = run_folder(proc.stdout)
    with RunStore.of_run(run) as store:
        steps = [dict(r) for r in store.conn.execute("SELECT kind, role, text FROM steps ORDER BY seq")]
        assert store.run().agent_exit_code == 41
    errors = [s["text"] for s in steps if s["kind"] == "error"]
    assert errors == ["the agent exited with code 41 and printed nothing readable on stdout; its stderr ends:\n"
                      "YOLO mode is enabled.\nInvalid auth method selected."]
    assert json.loads((run / "report" / "report.json").read_text())["transcript"]["by_kind"]["error"] == 1
    # The gateway's settings were in its home: the auth type selected, as Gemini CLI needs.
    settings = json.loads((run / containment.AGENT_HOME / ".gemini" / "settings.json").read_text())
    assert settings["security"]["auth"]["selectedType"] == "gemini-api-key"


# --- at the deadline: the normal end of a long run --------------------------------------------------

@pytest.mark.slow
@needs_bwrap
def test_each_cli_killed_at_its_deadline_is_metered_exactly(tmp_path: Path, tiny_model: Path, driver_for) -> None:
    """The four npm CLIs at once, each killed at its deadline while its command runs: the run's
    tokens are exactly what the driver served (the CLIs that report usage only at their end
    lose it in their own stream), and Claude's cost is priced from its metered calls."""
    names = [n for n in ("claude-code", "codex", "gemini-cli", "opencode") if installed(CLIS[n][0])]
    if not names:
        pytest.skip("no npm agent CLI is installed in .agent-clis/: `make agent-clis` installs them (needs npm)")
    runs: dict[str, tuple[Path, Driver]] = {}
    for name in names:
        tag = name.replace("-", "_")
        driver = driver_for(name, {"steps": [
            {"write": {"path": f"code/long_{tag}.py", "content": "import time\ntime.sleep(600)\n"}},
            *[{"run": f"python code/long_{tag}.py"}] * 20,  # a CLI whose command times out is given another
            {"answer": "Never reached."}]})
        proc = cli("run", "start", "--task", "arith", "--agent", name, "--model", str(tiny_model), "--driver-url",
                   driver.url, "--budget", "45s", "--grace", "5s", "--detach", root=tmp_path / "runs",
                   env=cli_env(name), timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        runs[name] = (run_folder(proc.stdout), driver)
    for name, (run, driver) in runs.items():
        wait_for(lambda: summarize(run).status == "finished", timeout=400, what=f"{name}'s run to end")
        report = json.loads((run / "report" / "report.json").read_text())
        assert report["end_reason"] == "deadline", (name, report["end_reason"])
        served = {c["step"] for c in driver.calls() if c.get("step") is not None}
        assert {0, 1} <= served, (name, driver.calls())  # it wrote its file and started the command
        check_metered(run, driver)
        stream = report["transcript"]
        print(f"{name} at its deadline: metered {report['usage']['tokens_in']:,} in / "
              f"{report['usage']['tokens_out']:,} out; its own stream said {stream['tokens_in']:,} / "
              f"{stream['tokens_out']:,}")
        if name == "claude-code":
            assert report["usage"]["cost_usd"] > 0  # priced from the metered calls


def test_the_sessions_listing_follows_no_link_the_agent_made(tmp_path: Path) -> None:
    """The run's home is the agent's: a session folder made a link to elsewhere, or a link
    inside one, is not followed (nor counted as the target's files)."""
    from agent2rl_tui.record.sessions import session_files

    run = tmp_path / "run"
    home = run / containment.AGENT_HOME
    (home / ".codex" / "sessions" / "2026").mkdir(parents=True)
    (home / ".codex" / "sessions" / "2026" / "rollout.jsonl").write_text("x" * 2048)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for n in range(5):
        (elsewhere / f"f{n}").write_text("y" * 4096)
    (home / ".codex" / "sessions" / "out").symlink_to(elsewhere)
    (home / ".claude").mkdir()
    (home / ".claude" / "projects").symlink_to(elsewhere)
    with RunStore(run / "run.db", create=True) as store:
        store.event("supervisor", "agent_home", "agent home", {"sessions": ["~/.codex/sessions", "~/.claude/projects",
                                                                            "~/../../etc", "/etc"]})
        found = session_files(run, store)
    assert found is not None
    assert (found.folders, found.files, found.bytes) == (("agent-home/.codex/sessions",), 1, 2048)
