"""The diagnosis of a run: its iterations (training type, key configuration, changes, time,
failure type, each with evidence) and its route, on real run folders made by real agents.

- the example agent's run: its SFT stage and its GRPO stage recognised, with their learning
  rates where its code sets them;
- a broken agent (tests/fixtures/broken_trainer.py): a traceback, NaN losses, a submitted copy
  of the base model, then an out-of-memory crash and no submission after it;
- an agent that never submits before its budget runs out;
- the example's interactive-task scripts, read as code: GRPO with online rollouts, their
  learning rates from argparse defaults and from the command line that ran them (its real
  coin run, SFT → GRPO (online), is checked in tests/system/test_level3_runs.py on the coin demo's run).
"""

from __future__ import annotations

import json
import re
import sys
from importlib import resources
from pathlib import Path

import pytest
from support.paths import FIXTURES
from support.runs import cli, scripted_env

from agent2rl_tui.review.codefacts import analyse, scripts_executed, scripts_in
from agent2rl_tui.review.iterations import Iteration, build_iterations, exclusive_seconds, route_of
from agent2rl_tui.review.logscan import scan

BROKEN = FIXTURES / "broken_trainer.py"
SCRIPTS = "agent2rl_tui.agents.example.scripts"


def report_of(run_dir: Path) -> dict:
    return json.loads((run_dir / "report" / "report.json").read_text())


