"""TextWorldExpress text games (twc, cookingworld, coin, ...) as an ``Environment``.

TextWorldExpress (PyPI ``textworld-express``, a Java simulator driven through py4j; needs a
Java runtime) generates games from seeds, offline, with a gold action sequence for each:
the CPU, test and demo Level-3 task. A game id is ``<fold>:<seed>`` with fold ``train``,
``dev`` or ``test``: the fold chooses the objects and recipes, so train games and test games
differ in what they contain, not only in layout.

Facts the adapter relies on (textworld-express 1.1.0): each ``TextWorldExpressEnv`` starts
its own JVM (0.3-0.9 s, ~70 MB) and is not thread-safe, but one JVM holds any number of
independent games (a ``PythonInterface`` each), so simulators of one pool share a JVM;
``reset`` returns ``(observation, infos)`` with ``validActions``, ``taskDescription``,
``score`` (0..1) and ``tasksuccess``; ``step`` returns
``(observation, reward, done, infos)``; ``done`` comes one step *after* ``envStepLimit``
moves, so the episode runner, not the simulator, enforces the step limit; ``reset`` given
a game name or parameters reloads the game, so they are set once, at ``load``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from agent2rl_tui.envs.base import EnvError, Environment, Outcome, Start
from agent2rl_tui.envs.spec import EnvSpec, register
from agent2rl_tui.util.numbers import ascii_int

FOLDS = ("train", "dev", "test")


@dataclass(frozen=True, kw_only=True)
class TextWorldExpressSpec(EnvSpec):
    """``[env]`` of kind ``textworld-express``: the game and its parameters, over the common keys."""

    kind: ClassVar[str] = "textworld-express"
    game: str = field(metadata={"help": 'the TextWorldExpress game, e.g. "twc"'})
    """The TextWorldExpress game (``twc``, ``coin``, ...)."""
    params: str = ""
    """The game's parameters as the simulator takes them (``numLocations=1,includeDoors=0``)."""


def parse_game(game: str) -> tuple[str, int]:
    """``"test:20003"`` → ``("test", 20003)``; a clear error for anything else."""
    fold, _, seed = game.partition(":")
    number = ascii_int(seed, signed=True)
    if fold not in FOLDS or number is None:
        raise EnvError(f"game {game!r} is not '<fold>:<seed>' with fold one of {', '.join(FOLDS)}")
    return fold, number


class TextWorldExpress:
    """One simulator playing one ``game_name`` with fixed ``params``.

    ``share_jvm_with`` puts this simulator in another one's JVM instead of starting a JVM
    of its own (0.3-0.9 s each and ~70 MB): a JVM holds any number of independent games
    (each its own ``PythonInterface``), so a pool of 64 costs one JVM start, not 64. The
    JVM shuts down when the last simulator in it is closed.
    """

    name = "textworld-express"

    def __init__(self, game_name: str, params: str = "", *, step_limit: int = 100,
                 share_jvm_with: TextWorldExpress | None = None) -> None:
        try:
            from textworld_express import TextWorldExpressEnv
        except ImportError as exc:
            raise EnvError("textworld-express is not installed: `pip install textworld-express` "
                           "(it also needs Java 17 on PATH)") from exc
        self._jvm: _JVM
        try:
            if share_jvm_with is None or not share_jvm_with.jvm_up:
                self._env: Any = TextWorldExpressEnv(envStepLimit=step_limit + 1)
                self._jvm = _JVM(self._env)
            else:
                self._jvm = share_jvm_with._jvm
                self._env = self._jvm.new_simulator(step_limit + 1)
            self._jvm.users += 1
            self._env.load(game_name, params)
        except ValueError as exc:  # unknown game or parameter: the simulator's own message
            self.close()
            raise EnvError(f"textworld-express {game_name} {params!r}: {exc}") from exc
        except Exception as exc:  # noqa: BLE001 - py4j / JVM start-up failures
            raise EnvError(f"textworld-express could not start (is `java` on PATH?): {exc}") from exc
        self.game_name, self.params = game_name, params
        self._closed = False

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

    @property
    def jvm_up(self) -> bool:
        """Whether this simulator's JVM still runs (another simulator may join it)."""
        return hasattr(self, "_jvm") and not self._jvm.down

    def close(self) -> None:
        if getattr(self, "_closed", False) or not hasattr(self, "_jvm"):
            return
        self._closed = True
        self._jvm.users -= 1
        if self._jvm.users <= 0:
            self._jvm.shut_down()


class _JVM:
    """A TextWorldExpress JVM (its py4j gateway) and how many simulators use it."""

    def __init__(self, first: Any) -> None:
        self.first = first
        self.users = 0
        self.down = False
        self._shut = first.close
        first.close = lambda: None  # the library's __del__ would shut the JVM down under the others

    def new_simulator(self, step_limit: int) -> Any:
        """Another ``TextWorldExpressEnv`` on this JVM: the same object with its own game."""
        env = copy.copy(self.first)
        env.server = self.first._gateway.jvm.textworldexpress.runtime.PythonInterface()
        env.envStepLimit = step_limit
        env.lastStepScore = 0
        env.runHistory = []
        env.clearRunHistory()
        return env

    def shut_down(self) -> None:
        if self.down:
            return
        self.down = True
        try:
            self._shut()
        except Exception:  # noqa: BLE001 - the JVM is gone already
            pass


def maker(spec: TextWorldExpressSpec) -> Callable[[], Environment]:
    """Simulators of the spec's game, every one of this maker's in one JVM while it runs."""
    pool: list[TextWorldExpress] = []

    def make() -> Environment:
        host = next((env for env in pool if env.jvm_up), None)
        pool.append(TextWorldExpress(spec.game, spec.params, step_limit=spec.max_steps, share_jvm_with=host))
        return pool[-1]

    return make


KIND = register(TextWorldExpressSpec, maker)
