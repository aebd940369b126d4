"""The record never holds a secret: a run whose agent spreads every secret it can reach.

The agent is a small real program of ours declared as a profile with a login file (as Claude
Code's ``~/.claude/.credentials.json``) and the Anthropic gateway, run contained through
`agent2rl-tui run start`. It copies its login into ``code/`` (a revision), prints it and its
whole environment (agent.log, the transcript), writes them into its workspace and its home
(kept with the run), and submits a ``model_path`` that holds its search key (the grader's row).
Afterwards no byte of the run folder, no object of snapshots.git and no value of run.db holds
the login's token or the key, the grader's URL secret is masked where the agent printed it,
and the report says how many were replaced.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.runs import cli, wait_for

from agent2rl_tui.record.redact import mask
from agent2rl_tui.review.index import summarize

LOGIN_TOKEN = "sk-ant-oat01-LOGIN-TOKEN-of-the-user-0123456789"
REFRESH = "sk-ant-ort01-REFRESH-of-the-user-9876543210"
SEARCH_KEY = "srch-SECRET-of-the-user-42-abcdefgh"

AGENT = r"""
import json, os, pathlib, shutil, sys, time, urllib.error, urllib.request
auth = pathlib.Path.home() / ".fakecli" / "auth.json"
code = pathlib.Path("code")
code.mkdir(exist_ok=True)
shutil.copy(auth, code / "auth.json")
print("login:", auth.read_text(), flush=True)
print("env:", json.dumps(dict(os.environ)), flush=True)
print("stderr env:", os.environ["SEARCH_SECRET"], file=sys.stderr, flush=True)
pathlib.Path("output").mkdir(exist_ok=True)
(pathlib.Path("output") / "env.json").write_text(json.dumps(dict(os.environ)))
(pathlib.Path.home() / "notes.txt").write_text(os.environ["SEARCH_SECRET"])
body = json.dumps({"model_path": "/no/such/model/" + os.environ["SEARCH_SECRET"]}).encode()
req = urllib.request.Request(os.environ["GRADING_SERVER_URL"] + "/submit", data=body,
                             headers={"content-type": "application/json"})
try:
    urllib.request.urlopen(req, timeout=60)
except urllib.error.HTTPError as e:
    print("submit:", e.code, flush=True)
time.sleep(4)  # the watcher snapshots code/auth.json
"""


def all_bytes(run: Path) -> bytes:
    """Every byte a reader of the run folder can get: its files, and snapshots.git's objects unpacked."""
    files = b"".join(p.read_bytes() for p in run.rglob("*") if p.is_file() and not p.is_symlink())
    objects = subprocess.run(["git", "--git-dir", str(run / "snapshots.git"), "cat-file", "--batch-all-objects",
                              "--batch"], capture_output=True, check=True).stdout
    return files + objects


@pytest.mark.usefixtures("scripted_grading")
def test_no_secret_the_agent_spreads_stays_in_the_record(tmp_path: Path, tiny_model: Path) -> None:
    home = tmp_path / "home"
    (home / ".fakecli").mkdir(parents=True)
    (home / ".fakecli" / "auth.json").write_text(json.dumps(
        {"claudeAiOauth": {"accessToken": LOGIN_TOKEN, "refreshToken": REFRESH, "expiresAt": 1893456000000,
                           "scopes": ["user:inference"]}}))
    (tmp_path / "prog").mkdir()
    program = tmp_path / "prog" / "agent.py"
    program.write_text(AGENT)
    profiles = tmp_path / "agents.toml"
    profiles.write_text(f"""[agents.spreader]
command = ["{sys.executable}", "{program}"]
stream_format = "text"
env_pass = ["SEARCH_SECRET"]
login_files = ["~/.fakecli/auth.json"]
read_only_paths = ["{tmp_path / 'prog'}"]
gateway = "anthropic"
""")
    env = {**os.environ, "HOME": str(home), "SEARCH_SECRET": SEARCH_KEY, "XDG_STATE_HOME": str(tmp_path / "state")}
    env.pop("ANTHROPIC_API_KEY", None)
    proc = cli("run", "start", "--task", "arith", "--agent", "spreader", "--profiles", str(profiles), "--model",
               str(tiny_model), "--budget", "3m", "--grace", "5s", "--detach", root=tmp_path / "runs", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = Path(proc.stdout.split("run folder: ")[1].split()[0])
    wait_for(lambda: summarize(run).status == "finished", timeout=300, what="the run to end")
    log = (run / "logs" / "agent.log").read_text()
    assert "login:" in log and "submit: " in log, log  # the agent did spread them
    blob = all_bytes(run)
    for secret in (LOGIN_TOKEN, REFRESH, SEARCH_KEY):
        assert secret.encode() not in blob, f"{secret} is in the record"
    env_line = next(line for line in log.splitlines() if " env: {" in line)
    printed = json.loads(env_line.split(" env: ", 1)[1])
    grader_secret = printed["GRADING_SERVER_URL"].rsplit("/", 1)[1]
    assert grader_secret == mask(len(grader_secret)) and grader_secret.startswith("[REDACTED")
    assert (run / "workspace" / "code" / "auth.json").is_file()  # kept, masked
    assert mask(len(LOGIN_TOKEN)) in (run / "workspace" / "code" / "auth.json").read_text()
    report = json.loads((run / "report" / "report.json").read_text())
    redactions = report["redactions"]
    assert redactions["while_written"] > 0 and redactions["total"] >= redactions["while_written"]
    assert "- secrets: " in (run / "report" / "report.md").read_text()
