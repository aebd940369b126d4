#!/usr/bin/env python3
"""Play this task's games exactly as the grader plays them (copied into the workspace).

A program for the agent, standard library and ``textworld_express`` only: the same prompt
(header with the goal, the first observation, then `` {action}\\n{observation}\\n>`` per
turn), the same action rule (the completion's first line) and the same step limit as the
grader, read from ``env.json`` beside this file. Use it to evaluate a model locally and to
collect trajectories for training:

    python data/play.py expert --out expert.jsonl [--limit N]   # gold paths of the train games
    python data/play.py show train:0                            # one game's first prompt

It plays the train split's games only (the ids in ``train.jsonl`` beside it): the grader's games
come from the test fold, and some games (the coin collector's) are the same in every fold, so a
train-fold seed outside the split may be one of them.

or import it (``sys.path.insert(0, "data")``; ``import play``) and call
``play.play(generate, games)`` with ``generate(prompts: list[str]) -> list[str]``: every live
game's next action comes from one call, as in the grader. For a rollout loop of your own
(e.g. RL on token ids), ``make_env``, ``reset``, ``step``, ``action_from`` and ``next_turn``
are the pieces ``play`` is made of. Each turn is returned with the
prompt the model saw, so ``prompt -> " " + action + "\\n"`` is a training pair.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SPEC_FILE = HERE / "env.json"
# Beside env.json in a workspace; anywhere else (the package's own copy) there is nothing to play.
SPEC: dict[str, Any] = json.loads(SPEC_FILE.read_text(encoding="utf-8")) if SPEC_FILE.exists() else {}


_JVM: list[Any] = []  # the simulator whose JVM every other one lives in (one JVM per process)


def make_env() -> Any:
    """A fresh simulator for this task's games. All of them share one JVM (a JVM holds any
    number of independent games), which ends with this process; ``close()`` is a no-op."""
    import copy

    from textworld_express import TextWorldExpressEnv

    limit = int(SPEC["max_steps"]) + 1
    if not _JVM:
        host = TextWorldExpressEnv(envStepLimit=limit)
        host.close = lambda: None  # its __del__ must not end the JVM under the others
        _JVM.append(host)
    env = copy.copy(_JVM[0])
    env.server = _JVM[0]._gateway.jvm.textworldexpress.runtime.PythonInterface()
    env.envStepLimit, env.lastStepScore, env.runHistory = limit, 0, []
    env.load(SPEC["game"], SPEC["params"])
    return env


PLAYABLE_FOLD = "train"


class NotATrainGame(ValueError):
    """A game outside the train split: the grader draws its games from the test fold."""


def train_split() -> set[str]:
    """The ids of the train split's games (``train.jsonl`` beside this file; none elsewhere)."""
    path = HERE / "train.jsonl"
    if not path.exists():
        return set()
    return {str(json.loads(line)["game"]) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()}


_TRAIN: list[set[str]] = []


def train_game(game: str) -> tuple[str, int]:
    """``"train:<seed>"`` of the train split → ``("train", seed)``; any other game is refused."""
    if not _TRAIN:
        _TRAIN.append(train_split())
    fold, _, seed = str(game).partition(":")
    if fold != PLAYABLE_FOLD or not seed.isascii() or not seed.isdigit() or str(game) not in _TRAIN[0]:
        raise NotATrainGame(
            f"{game!r}: this kit plays train-fold games only, those of the train split (train.jsonl); the "
            "grader draws each run's games from the test fold, which is not for training")
    return fold, int(seed)


def reset(env: Any, game: str) -> tuple[str, str]:
    """(prompt, goal) of a fresh game ``train:<seed>`` (other folds are refused: ``train_game``)."""
    fold, seed = train_game(game)
    obs, infos = env.reset(seed=seed, gameFold=fold, generateGoldPath=True)
    goal = infos.get("taskDescription", "")
    return SPEC["header"].format(goal=goal) + obs.strip() + "\n>", goal


