"""TextWorldExpress text games (twc, cookingworld, coin, ...) as an ``Environment``.

TextWorldExpress (PyPI ``textworld-express``, a Java simulator driven through py4j; needs a
Java runtime) generates games from seeds, offline, with a gold action sequence for each:
the CPU, test and demo Level-3 task. A game id is ``<fold>:<seed>`` with fold ``train``,
``dev`` or ``test``: the fold chooses the objects and recipes, so train games and test games
differ in what they contain, not only in layout.

Facts the adapter relies on (textworld-express 1.1.0): each instance starts its own JVM
(0.3-0.5 s, ~70 MB) and is not thread-safe; ``reset`` returns ``(observation, infos)`` with
``validActions``, ``taskDescription``, ``score`` (0..1) and ``tasksuccess``; ``step`` returns
``(observation, reward, done, infos)``; ``done`` comes one step *after* ``envStepLimit``
moves, so the episode runner, not the simulator, enforces the step limit; ``reset`` given
a game name or parameters reloads the game, so they are set once, at ``load``.
"""

from __future__ import annotations

from typing import Any

from agent2rl_tui.envs.base import EnvError, Outcome, Start

FOLDS = ("train", "dev", "test")


def parse_game(game: str) -> tuple[str, int]:
    """``"test:20003"`` → ``("test", 20003)``; a clear error for anything else."""
    fold, _, seed = game.partition(":")
    if fold not in FOLDS or not seed.lstrip("-").isdigit():
        raise EnvError(f"game {game!r} is not '<fold>:<seed>' with fold one of {', '.join(FOLDS)}")
    return fold, int(seed)


class TextWorldExpress:
    """One simulator (one JVM) playing one ``game_name`` with fixed ``params``."""

    name = "textworld-express"

    def __init__(self, game_name: str, params: str = "", *, step_limit: int = 100) -> None:
        try:
            from textworld_express import TextWorldExpressEnv
        except ImportError as exc:
            raise EnvError("textworld-express is not installed: `pip install textworld-express` "
                           "(it also needs Java 17 on PATH)") from exc
        try:
            self._env: Any = TextWorldExpressEnv(envStepLimit=step_limit + 1)
            self._env.load(game_name, params)
        except ValueError as exc:  # unknown game or parameter: the simulator's own message
            raise EnvError(f"textworld-express {game_name} {params!r}: {exc}") from exc
        except Exception as exc:  # noqa: BLE001 - py4j / JVM start-up failures
            raise EnvError(f"textworld-express could not start (is `java` on PATH?): {exc}") from exc
        self.game_name, self.params = game_name, params

    def reset(self, game: str) -> Start:
        fold, seed = parse_game(game)
        # The game was loaded once in __init__: naming it again here would reload it (~50 ms).
        obs, infos = self._env.reset(seed=seed, gameFold=fold, generateGoldPath=True)
        return Start(observation=obs, goal=infos.get("taskDescription", ""), admissible=sorted(infos["validActions"]),
                     info={"game": game})

    def step(self, action: str) -> Outcome:
        obs, reward, done, infos = self._env.step(action)
        won = bool(infos.get("tasksuccess"))
        return Outcome(observation=obs, reward=float(reward), done=bool(done or won or infos.get("taskfailure")),
                       won=won, score=float(infos.get("score", 0.0)), admissible=sorted(infos["validActions"]))

    def gold_actions(self) -> list[str] | None:
        gold = list(self._env.getGoldActionSequence())
        return None if not gold or gold[0].startswith("ERROR") else gold

    def close(self) -> None:
        shut, self._env.close = self._env.close, lambda: None  # its __del__ would close again, noisily
        try:
            shut()
        except Exception:  # noqa: BLE001 - the JVM is gone already
            pass
