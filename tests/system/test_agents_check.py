"""`agent2rl-tui agents check`: each CLI through a short contained run against the scripted driver.

Live with Claude Code where `make agent-clis` installed it; with a CLI that starts but never
calls its driver (a real executable that does nothing), which must fail the check and say so;
and with a CLI that is not installed.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from support.paths import REPO
from support.runs import cli, scripted_env

from agent2rl_tui.record.store import RunStore
from agent2rl_tui.run import containment

BIN = REPO / ".agent-clis" / "node_modules" / ".bin"
needs_bwrap = pytest.mark.skipif(containment.probe() is not None,
                                 reason=f"containment unavailable: {containment.probe()}")


def clean_env(path: str) -> dict[str, str]:
    """No API keys; ``path`` first on PATH; the check's run graded by a scripted eval worker (the CLI is
    what is checked: a model's grading adds seconds of CPU and nothing the check reads)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "CODEX_", "GEMINI_",
                                                                     "GOOGLE_", "LLM_", "CLAUDE_"))}
    env["PATH"] = f"{path}{os.pathsep}{env['PATH']}"
    return scripted_env(env)


@pytest.mark.slow
@needs_bwrap
@pytest.mark.skipif(not (BIN / "claude").exists(), reason="claude is not installed in .agent-clis/: `make agent-clis`")
def test_agents_check_passes_claude_code_without_a_key_or_a_real_api(tmp_path: Path, tiny_model: Path) -> None:
    env = clean_env(str(BIN))
    env["ANTHROPIC_API_KEY"] = "sk-real-key-must-not-travel"  # replaced by the check's placeholder
    proc = cli("agents", "check", "claude-code", "--model", str(tiny_model), root=tmp_path / "root", env=env,
               timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("claude-code  OK     2.1.") and "(Claude Code)" in lines[0]
    for what in ("starts in its sandbox", "calls its driver", "finds its tools", "runs commands", "writes files",
                 "reaches the grader and submits", "transcript read", "tokens metered", "ends by itself"):
        assert any(line.split()[:1] == ["ok"] and what in line for line in lines), (what, proc.stdout)
    assert "used run: Bash, write: Write" in proc.stdout
    run = Path(proc.stdout.split("run folder: ")[1].split()[0])
    assert run.parent.parent == tmp_path / "root" / "agents-check"  # beside the runs, not among them
    assert cli("runs", root=tmp_path / "root").stdout.count("arith") == 0
    with RunStore.of_run(run) as store:
        calls = store.llm_calls()
        assert calls and all(c.status == 200 for c in calls)
        assert "sk-real-key-must-not-travel" not in (run / "logs" / "meter.log").read_text(errors="replace")
    # The check's own metered total is the one it printed.
    metered = next(line for line in lines if "tokens metered" in line)
    total_in = sum(c.input_tokens or 0 for c in calls)
    assert f"{total_in:,} in" in metered


@pytest.mark.slow
@needs_bwrap
def test_agents_check_fails_a_cli_that_never_calls_its_driver(tmp_path: Path, tiny_model: Path) -> None:
    """A `gemini` that starts, prints its version and exits 0 without a call: every check that
    needs the agent to act fails, and the verdict says what was seen."""
    fake = tmp_path / "cli" / "gemini"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\n[ \"$1\" = --version ] && { echo 0.61.0; exit 0; }\necho '{}'\nexit 0\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    proc = cli("agents", "check", "gemini-cli", "--model", str(tiny_model), root=tmp_path / "root",
               env=clean_env(str(fake.parent)), timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    out = proc.stdout
    assert out.startswith("gemini-cli   FAILED 0.61.0")
    assert "ok   starts in its sandbox            contained" in out
    assert "FAIL calls its driver                 no call reached the driver (logs/agent.log says why)" in out
    assert "FAIL finds its tools                  it never asked for a step of the script" in out
    assert "FAIL reaches the grader and submits   no submission reached the grader" in out
    assert "ok   ends by itself" in out  # it did exit 0 by itself: only what it failed to do fails


def test_agents_check_names_a_missing_cli_and_an_unknown_name(tmp_path: Path, tiny_model: Path) -> None:
    env = clean_env(str(tmp_path / "empty"))
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if ".agent-clis" not in p)
    proc = cli("agents", "check", "opencode", "--model", str(tiny_model), root=tmp_path / "root", env=env)
    if proc.stdout.startswith("opencode     not installed"):
        assert proc.returncode == 1 and "npm install -g opencode-ai" in proc.stdout
    unknown = cli("agents", "check", "example", "--model", str(tiny_model), root=tmp_path / "root", env=env)
    assert unknown.returncode == 1
    assert "no agent CLI named example to check (those with a driver API: claude-code, codex" in unknown.stderr
    listing = cli("agents", root=tmp_path / "root")  # the group alone still lists the profiles
    assert listing.returncode == 0 and "claude-code" in listing.stdout and "example" in listing.stdout


OPENHANDS_BIN = REPO / ".agent-clis" / "openhands" / "bin"


@pytest.mark.slow
@needs_bwrap
@pytest.mark.skipif(not (OPENHANDS_BIN / "openhands").exists(),
                    reason="openhands is not installed in .agent-clis/openhands: `make agent-clis` (Python 3.12)")
def test_agents_check_passes_openhands_where_make_agent_clis_put_it(tmp_path: Path, tiny_model: Path) -> None:
    """Issue 42 (4): the fifth agent system for real. Not on PATH: the check finds it where
    `make agent-clis` installed it (its own Python 3.12 environment)."""
    env = clean_env("")
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if p and ".agent-clis" not in p)
    env["LLM_API_KEY"] = "sk-real-key-must-not-travel"
    proc = cli("agents", "check", "openhands", "--model", str(tiny_model), root=tmp_path / "root", env=env,
               timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("openhands    OK     OpenHands CLI 1.") and str(OPENHANDS_BIN) in lines[0]
    for what in ("starts in its sandbox", "calls its driver", "finds its tools", "runs commands", "writes files",
                 "reaches the grader and submits", "transcript read", "tokens metered", "ends by itself"):
        assert any(line.split()[:1] == ["ok"] and what in line for line in lines), (what, proc.stdout)
    run = Path(proc.stdout.split("run folder: ")[1].split()[0])
    with RunStore.of_run(run) as store:
        assert store.llm_calls() and all(c.status == 200 for c in store.llm_calls())
        assert [s.kind for s in store.submissions(kind="agent")] == ["agent"]
        # The version the check names is the one the run's pre-flight got in the sandbox, kept with its profile.
        assert lines[0].split()[2:5] == store.config().profile["version"].split()[:3]
    assert "sk-real-key-must-not-travel" not in (run / "logs" / "meter.log").read_text(errors="replace")


def test_the_version_line_skips_a_banners_frame(tmp_path: Path) -> None:
    """OpenHands prints its version under a framed banner; the check names the version, not the frame."""
    from agent2rl_tui.run.agents_check import cli_version

    exe = tmp_path / "framed"
    exe.write_text("#!/bin/sh\nprintf '+------+\\n| Hi |\\n+------+\\n\\nOpenHands CLI 1.16.0\\n'\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    assert cli_version(str(exe)) == "OpenHands CLI 1.16.0"
    exe.write_text("#!/bin/sh\nexit 3\n")
    assert cli_version(str(exe)) is None
