"""Claims only from what ran: the diagnosis of a run whose agent writes a GRPO script it never runs.

The agent (a shell command, contained, through `agent2rl-tui run start`) writes ``code/grpo.py``
(TRL's GRPO trainer playing ``$TRAIN_ENV_URL``) and never runs it, submits a changed copy of the
base model; then writes ``code/sft.py``, runs it for some seconds of CPU, and submits again. It
also prints a GRPO trainer's log lines, as if it had trained. The diagnosis reads the processes the
supervisor sampled outside the sandbox: the first iteration is GRPO "written, not seen running"
and not online, the second SFT seen running; the route, report.md and iterations.jsonl say so.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from support.agent_scripts import MUTATE, SUBMIT, stand_in_trainer
from support.runs import cli, wait_for

from agent2rl_tui.review.index import summarize

GRPO = '''from trl import GRPOConfig, GRPOTrainer
import os, requests
URL = os.environ["TRAIN_ENV_URL"]
def rollout(prompt):
    return requests.post(URL + "/step", json={"action": prompt}).json()["reward"]
trainer = GRPOTrainer(model="models/tiny-llama", reward_funcs=[rollout], args=GRPOConfig(learning_rate=1e-5))
trainer.train()
'''
SFT = stand_in_trainer("SFT", 8)
AGENT = r"""
set -e
printf '%s' "$GRPO_CODE" > code/grpo.py
mkdir -p output
"$PY" -c "$MUTATE_CODE" output/m1 1
echo "{'loss': 0.41, 'reward': 0.73, 'kl': 0.02, 'epoch': 1.0}"
"$PY" -c "$SUBMIT_CODE" output/m1
sleep 2
printf '%s' "$SFT_CODE" > code/sft.py
"$PY" code/sft.py
"$PY" -c "$MUTATE_CODE" output/m2 2
"$PY" -c "$SUBMIT_CODE" output/m2
sleep 2
"""


@pytest.mark.usefixtures("scripted_grading")
def test_a_script_written_but_never_run_is_not_reported_as_trained(tmp_path: Path, tiny_model: Path) -> None:
    proc = cli("run", "start", "--task", "arith", "--agent", "command", "--command", AGENT, "--model",
               str(tiny_model), "--budget", "4m", "--grace", "5s", "--detach", "--mode", "rl-only",
               "--env", f"GRPO_CODE={GRPO}", "--env", f"SFT_CODE={SFT}", "--env", f"MUTATE_CODE={MUTATE}",
               "--env", f"SUBMIT_CODE={SUBMIT}",
               "--env", f"PY={sys.executable}", root=tmp_path / "runs", timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = Path(re.search(r"run folder: (\S+)", proc.stdout).group(1))
    wait_for(lambda: summarize(run).status == "finished", timeout=400, what="the run to end")
    report = json.loads((run / "report" / "report.json").read_text())
    first, second = report["iterations"][:2]
    assert first["train_type"] == "GRPO" and first["observed"] is False and first["online"] is False, first
    assert second["train_type"] == "SFT" and second["observed"] is True, second
    assert any("code/sft.py" in cmd for cmd in second["seen_running"])
    # Training is training while a trainer runs (issue 43, 4): the SFT stand-in logs nothing, yet the
    # seconds its process was seen running count as training, not idle.
    assert second["time"]["training_s"] >= 3, second["time"]
    assert report["route"] == "GRPO (written, not seen running) → SFT"
    md = (run / "report" / "report.md").read_text()
    assert "**written, not seen running**: no process sampled in the sandbox ran this code" in md
    assert "GRPO (online)" not in md
    lines = [json.loads(line) for line in (run / "report" / "iterations.jsonl").read_text().splitlines()]
    assert lines[0]["observed"] is False and lines[1]["observed"] is True
    # The mode: stated, then checked against what ran (GRPO only written: not counted; SFT ran).
    assert "RL-only mode" in (run / "workspace" / "instructions.md").read_text()
    assert "within the training mode your instructions state" in (run / "prompt.md").read_text()
    assert report["mode_check"] == {"mode": "rl-only", "verdict": "outside", "seen": ["SFT"],
                                    "outside": ["iteration 2 (submission 2): SFT, seen running"]}
    assert "- training **TRAINED OUTSIDE ITS MODE**: mode rl-only\\: trained outside it\\: iteration 2" in md
    summary = summarize(run)
    assert summary.mode == "rl-only" and summary.mode_kept is False and "outside its mode" in summary.flags
    listed = cli("runs", root=tmp_path / "runs").stdout
    assert "outside its mode" in listed
    compared = cli("compare", str(run), root=tmp_path / "runs").stdout
    assert "mode rl-only" in compared and "1 of 1 valid, 1 trained outside its mode" in compared
