"""The transformers engine's cache across the turns of episodes: the same text as without it,
the prefix computed once.

Transcripts that grow by a completion and an observation each turn, generated with the real
tiny model, compared turn by turn with the engine's plain ``generate``; then whole twc episodes
through the grader's evaluator with and without the cache.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from agent2rl_tui.grader.engines.hf import TransformersEngine
from agent2rl_tui.grader.evaluators.episodes import play_task
from agent2rl_tui.tasks.registry import InferenceSettings, load_task
from agent2rl_tui.tasks.tinymodel import build_tiny_model

WORDS = "you are in a kitchen there is a table north door open take coin apple look around go south".split()


def text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


@pytest.fixture(scope="module")
def engine(tiny_model: Path):
    e = TransformersEngine()
    e.load(tiny_model)
    yield e
    e.close()


def test_each_turn_gives_the_uncached_text_and_computes_only_the_new_tokens(engine: TransformersEngine) -> None:
    rng = random.Random(0)
    settings = InferenceSettings(max_new_tokens=8, batch_size=5, stop=("\n",))
    prompts = ["Your task: " + text(rng, rng.randint(30, 90)) + "\n>" for _ in range(12)]
    keys = list(range(12))
    for turn in range(5):
        before = (engine.prefill.prompt_tokens, engine.prefill.cached_tokens)
        plain = engine.generate(prompts, settings)
        mid = (engine.prefill.prompt_tokens, engine.prefill.cached_tokens)
        cached = engine.generate_turns(keys, prompts, settings)
        given = engine.prefill.prompt_tokens - mid[0]
        reused = engine.prefill.cached_tokens - mid[1]
        assert cached == plain, turn
        assert given == mid[0] - before[0]
        if turn == 0:
            assert reused == 0
        else:  # everything but the turn just added came from the cache
            assert reused >= given - 12 * 40, (reused, given)
        # The transcript grows; one episode ends and a new one takes its place (a fresh key).
        prompts = [p + " " + c + "\n" + text(rng, rng.randint(3, 12)) + "\n>" for p, c in zip(prompts, plain)]
        keys[turn] = 100 + turn
        prompts[turn] = "Your task: " + text(rng, 40) + "\n>"


def test_a_new_model_never_reads_the_last_ones_cache(engine: TransformersEngine, tmp_path: Path,
                                                     tiny_model: Path) -> None:
    settings = InferenceSettings(max_new_tokens=6, stop=("\n",))
    prompts = ["Your task: take the coin\n>", "Your task: open the door\n>"]
    engine.generate_turns([0, 1], prompts, settings)
    other = build_tiny_model(tmp_path / "other", seed=7)
    engine.load(other)
    try:
        longer = [p + " look\nYou see a room.\n>" for p in prompts]
        assert engine.generate_turns([0, 1], longer, settings) == engine.generate(longer, settings)
        assert engine.turns.rows.keys() == {0, 1}
    finally:
        engine.load(tiny_model)


def test_whole_episodes_are_the_same_with_and_without_the_cache(engine: TransformersEngine, prepared_data: Path) -> None:
    """twc's games to the step limit (the untrained model's actions are noise): every action the
    same, and the engine computed a fraction of the prompt tokens."""

    class Plain:  # the engine without its turn cache
        name = "transformers"

        def __init__(self, inner: TransformersEngine) -> None:
            self.inner, self.prefill, self.tokenizer = inner, inner.prefill, inner.tokenizer

        def generate(self, prompts: list[str], settings: InferenceSettings) -> list[str]:
            return self.inner.generate(prompts, settings)

        def context_limit(self) -> int | None:
            return self.inner.context_limit()

    task = load_task("twc")
    items = task.load_split("eval")[:12]
    plain, plain_summary = play_task(task, Plain(engine), items, task.inference)  # type: ignore[arg-type]
    cached, summary = play_task(task, engine, items, task.inference)
    assert [r.extra["turns"] for r in cached] == [r.extra["turns"] for r in plain]
    assert summary["prompt_tokens"] == plain_summary["prompt_tokens"]
    assert plain_summary["prefilled_tokens"] == plain_summary["prompt_tokens"]
    assert summary["prefilled_tokens"] < summary["prompt_tokens"] / 3


def test_the_cache_keeps_to_its_memory_bound(engine: TransformersEngine) -> None:
    from agent2rl_tui.grader.engines.turn_cache import row_bytes

    settings = InferenceSettings(max_new_tokens=4, stop=("\n",))
    prompts = [f"Your task: item {i} " + "take coin " * 20 + "\n>" for i in range(6)]
    engine.generate_turns(list(range(6)), prompts, settings)
    one = max(row_bytes(r) for r in engine.turns.rows.values())
    engine.turns.max_bytes = 3 * one
    try:
        longer = [p + " look\nok\n>" for p in prompts]
        assert engine.generate_turns(list(range(6)), longer, settings) == engine.generate(longer, settings)
        assert len(engine.turns.rows) <= 3 and sum(row_bytes(r) for r in engine.turns.rows.values()) <= 3 * one + one
    finally:
        engine.turns.max_bytes = 2 << 30