def next_turn(action: str, observation: str) -> str:
    return f" {action}\n{observation.strip()}\n>"


def action_from(completion: str) -> str:
    return completion.strip().split("\n", 1)[0].strip()


def play(generate: Callable[[list[str]], list[str]], games: list[str], pool: int = 16) -> list[dict[str, Any]]:
    """Each game once; all live games step together. Returns one trajectory per game, in order."""
    envs = [make_env() for _ in range(min(pool, len(games)))]
    todo = list(reversed(games))
    done: list[dict[str, Any]] = []

    def start(env: Any) -> dict[str, Any]:
        game = todo.pop()
        prompt, goal = reset(env, game)
        return {"env": env, "game": game, "goal": goal, "prompt": prompt, "turns": [], "won": False}

    try:
        live = [start(env) for env in envs]
        while live:
            completions = generate([t["prompt"] for t in live])
            following: list[dict[str, Any]] = []
            for t, completion in zip(live, completions, strict=True):
                action = action_from(completion)
                if _step(t, action, completion):
                    done.append(t)
                    if todo:
                        following.append(start(t["env"]))
                else:
                    following.append(t)
            live = following
    finally:
        for env in envs:
            env.close()
    order = {g: i for i, g in enumerate(games)}
    return [{k: v for k, v in t.items() if k != "env"} for t in sorted(done, key=lambda t: order[t["game"]])]


def step(env: Any, action: str) -> tuple[str, float, bool, bool, float]:
    """One action: (observation, reward, won, game over, the game's score 0..1).

    The step limit is the caller's to count (``SPEC["max_steps"]``), as the grader does.
    """
    obs, reward, finished, infos = env.step(action)
    won = bool(infos.get("tasksuccess"))
    return obs, float(reward), won, won or bool(finished or infos.get("taskfailure")), float(infos.get("score", 0.0))


def _step(t: dict[str, Any], action: str, completion: str) -> bool:
    """Play one action in trajectory ``t``; True when its game is over."""
    obs, reward, won, over, _score = step(t["env"], action)
    t["turns"].append({"prompt": t["prompt"], "completion": completion, "action": action,
                       "observation": obs, "reward": reward})
    t["prompt"] += next_turn(action, obs)
    t["won"] = won
    return over or len(t["turns"]) >= int(SPEC["max_steps"])


def expert(games: list[str]) -> list[dict[str, Any]]:
    """The gold path of each game, with the prompt before each action as the grader shows it."""
    env = make_env()
    out = []
    try:
        for game in games:
            prompt, goal = reset(env, game)
            t = {"env": env, "game": game, "goal": goal, "prompt": prompt, "turns": [], "won": False}
            for action in env.getGoldActionSequence():
                if _step(t, action, f" {action}\n"):
                    break
            out.append({k: v for k, v in t.items() if k != "env"})
    finally:
        env.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    ex = sub.add_parser("expert", help="gold-path trajectories of the train games, in the grader's format")
    ex.add_argument("--out", required=True)
    ex.add_argument("--limit", type=int)
    sh = sub.add_parser("show", help="the first prompt of a game")
    sh.add_argument("game")
    args = ap.parse_args(argv)
    if not SPEC:
        ap.error(f"{SPEC_FILE} is missing: run the copy in the workspace's data/ folder")
    if args.cmd == "show":
        try:
            train_game(args.game)
        except NotATrainGame as exc:
            ap.error(str(exc))
        env = make_env()
        try:
            print(reset(env, args.game)[0])
        finally:
            env.close()
        return 0
    games = [json.loads(line)["game"] for line in (HERE / "train.jsonl").read_text().splitlines() if line.strip()]
    trajectories = expert(games[: args.limit] if args.limit else games)
    with open(args.out, "w", encoding="utf-8") as fh:
        for t in trajectories:
            fh.write(json.dumps(t) + "\n")
    won = sum(t["won"] for t in trajectories)
    print(f"{len(trajectories)} trajectories, {won} won -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
