"""The Level-3 episode runner on a real environment (TextWorldExpress, Java, offline).

A scripted policy stands in for the model: the gold path wins every game, a random one
rarely does, and playing in batches gives the same episodes as playing one at a time while
asking the policy about as often as the longest episode has steps.
"""

from __future__ import annotations

import random
import shutil

import pytest

from agent2rl_tui.envs.base import EnvError
from agent2rl_tui.envs.twx import TextWorldExpress, parse_game
from agent2rl_tui.grader.episodes import EpisodeFormat, Pending, PlayStats, play, summarize

pytestmark = pytest.mark.skipif(shutil.which("java") is None, reason="TextWorldExpress needs Java on PATH")

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


def gold_policy(gold: dict[str, list[str]]):  # noqa: ANN201
    def policy(batch: list[Pending]) -> list[str]:
        # A model's completion: the action on the first line, anything after it is dropped.
        return [gold[p.episode.game][p.episode.steps] + "\nand then more text" for p in batch]
    return policy


def test_the_gold_path_wins_every_game_in_batches() -> None:
    gold = gold_paths(TWC, TEST_GAMES)
    assert all(gold.values())
    stats = PlayStats()
    episodes = play(TEST_GAMES, lambda: TextWorldExpress(*TWC, step_limit=20), gold_policy(gold),
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
    one = play(TEST_GAMES[:6], lambda: TextWorldExpress(*TWC), gold_policy(gold), pool_size=1)
    many = play(TEST_GAMES[:6], lambda: TextWorldExpress(*TWC), gold_policy(gold), pool_size=6)
    assert [e.to_dict() for e in one] == [e.to_dict() for e in many]


def test_a_random_policy_rarely_wins_cookingworld() -> None:
    rng = random.Random(0)

    def random_policy(batch: list[Pending]) -> list[str]:
        return [rng.choice(p.admissible or ["look around"]) for p in batch]

    games = [f"test:{20000 + i}" for i in range(16)]
    episodes = play(games, lambda: TextWorldExpress(*COOKING), random_policy, max_steps=10, pool_size=8)
    assert summarize(episodes)["score"] < 25.0
    assert all(e.steps <= 10 for e in episodes)
    assert any(e.end == "step limit" for e in episodes)


def test_nonsense_actions_are_played_and_recorded_until_the_step_limit() -> None:
    episodes = play(TEST_GAMES[:2], lambda: TextWorldExpress(*TWC), lambda b: ["xyzzy"] * len(b), max_steps=3)
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
