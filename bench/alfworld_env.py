"""ALFWorld's environment alone: what a game costs before any model runs.

Per game: load + reset, the planner's plan (``gold_actions``), and the plan's steps; then
steps per second (moves, and commands the game does not know), the time per game on the
expert plan, the start-up of one environment process, and the games played by the episode
runner one at a time in-process against a pool of processes stepped at once (the grader's
way for ALFWorld). Prints figures; asserts nothing.

Run: ``python bench/alfworld_env.py [DIR] [--quick]`` (not ``alfworld.py``: a script so named would
shadow the ``alfworld`` package), DIR holding ALFWorld's ``json_2.1.1/`` (default: the
offline test games beside the repository, else ``$ALFWORLD_DATA`` or ``~/.cache/alfworld``).
``--quick``: the first game only, the same steps. Needs ``pip install -e '.[alfworld]'``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from functools import partial
from pathlib import Path

from agent2rl_tui.envs.alfworld import ALFWorld
from agent2rl_tui.envs.subproc import InChildProcess
from agent2rl_tui.grader.episode_runner import Pending, ReActFormat, play
from agent2rl_tui.tasks.alfworld import GAMES_DIR, default_source, prepare_games
from agent2rl_tui.tasks.registry import load_task

OFFLINE_GAMES = Path(__file__).resolve().parents[2] / "shared" / "data" / "alfworld"
UNKNOWN_STEPS, QUICK_UNKNOWN_STEPS = 20, 5


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", nargs="?", type=Path, help="a folder holding json_2.1.1/")
    parser.add_argument("--quick", action="store_true", help="the first game only: the same steps in seconds")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    source = args.source or (OFFLINE_GAMES if OFFLINE_GAMES.is_dir() else default_source())
    unknown_steps = QUICK_UNKNOWN_STEPS if args.quick else UNKNOWN_STEPS
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["AGENT2RL_DATA"] = tmp
        task = load_task("alfworld")
        meta = prepare_games(task, source)
        games = [r["game"] for r in task.load_split("train") + task.load_split("eval")][: 1 if args.quick else None]
        root = Path(tmp) / task.name / GAMES_DIR
        print(f"{len(games)} games from {meta['source']}; {os.cpu_count()} CPUs")

        t = time.perf_counter()
        env = ALFWorld(root)
        print(f"first environment (imports textworld + alfworld): {time.perf_counter() - t:.2f} s")
        resets, plans, per_game, moves, move_s = [], [], [], 0, 0.0
        gold: dict[str, list[str]] = {}
        for game in games:
            t0 = time.perf_counter()
            env.reset(game)
            t1 = time.perf_counter()
            gold[game] = env.gold_actions() or []
            t2 = time.perf_counter()
            for action in gold[game]:
                env.step(action)
            t3 = time.perf_counter()
            resets.append(t1 - t0)
            plans.append(t2 - t1)
            per_game.append((t1 - t0) + (t3 - t2))
            moves, move_s = moves + len(gold[game]), move_s + (t3 - t2)
            print(f"  {game[:70]:70} reset {t1 - t0:5.2f} s  plan {t2 - t1:5.2f} s  "
                  f"{len(gold[game])} steps {t3 - t2:5.2f} s")
        t = time.perf_counter()
        for _ in range(unknown_steps):
            env.step("xyzzy")
        unknown = unknown_steps / (time.perf_counter() - t)
        env.close()
        print(f"reset (load + reset): mean {statistics.mean(resets):.2f} s, max {max(resets):.2f} s")
        print(f"planner plan: mean {statistics.mean(plans):.2f} s")
        print(f"steps: {moves / move_s:.1f} moves/s, {unknown:.1f} unknown commands/s")
        print(f"time per game on the expert plan (reset + steps, no planner): mean {statistics.mean(per_game):.2f} s")

        t = time.perf_counter()
        InChildProcess(partial(ALFWorld, root)).close()
        print(f"one environment process, started and closed: {time.perf_counter() - t:.2f} s")

        def policy(batch: list[Pending]) -> list[str]:
            return [gold[p.episode.game][p.episode.steps] for p in batch]

        fmt = ReActFormat(think_prefix="think:")
        t = time.perf_counter()
        play(games, partial(ALFWorld, root), policy, fmt=fmt, pool_size=1)
        serial = time.perf_counter() - t
        n = min(len(games), 16)
        t = time.perf_counter()
        play(games, partial(InChildProcess, partial(ALFWorld, root)), policy, fmt=fmt, pool_size=n, workers=n)
        pooled = time.perf_counter() - t
        print(f"episode runner, expert plans: one game at a time in-process {serial:.1f} s; "
              f"{n} processes at once {pooled:.1f} s ({serial / pooled:.1f}x)")


if __name__ == "__main__":
    main()
