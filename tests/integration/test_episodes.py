"""The Level-3 episode runner on a real environment (TextWorldExpress, Java, offline).

A scripted policy stands in for the model: the gold path wins every game, a random one
rarely does, and playing in batches gives the same episodes as playing one at a time while
asking the policy about as often as the longest episode has steps. The example agent's whole run
on a text game, which trains, is tests/system/test_level3_runs.py (the coin demo).
"""

from __future__ import annotations

import random
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from support.paths import REPO

from agent2rl_tui.envs.base import EnvError, Environment
from agent2rl_tui.envs.twx import TextWorldExpress, parse_game
from agent2rl_tui.grader.episode_runner import EpisodeFormat, Pending, PlayStats, play, summarize

pytestmark = pytest.mark.skipif(shutil.which("java") is None, reason=(
    "java is missing (TextWorldExpress runs on it): sudo apt install openjdk-17-jre-headless"))

TWC = ("twc", "numLocations=1,numItemsToPutAway=1,includeDoors=0,limitInventorySize=0")
COOKING = ("cookingworld", "numLocations=1,numIngredients=1,numDistractorItems=0,includeDoors=0,limitInventorySize=0")
TEST_GAMES = [f"test:{20000 + i}" for i in range(12)]


def gold_paths(game: tuple[str, str], games: list[str]) -> dict[str, list[str]]:
    env = TextWorldExpress(*game)
    try:
        out = {}
        for g in games:
            env.reset(g)
            out[g] = env.gold_actions()
        return out
    finally:
        env.close()


def in_one_jvm(game: str, params: str = "", step_limit: int = 100) -> Callable[[], Environment]:
    """The task's own maker (``twx.maker``): a pool's simulators in one JVM, as the grader has them, since a
    JVM start is most of a small test's time. They play as simulators in JVMs of their own do
    (test_simulators_in_one_jvm_play_as_simulators_in_their_own)."""
    from agent2rl_tui.envs import EnvSpec

    return EnvSpec.from_table({"kind": "textworld-express", "game": game, "params": params,
                               "max_steps": str(step_limit)}).factory()


def gold_policy(gold: dict[str, list[str]]):  # noqa: ANN201
    def policy(batch: list[Pending]) -> list[str]:
        # A model's completion: the action on the first line, anything after it is dropped.
        return [gold[p.episode.game][p.episode.steps] + "\nand then more text" for p in batch]
    return policy


def test_the_gold_path_wins_every_game_in_batches() -> None:
    gold = gold_paths(TWC, TEST_GAMES)
    assert all(gold.values())
    stats = PlayStats()
    episodes = play(TEST_GAMES, in_one_jvm(*TWC, step_limit=20), gold_policy(gold),
                    max_steps=20, pool_size=4, stats=stats)
    assert [e.game for e in episodes] == TEST_GAMES
    assert all(e.won and e.end == "won" for e in episodes)
    assert [[t.action for t in e.turns] for e in episodes] == [gold[g] for g in TEST_GAMES]
    assert summarize(episodes)["score"] == 100.0
    # 12 games in a pool of 4: three waves, each as long as its longest gold path (3-4 steps).
    assert stats.largest_batch == 4
    assert stats.policy_calls <= sum(sorted(len(p) for p in gold.values())[-4:]) + 2 * 4


def test_batched_and_one_at_a_time_play_the_same_episodes() -> None:
    gold = gold_paths(TWC, TEST_GAMES[:6])
    one = play(TEST_GAMES[:6], in_one_jvm(*TWC), gold_policy(gold), pool_size=1)
    many = play(TEST_GAMES[:6], in_one_jvm(*TWC), gold_policy(gold), pool_size=6)
    assert [e.to_dict() for e in one] == [e.to_dict() for e in many]


