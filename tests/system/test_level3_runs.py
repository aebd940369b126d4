"""A whole run of the example agent on a Level-3 text game (TextWorldExpress, Java, offline): the
coin demo, as `agent2rl-tui demo --task coin` starts it. The grader plays the held-out games with
the base model (baseline); the example agent's route is SFT on the gold paths, replayed through
the workspace's play kit, then GRPO whose rollouts play whole episodes online; each stage is
submitted and graded on the held-out games by the real grader.

System tier: the run trains with TRL for about 25 CPU-s. The episode runner and the environments
themselves, with scripted policies, are tests/integration/test_episodes.py; a graded run on twc is
in tests/integration/test_eval_items.py, and twc's train games through the play kit in
tests/integration/test_trainenv.py.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from pathlib import Path

import pytest
from support.runs import cli

from agent2rl_tui.record.evalset import run_eval_items
from agent2rl_tui.record.revisions import files_at, get_revision
from agent2rl_tui.record.store import RunStore, SubStatus
from agent2rl_tui.tasks.registry import load_task

pytestmark = pytest.mark.skipif(shutil.which("java") is None, reason=(
    "java is missing (TextWorldExpress runs on it): sudo apt install openjdk-17-jre-headless"))

COMMANDS = ("move ", "take ", "look around", "inventory")
"""How the coin game's commands begin: its gold paths are moves, then ``take coin``."""


@pytest.fixture(scope="module")
def coin_demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's run on the coin task, its stages made small (the user's settings win over the demo's).
    SFT's 20 steps bring the loss from 6.5 to about 2: the model then writes whole commands. After 10
    (a loss of 4) it wrote ``moveoveove...`` in one run of three, the gold paths differing from run to run."""
    env = os.environ | {"HF_HUB_OFFLINE": "1", "TRL_EXPERIMENTAL_SILENCE": "1", "EXAMPLE_SFT_STEPS": "20",
                        "EXAMPLE_GRPO_STEPS": "1", "EXAMPLE_GAMES": "8", "EXAMPLE_GENERATIONS": "2"}
    proc = cli("demo", "--task", "coin", "--no-tui", "--budget", "8m", root=tmp_path_factory.mktemp("coin"),
               timeout=900, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return Path(re.search(r"run folder: (\S+)", proc.stdout).group(1))


def results(run_dir: Path, sub_id: int) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "evals" / str(sub_id) / "results.jsonl").read_text().splitlines()]


def test_the_grader_plays_the_held_out_games_with_the_base_model(coin_demo: Path) -> None:
    with RunStore.of_run(coin_demo) as store:
        assert store.run().task == "coin"
        base = store.baseline()
    assert base is not None and base.status == SubStatus.SCORED, base
    settings = json.loads(base.settings_json)
    assert settings["env"]["game"] == "coin" and settings["evaluator"] == "episodes"
    played, max_steps, pool = settings["episodes"], settings["env"]["max_steps"], settings["env"]["pool_size"]
    lines = results(coin_demo, 0)
    assert played["games"] == len(lines) and played["largest_batch"] == min(pool, len(lines))  # a pool's games at once
    # One call per round for every live game of a pool, not one per game and step.
    assert played["generate_calls"] <= max_steps * math.ceil(len(lines) / pool)
    drawn = [r["game"] for r in run_eval_items(coin_demo, load_task("coin"))]  # the run's own draw from the test fold
    assert [x["extra"]["game"] for x in lines] == drawn[:len(lines)] and all(g.startswith("test:") for g in drawn)
    for x in lines:
        assert x["extra"]["end"] in ("won", "done", "step limit", "context full")
        assert 0 < x["extra"]["steps"] <= max_steps and len(x["extra"]["turns"]) == x["extra"]["steps"]
        assert x["prompt"].startswith("Your task: " + x["extra"]["goal"])
    assert base.score == pytest.approx(100.0 * sum(x["correct"] for x in lines) / len(lines))
    train = (coin_demo / "workspace" / "data" / "train.jsonl").read_text()
    assert '"train:0"' in train and "test:" not in train  # the agent never sees the grader's games


def test_the_example_agent_takes_the_online_rl_route(coin_demo: Path) -> None:
    """SFT on gold paths replayed through the play kit, then GRPO whose rollouts play the game online,
    each stage its own revision and submission, both graded; the stages' sizes are the user's."""
    log = (coin_demo / "logs" / "agent.log").read_text()
    assert "SFT: 20 steps" in log and "GRPO: 1 steps x 4 games x 2 episodes" in log, log[-3000:]
    assert re.search(r"expert: 8 games replayed, [1-8] won", log), log[-3000:]  # the gold paths search at random
    assert re.search(r"rollouts: 8 episodes, \d+ won, [\d.]+ steps each", log), log[-3000:]
    with RunStore.of_run(coin_demo) as store:
        subs = store.submissions(kind="agent")
    assert [s.status for s in subs] == [SubStatus.SCORED, SubStatus.SCORED], subs
    sft, grpo = subs
    files1 = set(files_at(coin_demo, get_revision(coin_demo, sft.revision_seq)))
    files2 = set(files_at(coin_demo, get_revision(coin_demo, grpo.revision_seq)))
    assert "code/episodes_sft.py" in files1 and "code/episodes_grpo.py" not in files1
    assert {"code/episodes_sft.py", "code/episodes_grpo.py"} <= files2
    # What SFT taught, seen in the grader's own record of the episodes: the base model writes
    # no game command; the SFT model's first action is one, as in every gold path.
    first_actions = {n: [x["extra"]["turns"][0]["action"] for x in results(coin_demo, n)] for n in (0, sft.id)}
    assert not any(a.startswith(COMMANDS) for a in first_actions[0]), first_actions[0][:8]
    assert all(a.startswith(COMMANDS) for a in first_actions[sft.id]), first_actions[sft.id][:8]
    assert all(x["extra"]["game"].startswith("test:") for x in results(coin_demo, grpo.id))  # held-out games


def test_the_diagnosis_recognises_the_route_with_each_stages_settings(coin_demo: Path) -> None:
    """tests/integration/test_iterations.py has more."""
    report = json.loads((coin_demo / "report" / "report.json").read_text())
    with RunStore.of_run(coin_demo) as store:  # what the diagnosis went by, shown if it reads otherwise
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
