"""Level-3 grading speed: episodes per second on the twc task with the tiny model, batched
(every live game's next action from one generate call) against one game at a time, and the
environment alone (TextWorldExpress steps per second, gold paths).

Run: ``python bench/episodes.py [GAMES] [MODEL]`` (default 64 games and a fresh, untrained
tiny model, whose actions are noise until the step limit; give a trained model, e.g. the
example agent's SFT output, to time episodes that end when they are won). Needs Java.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from agent2rl_tui.envs import EnvSpec
from agent2rl_tui.envs.twx import TextWorldExpress
from agent2rl_tui.grader.engines.base import Engine
from agent2rl_tui.grader.engines.hf import TransformersEngine
from agent2rl_tui.grader.episodes import EpisodeFormat, Pending, PlayStats, play, summarize
from agent2rl_tui.tasks.registry import load_task
from agent2rl_tui.tasks.tinymodel import build_tiny_model


def environment_alone(game: str, params: str, games: list[str]) -> None:
    env = TextWorldExpress(game, params)
    steps, t = 0, time.perf_counter()
    for g in games:
        env.reset(g)
        for action in env.gold_actions() or []:
            env.step(action)
            steps += 1
    dt = time.perf_counter() - t
    env.close()
    print(f"environment alone: {len(games)} games on their gold paths, {steps} steps in {dt:.2f} s "
          f"({steps / dt:.0f} steps/s, {dt / len(games) * 1000:.1f} ms per game incl. reset)")


def played(engine: Engine, task_games: list[str], pool: int, spec: EnvSpec, fmt: EpisodeFormat, settings) -> float:  # noqa: ANN001
    stats = PlayStats()

    def policy(batch: list[Pending]) -> list[str]:
        return engine.generate([p.prompt for p in batch], settings)

    t = time.perf_counter()
    episodes = play(task_games, spec.factory(), policy, fmt=fmt, max_steps=spec.max_steps, pool_size=pool,
                    stats=stats)
    dt = time.perf_counter() - t
    s = summarize(episodes)
    print(f"pool {pool:3d}: {len(episodes)} episodes in {dt:6.1f} s = {len(episodes) / dt:6.2f} episodes/s; "
          f"{stats.policy_calls} generate calls, mean {s['mean_steps']:.1f} steps, score {s['score']:.1f}")
    return dt


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 64
    task = load_task("twc")
    spec = EnvSpec.from_table(task.raw["env"])
    games = [f"test:{20000 + i}" for i in range(n)]
    environment_alone(spec.game, spec.params, games)
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(sys.argv[2]) if len(sys.argv) > 2 else build_tiny_model(Path(tmp) / "tiny", max_positions=2048)
        print(f"model: {model}")
        engine = TransformersEngine()
        engine.load(model)
        settings = task.inference
        fmt = EpisodeFormat(header=settings.prompt_template)
        batched = played(engine, games, min(n, 64), spec, fmt, settings)
        one = played(engine, games, 1, spec, fmt, settings)
        print(f"batched is {one / batched:.1f}x faster than one episode at a time (goal: >= 5x at 64 episodes)")


if __name__ == "__main__":
    main()