def test_simulators_in_one_jvm_play_as_simulators_in_their_own() -> None:
    """The task's maker puts a whole pool in one JVM; interleaved games do not touch each other."""
    games = TEST_GAMES[:8]
    gold = gold_paths(TWC, games)
    made: list[TextWorldExpress] = []
    maker = in_one_jvm(*TWC)

    def make() -> TextWorldExpress:
        made.append(maker())
        return made[-1]

    nonsense = {g: ["look around", "take it"] + gold[g] for g in games[::2]}  # some games take longer
    policy = gold_policy(gold | nonsense)
    shared = play(games, make, policy, pool_size=8)
    alone = play(games, lambda: TextWorldExpress(*TWC), policy, pool_size=8)
    assert [e.to_dict() for e in shared] == [e.to_dict() for e in alone]
    assert all(e.won for e in shared)
    jvms = {id(env._jvm) for env in made}
    assert len(made) == 8 and len(jvms) == 1
    assert made[0]._jvm.down and made[0]._jvm.first._gateway.java_process.poll() is not None  # shut with the last


def test_a_random_policy_rarely_wins_cookingworld() -> None:
    rng = random.Random(0)

    def random_policy(batch: list[Pending]) -> list[str]:
        return [rng.choice(p.admissible or ["look around"]) for p in batch]

    games = [f"test:{20000 + i}" for i in range(16)]
    episodes = play(games, in_one_jvm(*COOKING), random_policy, max_steps=10, pool_size=8)
    assert summarize(episodes)["score"] < 25.0
    assert all(e.steps <= 10 for e in episodes)
    assert any(e.end == "step limit" for e in episodes)


def test_nonsense_actions_are_played_and_recorded_until_the_step_limit() -> None:
    episodes = play(TEST_GAMES[:2], in_one_jvm(*TWC), lambda b: ["xyzzy"] * len(b), max_steps=3)
    for e in episodes:
        assert not e.won and e.end == "step limit" and e.steps == 3
        assert all(t.action == "xyzzy" and t.reward == 0.0 for t in e.turns)
        assert "not sure what you mean" in e.turns[0].observation


def test_the_prompt_is_the_transcript_of_the_episode() -> None:
    gold = gold_paths(TWC, TEST_GAMES[:1])
    seen: list[str] = []

    def policy(batch: list[Pending]) -> list[str]:
        seen.extend(p.prompt for p in batch)
        return gold_policy(gold)(batch)

    fmt = EpisodeFormat(header="Goal: {goal}\n")
    (ep,) = play(TEST_GAMES[:1], lambda: TextWorldExpress(*TWC), policy, fmt=fmt)
    first = f"Goal: {ep.goal}\n{ep.first_observation.strip()}\n>"
    assert seen[0] == first
    expected = first
    for i, turn in enumerate(ep.turns):
        if i < len(seen):
            assert seen[i] == expected
        expected += f" {turn.action}\n{turn.observation.strip()}\n>"
    assert ep.prompt == expected


def test_thoughts_cost_a_step_and_get_ok() -> None:
    fmt = EpisodeFormat(think_prefix="think:")
    (ep,) = play(TEST_GAMES[:1], lambda: TextWorldExpress(*TWC), lambda b: ["think: where is it?"] * len(b),
                 fmt=fmt, max_steps=2)
    assert [t.observation for t in ep.turns] == ["OK.", "OK."] and ep.end == "step limit"


def test_bad_games_and_parameters_say_what_is_wrong() -> None:
    assert parse_game("test:20003") == ("test", 20003)
    for bad in ("20003", "valid:1", "test:x"):
        with pytest.raises(EnvError, match="fold"):
            parse_game(bad)
    with pytest.raises(EnvError, match="numLocations|Unrecognized|twc"):
        TextWorldExpress("twc", "numPlaces=1")


