#!/usr/bin/env python3
"""Play this task's ALFWorld games exactly as the grader plays them (copied into the workspace).

A program for the agent, standard library and ``alfworld``/``textworld`` only, reading
``env.json``, ``react_prompts.json`` and ``games/`` beside this file. The grader's transcript
(ReAct's ALFWorld evaluation): the header with two examples of the game's kind, the first
observation without TextWorld's banner paragraph (its other paragraphs joined by single
newlines) and ``\\n>``, then `` {action}\\n{observation}\\n>`` per turn with the observation as
the game gave it; the action is the completion's first line; a ``think:`` action costs a
step, is not sent to the game and is answered ``OK.``; at most ``max_steps`` actions. Use it to evaluate a model
locally and to collect trajectories for training:

    python data/play.py expert --out expert.jsonl [--limit N] [--jobs J]  # planner plans of the train games
    python data/play.py show GAME                                         # one game's first prompt

or import it (``sys.path.insert(0, "data")``; ``import play``) and call
``play.play(generate, games)`` with ``generate(prompts: list[str]) -> list[str]``: every live
game's next action comes from one call, as in the grader. For a rollout loop of your own
(e.g. RL on token ids), ``make_env``, ``reset``, ``step``, ``action_from`` and ``next_turn``
are the pieces ``play`` is made of. Each turn is returned with the prompt the model saw, so
``prompt -> " " + action + "\\n"`` is a training pair.

The environment: textworld's ``GenericEnvironment`` with ALFWorld's ``AlfredDemangler`` and
``AlfredInfos`` wrappers, as ``AlfredTWEnv`` builds it; ``env.load(path to
game.tw-pddl)``, ``env.reset()`` → ``(observation, infos)``, ``env.step(command)`` →
``(observation, score, done, infos)`` with ``infos["won"]`` and
``infos["admissible_commands"]``. A game costs about a second to load (less when it is played
again in the same process: ``remember_translations``) and ~0.05 s a step.
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
PREFIXES = {"pick_and_place": "put", "pick_clean_then_place": "clean", "pick_heat_then_place": "heat",
            "pick_cool_then_place": "cool", "look_at_obj": "examine", "pick_two_obj": "puttwo"}


def remember_translations(kept: int = 32) -> None:
    """Keep fast-downward's PDDL->SAS translations in this process (by domain, problem and optimize):
    TextWorld translates a game four times for one load and reset, and again each time it is played;
    the translation is a pure function of the texts (a kept task is handed out as a deep copy). The
    grader's environment does the same (agent2rl_tui/envs/alfworld.py); the games play the same."""
    import copy
    from collections import OrderedDict

    import fast_downward

    if getattr(fast_downward.pddl2sas, "remembers", False):
        return
    translate = fast_downward.pddl2sas
    kept_tasks: OrderedDict[tuple[str, str, bool], Any] = OrderedDict()

    def pddl2sas(domain: str, problem: str, verbose: bool = False, optimize: bool = False) -> Any:
        key = (domain, problem, bool(optimize))
        if key in kept_tasks:
            kept_tasks.move_to_end(key)
        else:
            kept_tasks[key] = translate(domain, problem, verbose=verbose, optimize=optimize)
            while len(kept_tasks) > kept:
                kept_tasks.popitem(last=False)
        task, sas = kept_tasks[key]
        return copy.deepcopy(task), sas

    pddl2sas.remembers = True  # type: ignore[attr-defined]
    fast_downward.pddl2sas = pddl2sas


