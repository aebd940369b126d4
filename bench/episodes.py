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
from agent2rl_tui.envs.base import Environment
from agent2rl_tui.envs.twx import TextWorldExpress
from agent2rl_tui.grader.engines.base import Engine
from agent2rl_tui.grader.engines.hf import TransformersEngine
from agent2rl_tui.grader.episodes import EpisodeFormat, Pending, PlayStats, play, summarize
from agent2rl_tui.tasks.registry import InferenceSettings, load_task
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


def played(engine: Engine, task_games: list[str], pool: int, spec: EnvSpec, fmt: EpisodeFormat,
           settings: InferenceSettings) -> tuple[float, float]:
    """Play the games with ``pool`` at once; (seconds in all, seconds in generate)."""
    stats = PlayStats()
    spent = {"generate": 0.0, "start envs": 0.0}
    make = spec.factory()

    def make_env() -> Environment:
        t = time.perf_counter()
        env = make()
        spent["start envs"] += time.perf_counter() - t
        return env

    def policy(batch: list[Pending]) -> list[str]:
        t = time.perf_counter()
        out = engine.generate([p.prompt for p in batch], settings)
        spent["generate"] += time.perf_counter() - t
        return out

    t = time.perf_counter()
    episodes = play(task_games, make_env, policy, fmt=fmt, max_steps=spec.max_steps, pool_size=pool, stats=stats)
    dt = time.perf_counter() - t
    s = summarize(episodes)
    print(f"pool {pool:3d}: {len(episodes)} episodes in {dt:6.1f} s = {len(episodes) / dt:6.2f} episodes/s "
          f"(generate {spent['generate']:.1f} s, starting {pool} simulators {spent['start envs']:.1f} s, "
          f"the rest {dt - sum(spent.values()):.1f} s); {stats.policy_calls} generate calls, "
          f"mean {s['mean_steps']:.1f} steps, score {s['score']:.1f}")
    return dt, spent["generate"]


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
        sizes = sorted({min(n, 64), spec.pool_size, 1}, reverse=True)
        pools = {pool: played(engine, games, pool, spec, fmt, settings) for pool in sizes}
        one, one_gen = pools[1]
        many, many_gen = pools[min(n, 64)]
        task_pool, _ = pools[spec.pool_size]
        print(f"generation, {min(n, 64)} at once vs one at a time: {one_gen / many_gen:.1f}x faster (goal: >= 5x)")
        print(f"end to end: {min(n, 64)} at once {one / many:.1f}x, the task's pool of {spec.pool_size} "
              f"{one / task_pool:.1f}x faster than one game at a time")


if __name__ == "__main__":
    main()
