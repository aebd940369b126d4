#!/usr/bin/env python3
"""Play this task's train games through the run's train-environment service (copied into the workspace).

A program for the agent, standard library only. The games live outside this workspace (a web
store, a search engine and its key): ``$TRAIN_ENV_URL`` plays them as the grader plays its own,
the same prompt turn by turn, the same action rule and step limit, the train split only. Use it
to evaluate a model locally and to collect trajectories for training:

    python data/play.py games                       # the train games
    python data/play.py show GAME                   # one game's first prompt

A step whose answer carries ``follow_up`` (a decoding: ``max_new_tokens``, ``stop``,
``temperature``) is not over: its ``prompt`` asks the model again within the same step, as the
grader does under that prompt profile (DeepSearchQA's ``reference``: a step without an action
is made to answer), and the next completion should be decoded so.

Or import it (``sys.path.insert(0, "data")``; ``import play``) and call
``play.play(generate, games)`` with ``generate(prompts: list[str]) -> list[str]``: every live
game's next completion comes from one call, as in the grader. Each turn is returned with the
prompt the model saw and its completion, so ``prompt -> completion`` is a training pair and the
episode's ``reward`` scores it. For a loop of your own: ``make_env``, ``reset``, ``step``
(``env.prompt`` is then the next prompt) and ``close``. A searching task's ``reset`` takes the
reward to use: ``exact`` (default) or ``f1`` against the gold answer, or ``judge`` (the run's
judge; its calls are counted and capped). Calls past the service's limits (environments at
once, searches a minute, judge calls) answer an HTTP error that says what to do.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SPEC_FILE = HERE / "env.json"
SPEC: dict[str, Any] = json.loads(SPEC_FILE.read_text(encoding="utf-8")) if SPEC_FILE.exists() else {}


class ServiceError(RuntimeError):
    """An answer of the service other than 2xx: ``status``, ``code`` and what to do (``str``)."""

    def __init__(self, status: int, code: str, detail: str) -> None:
        super().__init__(f"{status} {code}: {detail}")
        self.status, self.code = status, code


def call(method: str, path: str, body: dict[str, Any] | None = None, *, retries: int = 3) -> dict[str, Any]:
    """One call to the service; a refused search (429, a minute's budget) waits and tries again."""
    url = os.environ.get("TRAIN_ENV_URL")
    if not url:
        raise ServiceError(0, "no_service", "TRAIN_ENV_URL is not set: this runs in a run's workspace only")
    data = json.dumps(body).encode() if body is not None else None
    for attempt in range(retries + 1):
        request = urllib.request.Request(url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"} if data else {})
        try:
            with urllib.request.urlopen(request, timeout=600) as resp:
                answer: dict[str, Any] = json.loads(resp.read())
                return answer
        except urllib.error.HTTPError as exc:
            answer = json.loads(exc.read() or b"{}")
            if exc.code == 429 and answer.get("error") == "search_rate_limited" and attempt < retries:
                time.sleep(20)
                continue
            raise ServiceError(exc.code, answer.get("error", "?"), answer.get("detail", "")) from None
    raise AssertionError("unreachable")


class Env:
    """One of the service's environments: the game it plays and the prompt the model sees next."""

    def __init__(self) -> None:
        self.id = call("POST", "/envs")["env_id"]
        self.prompt = ""
        self.done = True
        self.last: dict[str, Any] = {}

    def close(self) -> None:
        try:
            call("DELETE", f"/envs/{self.id}")
        except ServiceError:
            pass


def make_env() -> Env:
    return Env()


def train_games() -> list[str]:
    return list(call("GET", "/games")["games"])


def reset(env: Env, game: str, reward: str | None = None) -> tuple[str, str]:
    """(prompt, goal) of a fresh train game; ``reward``: a searching task's reward mode."""
    answer = call("POST", f"/envs/{env.id}/reset", {"game": game, **({"reward": reward} if reward else {})})
    env.prompt, env.done, env.last = answer["prompt"], False, answer
    return answer["prompt"], answer["goal"]


def step(env: Env, completion: str, *, action: bool = False) -> tuple[str, float, bool, bool, float]:
    """Play the model's completion (the grader's rule reads the action from it; ``action=True``:
    the text is the action itself): (observation, reward, won, over, score); ``env.prompt`` is
    then the next prompt (the whole transcript, once the game is over)."""
    answer = call("POST", f"/envs/{env.id}/step", {"action" if action else "completion": completion})
    env.prompt, env.done, env.last = answer["prompt"], bool(answer["done"]), answer
    return answer["observation"], float(answer["reward"]), bool(answer["won"]), env.done, float(answer["score"])


def cut(completion: str, stops: list[str]) -> str:
    """The completion up to its first stop string (as the grader's engine stops)."""
    ends = [completion.find(s) for s in stops if s and s in completion]
    return completion[:min(ends)] if ends else completion


def play(generate: Callable[[list[str]], list[str]], games: list[str], pool: int = 16,
         reward: str | None = None) -> list[dict[str, Any]]:
    """Each game once; all live games step together. One trajectory per game, in order."""
    envs = [make_env() for _ in range(min(pool, len(games)))]
    todo = list(reversed(games))
    done: list[dict[str, Any]] = []

    def start(env: Env) -> dict[str, Any]:
        game = todo.pop()
        prompt, goal = reset(env, game, reward)
        return {"env": env, "game": game, "goal": goal, "prompt": prompt, "turns": [], "won": False, "reward": 0.0}

    try:
        live = [start(env) for env in envs]
        while live:
            completions = generate([t["env"].prompt for t in live])
            following = []
            for t, completion in zip(live, completions, strict=True):
                prompt = t["env"].prompt
                asked = t["env"].last.get("follow_up")
                if asked:  # the grader decodes this request otherwise: at least its stop strings hold
                    completion = cut(completion, asked.get("stop") or [])
                observation, r, won, over, score = step(t["env"], completion)
                t["turns"].append({"prompt": prompt, "completion": completion, "action": t["env"].last["action"],
                                   "observation": observation, "reward": r,
                                   **({"follow_up": True} if t["env"].last.get("follow_up") else {})})
                t["won"], t["reward"] = won, score
                if over:
                    t["prompt"] = t["env"].prompt
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("games", help="the train games")
    sh = sub.add_parser("show", help="the first prompt of a game")
    sh.add_argument("game")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "games":
            print("\n".join(train_games()))
            return 0
        env = make_env()
        try:
            print(reset(env, args.game)[0])
        finally:
            env.close()
    except ServiceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