def make_env() -> Any:
    import textworld
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
    from textworld.envs.wrappers import Filter, GenericEnvironment

    remember_translations()

    env: Any = GenericEnvironment(textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"]))
    for wrapper in (AlfredDemangler(shuffle=False), AlfredInfos, Filter):
        env = wrapper(env)
    return env


def kind_of(game: str) -> str:
    name = Path(game).parts[-2]
    return next(kind for prefix, kind in PREFIXES.items() if name.startswith(prefix))


def header(kind: str, goal: str) -> str:
    """The task's header with the examples of the game's kind: ``{example_i}`` = ``react_<kind>_<i>``."""
    examples = json.loads((HERE / SPEC["examples"]).read_text(encoding="utf-8"))
    fields = {"example_" + k.rsplit("_", 1)[1]: v for k, v in examples.items() if k.startswith(f"react_{kind}_")}
    return str(SPEC["header"].format(goal=goal, **fields))


class NotATrainGame(ValueError):
    """A game outside the train split's folder: the grader's games (valid_unseen) are not for training."""


def train_game(game: str) -> str:
    """``game`` if it names a train game (``train/<task>/<trial>``, a path inside ``games/``), else refused."""
    parts = Path(str(game)).parts
    if len(parts) != 3 or parts[0] != "train" or ".." in parts:
        raise NotATrainGame(f"{game!r}: this kit plays the train split's games only (\"train/<task>/<trial>\", "
                            "as in data/train.jsonl); the grader's games are valid_unseen's, not for training")
    return str(game)


def reset(env: Any, game: str) -> tuple[str, str]:
    """(prompt, goal) of a fresh game ``train/<task>/<trial>`` (nothing else: ``train_game``);
    ``env.admissible`` then holds the commands the game accepts."""
    env.load(str(HERE / SPEC["games"] / train_game(game) / "game.tw-pddl"))
    obs, infos = env.reset()
    env.admissible = list(infos["admissible_commands"])
    goal = next((line for line in obs.split("\n") if line.startswith("Your task is to: ")), "")
    return header(kind_of(game), goal) + "\n".join(obs.split("\n\n")[1:]) + "\n>", goal


def next_turn(action: str, observation: str) -> str:
    return f" {action}\n{observation}\n>"


def action_from(completion: str) -> str:
    return completion.strip().split("\n", 1)[0].strip()


def step(env: Any, action: str) -> tuple[str, float, bool, bool, float]:
    """One action: (observation as the grader shows it, reward, won, game over, score 0..1).

    A thought (``think:``) is not sent to the game and is answered ``OK.``; a leading
    ``"You arrive at loc N. "`` is cut (ReAct's ``process_ob``). The step limit is the
    caller's to count (``SPEC["max_steps"]``), as the grader does.
    """
    if SPEC.get("think_prefix") and action.startswith(SPEC["think_prefix"]):
        return "OK.", 0.0, False, False, 0.0
    obs, reward, done, infos = env.step(action)
    env.admissible = list(infos["admissible_commands"])
    if obs.startswith("You arrive at loc "):
        obs = obs[obs.find(". ") + 2:]
    won = bool(infos["won"])
    return obs, float(reward), won, won or bool(done), 1.0 if won else 0.0


def play(generate: Callable[[list[str]], list[str]], games: list[str], pool: int = 16) -> list[dict[str, Any]]:
    """Each game once; all live games step together. Returns one trajectory per game, in order."""
    envs = [make_env() for _ in range(min(pool, len(games)))]
    todo = list(reversed(games))
    done: list[dict[str, Any]] = []

    def start(env: Any) -> dict[str, Any]:
        game = todo.pop()
        return _trajectory(env, game)

    try:
        live = [start(env) for env in envs]
        while live:
            completions = generate([t["prompt"] for t in live])
            following: list[dict[str, Any]] = []
            for t, completion in zip(live, completions, strict=True):
                if _step(t, action_from(completion), completion):
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


def _trajectory(env: Any, game: str) -> dict[str, Any]:
    prompt, goal = reset(env, game)
    return {"env": env, "game": game, "kind": kind_of(game), "goal": goal, "prompt": prompt, "turns": [], "won": False}


def _step(t: dict[str, Any], action: str, completion: str) -> bool:
    """Play one action in trajectory ``t``; True when its game is over."""
    obs, reward, won, over, _score = step(t["env"], action)
    t["turns"].append({"prompt": t["prompt"], "completion": completion, "action": action,
                       "observation": obs, "reward": reward})
    t["prompt"] += next_turn(action, obs)
    t["won"] = won
    return over or len(t["turns"]) >= int(SPEC["max_steps"])


def planner_plan(env: Any) -> list[str]:
    """The PDDL planner's winning commands from the loaded game's start (textworld's walkthrough)."""
    from textworld.envs.pddl import PddlEnv
    from textworld.envs.pddl import logic as pddl_logic

    inner = env
    while not isinstance(inner, PddlEnv):
        inner = inner._wrapped_env
    if inner._game_data.get("walkthrough"):
        return list(inner._game_data["walkthrough"])
    state = pddl_logic.PddlState(inner.downward_lib, inner._game_data["pddl_problem"], inner._logic)
    return list(state.replan(inner._entity_infos))


def expert(games: list[str]) -> list[dict[str, Any]]:
    """The planner's plan of each game, played with the prompt before each action as the grader shows it."""
    env = make_env()
    out = []
    try:
        for game in games:
            t = _trajectory(env, game)
            for action in planner_plan(env):
                if _step(t, action, f" {action}\n"):
                    break
            out.append({k: v for k, v in t.items() if k != "env"})
    finally:
        env.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    ex = sub.add_parser("expert", help="planner trajectories of the train games, in the grader's format")
    ex.add_argument("--out", required=True)
    ex.add_argument("--limit", type=int)
    ex.add_argument("--jobs", type=int, default=1, help="games played at once, one process each")
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
    games = games[: args.limit] if args.limit else games
    if args.jobs > 1:
        from multiprocessing import get_context

        with get_context("spawn").Pool(args.jobs) as workers:
            trajectories = [t for part in workers.imap(expert, [[g] for g in games]) for t in part]
    else:
        trajectories = expert(games)
    with open(args.out, "w", encoding="utf-8") as fh:
        for t in trajectories:
            fh.write(json.dumps(t) + "\n")
    won = sum(t["won"] for t in trajectories)
    print(f"{len(trajectories)} trajectories, {won} won -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