def test_the_example_agents_sft_then_grpo_is_recognised_with_its_settings(example_run: tuple[Path, str]) -> None:
    run_dir = example_run[0]
    report = report_of(run_dir)
    assert report["route"] == "SFT → GRPO"
    first, second = report["iterations"]
    assert (first["submission_id"], first["train_type"], first["status"]) == (1, "SFT", "success")
    assert (second["submission_id"], second["train_type"], second["status"]) == (2, "GRPO", "success")
    # The learning rates its scripts set, each with the file and line that set it.
    assert first["key_config"]["lr"]["value"] == "0.002" and first["key_config"]["lr"]["path"] == "code/sft.py"
    assert second["key_config"]["lr"]["value"] == "0.0005" and second["key_config"]["lr"]["path"] == "code/grpo.py"
    assert second["key_config"]["num_generations"]["value"] == "8"
    sft_line = (run_dir / "workspace" / "code" / "sft.py").read_text().splitlines()[first["key_config"]["lr"]["line"] - 1]
    assert "learning_rate" in sft_line
    # The steps came from the command line that ran each script.
    assert first["key_config"]["max_steps"]["source"] == "command line"
    assert any("SFTTrainer(" in e["text"] for e in first["train_evidence"])
    assert any("GRPOTrainer" in e["text"] and e["path"] == "code/grpo.py" for e in second["train_evidence"])
    # What changed: the GRPO stage added grpo.py and reward.py; the workspace's own files are not the agent's change.
    changed = {f["path"]: f for f in second["changes"]["files"]}
    assert changed["code/grpo.py"]["status"] == "A" and "code/reward.py" in changed
    assert "instructions.md" not in {f["path"] for f in first["changes"]["files"]}
    # Time: both trained (the trainers' own runtimes), for less than the stretch lasted.
    for it in (first, second):
        assert 0 < it["time"]["training_s"] <= it["duration_s"]
        assert abs(sum(it["time"].values()) - it["duration_s"]) < 0.5
    # No failure, and report/iterations.jsonl holds the same, the reference's fields first.
    assert first["failure_type"] is None and second["failure_type"] is None
    lines = (run_dir / "report" / "iterations.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == report["iterations"]
    assert list(json.loads(lines[0]))[:9] == ["iteration", "timestamp", "duration_s", "status", "exit_code", "score",
                                              "improvement", "train_type", "failure_type"]
    md = (run_dir / "report" / "report.md").read_text()
    assert "## Iterations: SFT → GRPO" in md and "`code/grpo.py:" in md
    # The agent's own summary.md, as its instructions ask, beside our diagnosis of each attempt.
    assert "## Your running summary" in (run_dir / "workspace" / "instructions.md").read_text()
    assert first["agent_summary"].startswith("## Attempt 1") and "**Training type**: SFT" in first["agent_summary"]
    assert second["agent_summary"].startswith("## Attempt 2") and "Attempt 1" not in second["agent_summary"]
    assert "the agent's own summary.md about it" in md and "```text\n## Attempt 2" in md


def test_a_broken_agent_gets_its_failures_named_with_evidence(tmp_path: Path, tiny_model: Path) -> None:
    proc = cli("run", "start", "--task", "arith", "--agent", "command", "--command", f"{sys.executable} {BROKEN}",
               "--read-only-path", str(BROKEN), "--model", str(tiny_model), "--budget", "5m", "--grace", "2s",
               root=tmp_path / "runs", timeout=600, env=scripted_env())  # its iterations, not its score, are tested
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run_dir = Path(re.search(r"run folder: (\S+)", proc.stdout).group(1))
    report = report_of(run_dir)
    first, tail = report["iterations"]

    # It submitted the base model: a copy, whatever its code said it trained.
    assert first["submission_id"] == 1 and first["train_type"] == "copy_model"
    assert (first["status"], first["failure_type"]) == ("failed", "copy_model_fallback")
    problems = "\n".join(first["problems"])
    assert "code_error_runtime: ValueError: the dataset has no 'text' column" in problems
    assert "training_diverged: {'loss': 'nan'" in problems and "(and 2 more like it)" in problems
    # Its GRPO learning rate: the command line's 0.05 over the argparse default.
    assert first["key_config"]["lr"] == {"value": "0.05", "path": "command line", "line": 0, "source": "command line"}

    # After it, PPO died of memory and nothing was submitted: an iteration of its own.
    assert tail["submission_id"] is None and tail["train_type"] == "PPO"
    assert (tail["status"], tail["failure_type"], tail["exit_code"]) == ("failed", "out_of_memory", 0)
    assert tail["train_evidence"][0]["path"] == "code/ppo_train.py"
    assert any("CUDA out of memory" in e["text"] for e in tail["failure_evidence"])
    assert tail["key_config"]["lr"]["value"] == "3e-06"
    assert report["route"] == "copy_model → PPO"


def test_a_run_without_a_submission_is_one_failed_iteration(tmp_path: Path, tiny_model: Path) -> None:
    agent = tmp_path / "idle.py"
    agent.write_text("import time\nprint('thinking', flush=True)\ntime.sleep(600)\n")
    proc = cli("run", "start", "--task", "arith", "--agent", "command", "--command", f"{sys.executable} {agent}",
               "--read-only-path", str(agent), "--model", str(tiny_model), "--budget", "4s", "--grace", "1s",
               root=tmp_path / "runs", timeout=300, env=scripted_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = report_of(Path(re.search(r"run folder: (\S+)", proc.stdout).group(1)))
    [only] = report["iterations"]
    assert (only["submission_id"], only["status"], only["failure_type"]) == (None, "failed", "timeout_no_submission")
    assert only["time"]["idle_s"] > 0 and report["route"] == "no submission"


def read_script(name: str) -> str:
    return resources.files(SCRIPTS).joinpath(name).read_text(encoding="utf-8")


def test_the_interactive_grpo_script_is_online_with_its_argparse_defaults() -> None:
    files = {"code/episodes_grpo.py": read_script("episodes_grpo.py")}
    facts = analyse(files)
    assert facts.train_type == "GRPO" and facts.online
    assert facts.config["lr"].value == "0.0003" and facts.config["lr"].source == "default"
    assert facts.config["beta"].value == "0.04"
    # The command that ran it overrides a default.
    ran = analyse(files, ["python code/episodes_grpo.py --model m --lr 1e-4 --beta=0"])
    assert ran.config["lr"].value == "1e-4" and ran.config["beta"].value == "0"
    # SFT on the gold paths is offline SFT.
    sft = analyse({"code/episodes_sft.py": read_script("episodes_sft.py")})
    assert sft.train_type == "SFT" and sft.config["lr"].value == "0.003"


def test_hand_written_losses_are_recognised_and_prose_is_not() -> None:
    ppo = analyse({"train.py": "ratio = (new_logp - old_logp).exp()\n"
                               "loss = -torch.min(ratio * adv, ratio.clamp(1 - clip_eps, 1 + clip_eps) * adv)\n"})
    assert ppo.train_type == "PPO"
    grpo = analyse({"train.py": "adv = (rewards - rewards.mean()) / (rewards.std() + 1e-6)\n"})
    assert grpo.train_type == "GRPO"
    pg = analyse({"train.py": "loss = -(log_probs * advantages).mean()\n"})
    assert pg.train_type == "policy gradient"
    # A docstring that names a trainer, a comment, a copy of the model: not training.
    prose = analyse({"train.py": '"""Would use GRPOTrainer here."""\n# SFTTrainer(...) later\n'
                                 "import shutil\nshutil.copytree(MODEL_PATH, 'output/v1')\n"})
    assert prose.train_type == "copy_model" and "GRPO" not in prose.types and "SFT" not in prose.types
    assert analyse({"notes.py": "print('hello')\n"}).train_type == "unknown"


def test_hostile_code_is_read_not_run_and_quoted_inert() -> None:
    deep = "x = " + "(" * 5000 + "1" + ")" * 5000 + "\n"
    facts = analyse({"a.py": deep, "b.py": "SFTTrainer(\x1b[2J\x07 lr=1)\n" + "y" * 10_000 + "\n",
                     "c.yaml": "learning_rate: 5e-5\n", "d.sh": "python train.py --num_train_epochs 2\n"})
    ev = facts.evidence["SFT"][0]
    assert "\x1b" not in ev.text and "\x07" not in ev.text and len(ev.text) <= 160
    assert facts.config["lr"].value == "5e-5" and facts.config["epochs"].value == "2"
    assert scripts_in("cd code && python -u ./train.py --x 1") == ["./train.py"]


@pytest.mark.parametrize(("cmdline", "runs"), [
    ("/venv/bin/python -u code/sft.py --lr 1e-5", ["code/sft.py"]),
    ("torchrun --nproc_per_node 2 code/grpo.py --lr 1", ["code/grpo.py"]),
    ("accelerate launch --num_processes 2 code/grpo.py", ["code/grpo.py"]),
    ("env WANDB_MODE=off timeout 600 python3.11 code/x.py", ["code/x.py"]),
    ("code/run.sh a b", ["code/run.sh"]),
    # a shell's inline script names files it writes or runs: its children are sampled on their own
    ("bash -c set -e printf %s \"$GRPO_CODE\" > code/grpo.py python code/sft.py", []),
    ("python -c import code.grpo", []),
    ("python -m trl sft --config code/x.yaml", []),
    ("cat code/grpo.py", []),
])
def test_a_sampled_process_runs_its_program_not_every_file_it_names(cmdline: str, runs: list[str]) -> None:
    """The claims (issue 40, 4) rest on what a process runs: a shell that writes code/grpo.py with
    printf did not run it (under load the watch sampled that shell before the first submission)."""
    assert scripts_executed(cmdline) == runs


def test_the_transcript_scan_names_failures_and_times_training() -> None:
    steps = [
        (10.0, "tool_call", "Bash", "c1", "", json.dumps({"command": "python train.py --lr 1e-5"})),
        (15.0, "raw", None, None, "Traceback (most recent call last):", None),
        (15.0, "raw", None, None, '  File "train.py", line 3, in <module>', None),
        (15.0, "raw", None, None, "torch.OutOfMemoryError: CUDA out of memory.", None),
        (20.0, "tool_result", "Bash", "c1", "exit 1", None),
        (30.0, "message", None, None, "{'loss': 0.5, 'reward_std': 0.0}", None),
        (31.0, "message", None, None, "{'loss': 0.4, 'reward_std': 0.0}", None),
        (40.0, "message", None, None, "{'train_runtime': '8.0', 'train_loss': 0.45}", None),
    ]
    facts = scan(steps)
    assert [(c.at, c.ended) for c in facts.commands] == [(10.0, 20.0)]
    assert [s.kind for s in facts.failures_in(0, 100)] == ["out_of_memory", "rollout_logic_wrong"]
    assert (32.0, 40.0) in facts.training_intervals()
    split = exclusive_seconds(0, 50, [("training_s", facts.training_intervals()), ("commands_s", [(10.0, 20.0)])])
    assert split == {"training_s": 9.0, "commands_s": 10.0, "idle_s": 31.0}


def test_the_route_folds_repeated_stages() -> None:
    def it(n: int, kind: str, online: bool = False, sub: int | None = 1) -> Iteration:
        return Iteration(n, None, 1.0, "success", None, None, None, kind, None, submission_id=sub, online=online)

    assert route_of([it(1, "SFT"), it(2, "GRPO", True), it(3, "GRPO", True), it(4, "GRPO")]) == \
        "SFT → GRPO (online, 3 iterations)"
    assert route_of([it(1, "SFT"), it(2, "unknown", sub=None)]) == "SFT"
    assert route_of([]) == "no submission"


def test_the_diagnosis_reads_a_run_folder_made_elsewhere(example_run: tuple[Path, str], tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "moved"
    shutil.copytree(example_run[0], copy)
    assert build_iterations(copy).route == "SFT → GRPO"


def test_a_busy_gpu_while_the_grader_is_idle_counts_as_training(tmp_path: Path) -> None:
    from support.synthetic import T0, make_run

    from agent2rl_tui.record.store import RunStore

    # Submissions at T0 + 30 and T0 + 60; the grader evaluates the first from T0 + 30.1 to T0 + 32.5.
    run = make_run(tmp_path, "gpu", scores=(40.0, 60.0))
    with RunStore.of_run(run) as store:
        for at, util in ((5, 0.0), (10, 95.0), (15, 95.0), (20, 2.0), (31, 0.0), (32, 99.0), (40, 0.0), (50, 99.0)):
            store.conn.execute("INSERT INTO samples (at, gpus_json) VALUES (?, ?)", (T0 + at, json.dumps(
                [{"index": 0, "name": "H100", "util_pct": util, "mem_used": 0, "mem_total": 80 << 30}])))
    first, second = build_iterations(run).iterations
    assert first.time["training_s"] == 10.0 and first.time["idle_s"] == 20.0  # busy T0+5 to T0+15
    # The GPU busy while the grader evaluated is the grader's; T0+40 to T0+50 is the agent's.
    assert second.time["training_s"] == 10.0
    assert abs(second.time["evaluating_s"] - 2.4) < 1e-6
