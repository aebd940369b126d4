"""Level-3 grading speed: episodes per second on the twc task with the tiny model, batched
(every live game's next action from one generate call) against one game at a time, on each
engine, and the environment alone (TextWorldExpress steps per second, gold paths). Per run: the
prompt tokens the engine was given per turn and how many it computed again (prefilled): every
turn's prompt is the last one and a turn, so an engine without a prefix cache re-reads the
whole transcript each time; vLLM's prefix cache and the transformers engine's turn cache
(``generate_turns``, timed with and without) compute only the new turn.

Run: ``python bench/episodes.py [GAMES] [MODEL] [ENGINES] [--quick]`` (default 64 games, a fresh,
untrained tiny model, whose actions are noise until the step limit, and ``transformers,vllm``;
give a trained model, e.g. the example agent's SFT output, to time episodes that end when they
are won). ``--quick``: 2 games, the same steps on each engine, its time mostly vLLM's start.
Needs Java; vLLM where it is installed.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from agent2rl_tui.envs import EnvSpec
from agent2rl_tui.envs.base import Environment
from agent2rl_tui.envs.twx import TextWorldExpress
from agent2rl_tui.grader.engines.base import Engine
from agent2rl_tui.grader.engines.hf import TransformersEngine
from agent2rl_tui.grader.episode_runner import EpisodeFormat, Pending, PlayStats, play, summarize
from agent2rl_tui.grader.evaluators.episodes import engine_policy
from agent2rl_tui.tasks.registry import InferenceSettings, Task, load_task
from agent2rl_tui.tasks.tinymodel import build_tiny_model

GAMES, QUICK_GAMES = 64, 2


def _int_or_default(text: str) -> int | None:
    """An empty argument keeps the default (``episodes.py "" MODEL``): the games' number is positional."""
    return int(text) if text else None


def _path_or_default(text: str) -> Path | None:
    return Path(text) if text else None


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("games", nargs="?", type=_int_or_default,
                        help=f"test-fold games (default {GAMES}; --quick {QUICK_GAMES})")
    parser.add_argument("model", nargs="?", type=_path_or_default, help="a model folder (default: a fresh tiny model)")
    parser.add_argument("engines", nargs="?", default="transformers,vllm", help="default transformers,vllm")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_GAMES} games: the same steps on each engine")
    return parser.parse_args()


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
           settings: InferenceSettings, *, turn_cache: bool = True) -> tuple[float, float]:
    """Play the games with ``pool`` at once, as the grader does (an engine's ``generate_turns``
    where it has one, unless ``turn_cache`` is off); (seconds in all, seconds in generate)."""
    cached = turn_cache and getattr(engine, "generate_turns", None) is not None
    grader_policy = engine_policy(engine, settings, turn_cache=turn_cache)
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
        out = grader_policy(batch)
        spent["generate"] += time.perf_counter() - t
        return out

    t = time.perf_counter()
    before = (engine.prefill.prompt_tokens, engine.prefill.cached_tokens)
    episodes = play(task_games, make_env, policy, fmt=fmt, max_steps=spec.max_steps, pool_size=pool, stats=stats)
    dt = time.perf_counter() - t
    s = summarize(episodes)
    turns = sum(e.steps for e in episodes) or 1
    given = engine.prefill.prompt_tokens - before[0]
    computed = given - (engine.prefill.cached_tokens - before[1])
    label = engine.name + (" (turn cache)" if cached else "")
    print(f"{label:26} pool {pool:3d}: {len(episodes)} episodes in {dt:6.1f} s = {len(episodes) / dt:6.2f} "
          f"episodes/s (generate {spent['generate']:.1f} s, starting {pool} simulators {spent['start envs']:.1f} s, "
          f"the rest {dt - sum(spent.values()):.1f} s); {stats.policy_calls} generate calls, "
          f"mean {s['mean_steps']:.1f} steps; per turn {given / turns:.0f} prompt tokens, {computed / turns:.0f} "
          "prefilled")
    return dt, spent["generate"]


def predict_alfworld_on_a_gpu(ms_per_decode_step: float = 12.0, tokens_per_action: int = 30,
                              reset_s: float = 1.06, step_s: float = 0.042) -> None:
    """What this code should take for ALFWorld's 134 games on one GPU: a prediction, not a
    measurement (no GPU here). ``reset_s`` and ``step_s`` are bench/alfworld_env.py's figures on
    this machine (one game's load + reset; one step), ``ms_per_decode_step`` a 7B model's decode
    step at batch 16 on an H100 in bf16 (~14 GB of weights read at ~3 TB/s, with overhead);
    with the prefix cache each turn prefills only its new tokens, so decoding dominates."""
    task = load_task("alfworld")
    env = task.raw["env"]
    games, pool, max_steps = 134, int(env["pool_size"]), int(env["max_steps"])
    waves = -(-games // pool)
    rounds = waves * max_steps  # worst case: every game runs to its step limit
    generate = rounds * tokens_per_action * ms_per_decode_step / 1000
    environment = rounds * step_s + waves * reset_s  # the pool's processes step and reset in parallel
    print(f"prediction, ALFWorld on one H100 (7B model, vLLM, prefix cache): {games} games, {pool} at once, at most "
          f"{max_steps} steps: {rounds} rounds x {tokens_per_action} tokens x {ms_per_decode_step:.0f} ms = "
          f"{generate / 60:.1f} min generating + {environment / 60:.1f} min in the environment = "
          f"{(generate + environment) / 60:.1f} min at worst (games that end early take less)")


def make_engine(name: str, model: Path, task: Task) -> Engine:
    if name == "vllm":
        from agent2rl_tui.grader.engines import visible_gpus
        from agent2rl_tui.grader.engines.vllm_engine import VLLMEngine
        from agent2rl_tui.tasks.registry import engine_settings

        engine: Engine = VLLMEngine(engine_settings(task.engine, {"engine": "vllm"}), visible_gpus())
    else:
        engine = TransformersEngine()
    engine.load(model)
    return engine


def main() -> None:
    args = parse_args()
    n = args.games or (QUICK_GAMES if args.quick else GAMES)
    engines = args.engines.split(",")
    task = load_task("twc")
    spec = EnvSpec.from_table(task.raw["env"])
    games = [f"test:{20000 + i}" for i in range(n)]
    environment_alone(spec.game, spec.params, games)
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model or build_tiny_model(Path(tmp) / "tiny", max_positions=2048)
        print(f"model: {model}")
        settings = task.inference
        fmt = EpisodeFormat(header=settings.prompt_template)
        sizes = sorted({min(n, 64), min(n, spec.pool_size), 1}, reverse=True)
        for name in engines:
            try:
                engine = make_engine(name, model, task)
            except Exception as exc:  # noqa: BLE001 - a bench says what it could not measure
                print(f"{name}: not measured ({type(exc).__name__}: {exc})")
                continue
            pools = {pool: played(engine, games, pool, spec, fmt, settings) for pool in sizes}
            if getattr(engine, "generate_turns", None) is not None:  # what the turn cache saves
                played(engine, games, min(n, 64), spec, fmt, settings, turn_cache=False)
            engine.close()
            one, one_gen = pools[1]
            many, many_gen = pools[min(n, 64)]
            print(f"{name}: generation, {min(n, 64)} at once vs one at a time: {one_gen / many_gen:.1f}x faster; "
                  f"end to end {one / many:.1f}x (goal: >= 5x)")
    predict_alfworld_on_a_gpu()


if __name__ == "__main__":
    main()