def test_an_episode_that_outgrows_the_context_ends_there_and_says_so() -> None:
    episodes = play(TEST_GAMES[:3], in_one_jvm(*TWC), lambda b: ["look around"] * len(b),
                    max_steps=20, pool_size=2, fits=lambda prompt: len(prompt) < 1200)
    assert [e.game for e in episodes] == TEST_GAMES[:3]
    for e in episodes:
        assert e.end == "context full" and not e.won and 0 < e.steps < 20
        assert len(e.prompt) >= 1200


def test_the_workspace_play_kit_builds_the_graders_prompts(tmp_path: Path) -> None:
    """data/play.py (a standalone copy for the agent) plays and prompts exactly as the grader."""
    import json
    import subprocess
    import sys

    from agent2rl_tui.run.workspace import write_play_kit
    from agent2rl_tui.tasks.registry import load_task, write_jsonl

    task = load_task("twc")
    data = tmp_path / "data"
    data.mkdir()
    write_jsonl(data / "train.jsonl", task.load_split("train")[:4])
    write_play_kit(data, task, task.inference)
    out = tmp_path / "expert.jsonl"
    proc = subprocess.run([sys.executable, str(data / "play.py"), "expert", "--out", str(out), "--limit", "3"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    expert = [json.loads(line) for line in out.read_text().splitlines()]
    assert [t["game"] for t in expert] == ["train:0", "train:1", "train:2"] and all(t["won"] for t in expert)

    # The kit's batched play (its simulators in one JVM, games interleaved) replays them exactly.
    code = ("import json, sys; sys.path.insert(0, 'data'); import play; "
            "ex = [json.loads(line) for line in open('expert.jsonl')]; "
            "nxt = {t['prompt']: ' ' + t['action'] + '\\n' for e in ex for t in e['turns']}; "
            "out = play.play(lambda ps: [nxt[p] for p in ps], [e['game'] for e in ex], pool=3); "
            "print(json.dumps([[o['won'], o['prompt'] == e['prompt']] for o, e in zip(out, ex)]))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1]) == [[True, True]] * 3

    # The grader, playing the same gold actions, sees the same transcript character for character.
    gold = {t["game"]: [turn["action"] for turn in t["turns"]] for t in expert}
    spec = task.raw["env"]
    episodes = play(list(gold), in_one_jvm(spec["game"], spec["params"]), gold_policy(gold),
                    fmt=EpisodeFormat(header=task.inference.prompt_template), max_steps=spec["max_steps"])
    for ep, t in zip(episodes, expert, strict=True):
        assert ep.prompt == t["prompt"]
        assert [turn["prompt"] for turn in t["turns"]][0] == ep.prompt.split(" " + t["turns"][0]["action"] + "\n")[0]


def test_a_tasks_env_table_is_read_once_with_clear_errors() -> None:
    from agent2rl_tui.envs import EnvSpec

    spec = EnvSpec.from_table({"kind": "textworld-express", "game": "twc", "max_steps": "7"})
    assert (spec.params, spec.max_steps, spec.pool_size, spec.think_prefix) == ("", 7, 16, None)
    with pytest.raises(EnvError, match="kind 'alfred' is not known"):
        EnvSpec.from_table({"kind": "alfred", "game": "x"})
    with pytest.raises(EnvError, match="needs game"):
        EnvSpec.from_table({"kind": "textworld-express"})


def test_the_coin_task_rewards_exploring_over_a_fixed_habit() -> None:
    """The coin task (the laptop RL demo) is shaped as its description says: a policy that
    remembers the rooms it has seen wins every game within the step limit, while the habit an
    imitator falls into (always the first exit listed) loses where the coin is the other way."""
    import re

    from agent2rl_tui.envs import EnvSpec
    from agent2rl_tui.tasks.registry import load_task

    task = load_task("coin")
    spec = EnvSpec.from_table(task.raw["env"])
    games = [row["game"] for row in task.eval_items(7)][:40]

    def last_observation(p: Pending) -> str:
        return p.episode.turns[-1].observation if p.episode.turns else p.episode.first_observation

    def exits(text: str) -> list[tuple[str, str]]:
        return [(d.lower(), room) for d, room in re.findall(r"To the (\w+) you see the ([\w ]+?)\.", text)]

    def explorer(batch: list[Pending]) -> list[str]:
        out = []
        for p in batch:
            text = last_observation(p)
            seen = {m.group(1) for t in [p.episode.first_observation, *(t.observation for t in p.episode.turns)]
                    if (m := re.search(r"You are in the ([\w ]+?)\.", t))}
            if "coin" in text:
                out.append("take coin")
                continue
            ways = exits(text)
            new = [d for d, room in ways if room not in seen]
            out.append(f"move {(new or [d for d, _ in ways])[0]}")
        return out

    def habit(batch: list[Pending]) -> list[str]:
        return ["take coin" if "coin" in last_observation(p) else f"move {exits(last_observation(p))[0][0]}"
                for p in batch]

    explored = play(games, spec.factory(), explorer, max_steps=spec.max_steps, pool_size=8)
    habitual = play(games, spec.factory(), habit, max_steps=spec.max_steps, pool_size=8)
    assert all(e.won for e in explored), [(e.game, [t.action for t in e.turns]) for e in explored if not e.won]
    assert max(len(e.turns) for e in explored) <= 4  # one room, back, the other room, take
    in_first_room = sum(e.won and len(e.turns) == 1 for e in habitual)
    assert 0 < in_first_room < summarize(habitual)["won"] < len(games)  # it wins only where its habit leads


def test_the_example_grpo_plays_every_game_behind_a_shared_first_prompt(tmp_path: Path) -> None:
    """Coin's games often open with the same prompt (the coin is not in sight yet) and TRL hands
    the rollout function prompts only: each GRPO group draws its own game among those its prompt
    opens, all its episodes play that game, and over a few batches every game is played."""
    import importlib.util
    import json
    import sys
    from collections import Counter

    from agent2rl_tui.run.workspace import write_play_kit
    from agent2rl_tui.tasks.registry import load_task, write_jsonl

    task = load_task("coin")
    data = tmp_path / "data"
    data.mkdir()
    write_jsonl(data / "train.jsonl", task.load_split("train")[:60])
    write_play_kit(data, task, task.settings_for(None))
    scripts = REPO / "agent2rl_tui" / "agents" / "example" / "scripts"
    sys.path.insert(0, str(scripts))
    try:
        spec = importlib.util.spec_from_file_location("episodes_grpo_under_test", scripts / "episodes_grpo.py")
        grpo = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(grpo)
        play = grpo.load_play_kit(data)
    finally:  # the next test of this process imports its own workspace's `play`
        sys.path.remove(str(scripts))
        sys.path.remove(str(data.resolve()))
        for name in ("play", "episodes_sft"):
            sys.modules.pop(name, None)
    games = [json.loads(line)["game"] for line in (data / "train.jsonl").read_text().splitlines()]
    env = play.make_env()
    games_of: dict[str, list[str]] = {}
    for game in games:
        games_of.setdefault(play.reset(env, game)[0], []).append(game)
    shared = max(games_of, key=lambda p: len(games_of[p]))
    assert len(games_of) < len(games) and len(games_of[shared]) >= 3  # first prompts are shared

    from agent2rl_tui.tasks.tinymodel import build_tokenizer

    rollouts = grpo.Rollouts(play, build_tokenizer(), games_of, generations=4, max_new_tokens=8, temperature=1.0, seed=0)
    played: Counter[str] = Counter()
    for _ in range(len(games_of[shared])):
        batch = rollouts.games_for([shared] * 4 + [shared] * 4)  # two groups of the same prompt in one batch
        assert len(set(batch[:4])) == 1 and len(set(batch[4:])) == 1  # a group plays one game
        played.update(batch)
    assert set(played) == set(games_of[shared])  # every game behind the prompt, not one standing for all
