"""Whole runs of the example agent on the Level-3 text games (TextWorldExpress, Java, offline): its
route, SFT on the gold paths replayed through the workspace's play kit, then GRPO whose rollouts play
whole episodes online, each stage submitted and graded on held-out games by the real grader.

System tier: each run trains with TRL for a minute of CPU. The episode runner and the environment
themselves, with scripted policies, are tests/integration/test_episodes.py.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("java") is None, reason=(
    "java is missing (TextWorldExpress runs on it): sudo apt install openjdk-17-jre-headless"))


def test_the_example_agent_takes_the_online_rl_route_on_twc(tmp_path: Path) -> None:
    """The whole Level-3 path through the CLI: the grader plays the test games with the base
    model (baseline), the example agent SFTs on gold paths of the train games in the grader's
    format and submits, then runs GRPO whose rollouts play the game online and submits again."""
    import json
    import os
    import re

    from support.runs import cli

    from agent2rl_tui.record.revisions import files_at, get_revision
    from agent2rl_tui.record.store import RunStore, SubStatus
    from agent2rl_tui.tasks.tinymodel import build_tiny_model

    tiny_model = build_tiny_model(tmp_path / "tiny-2k", max_positions=2048)  # a game transcript is long
    env = os.environ | {"HF_HUB_OFFLINE": "1", "EXAMPLE_SFT_STEPS": "40", "EXAMPLE_GRPO_STEPS": "1",
                        "EXAMPLE_GAMES": "16", "EXAMPLE_GENERATIONS": "2", "TRL_EXPERIMENTAL_SILENCE": "1"}
    proc = cli("run", "start", "--task", "twc", "--agent", "example", "--model", str(tiny_model),
               "--budget", "30m", "--grace", "5s", "--eval-limit", "4", root=tmp_path / "runs", timeout=1700, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run_dir = Path(re.search(r"run folder: (\S+)", proc.stdout).group(1))
    log = (run_dir / "logs" / "agent.log").read_text()
    with RunStore.of_run(run_dir) as store:
        base = store.baseline()
        subs = store.submissions(kind="agent")
    assert base is not None and base.status == SubStatus.SCORED, base
    settings = json.loads(base.settings_json)
    assert settings["env"]["game"] == "twc" and settings["evaluator"] == "episodes"
    played, max_steps = settings["episodes"], settings["env"]["max_steps"]
    assert played["games"] == 4 and played["largest_batch"] == 4  # all four games played at once
    assert played["generate_calls"] <= max_steps  # one call per round for every live game, not one per game and step
    lines = [json.loads(x) for x in (run_dir / "evals" / "0" / "results.jsonl").read_text().splitlines()]
    from agent2rl_tui.record.evalset import run_eval_items  # the run's own draw from the test fold
    from agent2rl_tui.tasks.registry import load_task

    assert [x["extra"]["game"] for x in lines] == [r["game"] for r in run_eval_items(run_dir, load_task("twc"))[:4]]
    for x in lines:
        assert x["extra"]["end"] in ("won", "done", "step limit", "context full")
        assert 0 < x["extra"]["steps"] <= max_steps and len(x["extra"]["turns"]) == x["extra"]["steps"]
        assert x["prompt"].startswith("Your task: " + x["extra"]["goal"])
    assert base.score == pytest.approx(100.0 * sum(x["correct"] for x in lines) / 4)
    train = (run_dir / "workspace" / "data" / "train.jsonl").read_text()
    assert '"train:0"' in train and "test:" not in train  # the agent never sees the grader's games

    # Stage one: SFT on the gold paths, replayed through the workspace's play kit.
    assert "expert: 16 games replayed, 16 won" in log, log[-3000:]
    # Stage two: GRPO's rollouts played whole episodes online (4 games x 2 episodes a step).
    assert re.search(r"rollouts: 8 episodes, \d+ won, [\d.]+ steps each", log), log[-3000:]
    assert len(subs) == 2 and all(s.status == SubStatus.SCORED for s in subs), subs
    sft, grpo = subs
    files1 = set(files_at(run_dir, get_revision(run_dir, sft.revision_seq)))
    files2 = set(files_at(run_dir, get_revision(run_dir, grpo.revision_seq)))
    assert "code/episodes_sft.py" in files1 and "code/episodes_grpo.py" not in files1
    assert {"code/episodes_sft.py", "code/episodes_grpo.py"} <= files2
    # What SFT taught, seen in the grader's own record of the episodes: the base model writes
    # no game command; the SFT model's first action is one, as in every gold path.
    first_actions = {n: [json.loads(x)["extra"]["turns"][0]["action"]
                         for x in (run_dir / "evals" / str(n) / "results.jsonl").read_text().splitlines()]
                     for n in (0, sft.id)}
    verbs = ("take ", "put ", "open ")
    assert not any(a.startswith(verbs) for a in first_actions[0]), first_actions
    assert all(a.startswith(verbs) for a in first_actions[sft.id]), first_actions


def test_the_coin_demo_runs_the_online_route_on_the_coin_task(tmp_path: Path) -> None:
    """`agent2rl-tui demo --task coin`: the tiny model built, the example agent's Level-3 route
    (SFT on gold paths, then GRPO with rollouts) on the coin task, both submissions graded on
    held-out games; the stages' sizes are the demo's unless the user sets them (as here, small)."""
    import json
    import os
    import re

    from support.runs import cli

    from agent2rl_tui.record.store import RunStore, SubStatus

    env = os.environ | {"HF_HUB_OFFLINE": "1", "TRL_EXPERIMENTAL_SILENCE": "1", "EXAMPLE_SFT_STEPS": "10",
                        "EXAMPLE_GRPO_STEPS": "1", "EXAMPLE_GAMES": "8", "EXAMPLE_GENERATIONS": "2"}
    proc = cli("demo", "--task", "coin", "--no-tui", "--budget", "8m", root=tmp_path, timeout=900, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run_dir = Path(re.search(r"run folder: (\S+)", proc.stdout).group(1))
    with RunStore.of_run(run_dir) as store:
        assert store.run().task == "coin"
        subs = store.submissions(kind="agent")
    assert [s.status for s in subs] == [SubStatus.SCORED, SubStatus.SCORED]
    log = (run_dir / "logs" / "agent.log").read_text()
    assert "SFT: 10 steps" in log and "GRPO: 1 steps x 4 games x 2 episodes" in log
    first = json.loads((run_dir / "evals" / "1" / "results.jsonl").read_text().splitlines()[0])
    assert first["extra"]["game"].startswith("test:")  # graded on held-out games

    # The diagnosis recognises the route, each stage with its learning rate (tests/integration/test_iterations.py has more).
    report = json.loads((run_dir / "report" / "report.json").read_text())
    with RunStore.of_run(run_dir) as store:  # what the diagnosis went by, shown if it reads otherwise
        seen = [(p["first"], p["last"], p["cmd"][:60]) for p in (store.last_event_data("agent_processes") or {})
                .get("processes", [])]
        received = [s.received_at for s in store.submissions()]
    assert report["route"] == "SFT → GRPO (online)", (seen, received)
    sft, grpo = report["iterations"]
    assert (sft["train_type"], sft["online"], sft["key_config"]["lr"]["value"]) == ("SFT", False, "0.003")
    assert (grpo["train_type"], grpo["online"], grpo["key_config"]["lr"]["value"]) == ("GRPO", True, "0.0003")
    assert any("rollout_func" in e["text"] for e in grpo["online_evidence"])
    assert grpo["key_config"]["num_generations"] == {"value": "2", "path": "command line", "line": 0,
                                                     "source": "command line"}
