"""ALFWorld household games (put, clean, heat, cool, examine, put two) as an ``Environment``.

ALFWorld (PyPI ``alfworld``, the optional extra ``.[alfworld]``) plays ALFRED's household
tasks as TextWorld games: each game is a folder with a ``game.tw-pddl`` file (its PDDL domain,
problem and text grammar), prepared by ``agent2rl-tui data prepare alfworld``. A game id is
the folder relative to the games root, ``<split>/<task>/<trial>``; its kind comes from the
task folder's name (``tasks.alfworld.kind_of``).

The adapter builds the environment as ``AlfredTWEnv.init_env`` does for evaluation
(alfworld 0.4.2, textworld 1.7.0): ``GenericEnvironment(EnvInfos(won, admissible_commands,
extras=["gamefile"]))`` wrapped by ``AlfredDemangler(shuffle=False)``, ``AlfredInfos`` and
``Filter``, so observations are character for character what ALFWorld's own gym env gives
(``textworld.gym``'s step limit wrapper is left out: the episode runner counts steps). Facts
it relies on: ``load(path)`` switches game in place (the PDDL backend, fast-downward, is
loaded once per instance), then ``reset()`` → ``(observation, infos)`` and ``step(command)``
→ ``(observation, score, done, infos)`` with ``infos["won"]``; a command the game does not
know answers ``"Nothing happens."``; ``done`` is only ever a win (the PDDL env never says
lost). The first observation is ``-= Welcome to TextWorld, ALFRED! =-``, the room, and the
``Your task is to: ...`` line, as three paragraphs. Since 0.4.0 the command that places an
object is ``move X to Y`` (before: ``put X in/on Y``).

Costs measured on two busy cores: ``load`` + ``reset`` 3-5 s (the PDDL problem is
translated twice), a step 0.2-0.3 s (every step re-derives the admissible commands).

``gold_actions`` is the PDDL planner's plan from the game's start (what textworld reports as
the ``walkthrough`` extra), computed on first request (1-3 s), not at every reset.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

from agent2rl_tui.envs.base import EnvError, Environment, Outcome, Start
from agent2rl_tui.envs.spec import EnvSpec, register
from agent2rl_tui.tasks.alfworld import GAME_FILE, goal_in, kind_of

PREPARE_HINT = "run `agent2rl-tui data prepare alfworld --from DIR` (DIR: where alfworld-download put json_2.1.1/)"


@dataclass(frozen=True, kw_only=True)
class ALFWorldSpec(EnvSpec):
    """``[env]`` of kind ``alfworld``: the common keys only; the games are the task's prepared data."""

    kind: ClassVar[str] = "alfworld"


def game_path(root: Path, game: str) -> Path:
    """The game file of ``game`` under ``root``, with a clear error for a bad or missing id."""
    rel = Path(game)
    if not game or rel.is_absolute() or ".." in rel.parts:
        raise EnvError(f"ALFWorld game {game!r} is not '<split>/<task>/<trial>' under the games folder")
    path = root / rel / GAME_FILE
    if not path.is_file():
        raise EnvError(f"ALFWorld game {game!r} is not in {root}: {PREPARE_HINT}")
    return path


TRANSLATIONS_KEPT = 32
"""Games whose PDDL->SAS translations one process keeps (``remember_translations``)."""


def remember_translations(kept: int = TRANSLATIONS_KEPT) -> None:
    """Memoize fast-downward's PDDL->SAS translation in this process, by (domain, problem, optimize).

    TextWorld's PDDL environment translates a game four times for one ``load`` then ``reset``
    (a ``PddlState`` in each, each translating twice): about 1.5 s of CPU thrown away per game,
    and a game played again (a GRPO group's episodes, a rerun) pays it all again. The translation
    is a pure function of the texts; a kept task is handed out as a deep copy, so no state shares
    it. Observations, admissible commands and plans are the same with it (tests/integration/
    test_alfworld.py plays the games both ways). Idempotent."""
    import copy
    from collections import OrderedDict

    import fast_downward

    if getattr(fast_downward.pddl2sas, "remembers", False):
        return
    translate = fast_downward.pddl2sas
    kept_tasks: OrderedDict[tuple[str, str, bool], tuple[Any, str]] = OrderedDict()

    def pddl2sas(domain: str, problem: str, verbose: bool = False, optimize: bool = False) -> tuple[Any, str]:
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


class ALFWorld:
    """One TextWorld PDDL environment playing ALFWorld games from one games root."""

    name = "alfworld"

    def __init__(self, root: Path) -> None:
        try:
            import textworld
            from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
            from textworld.envs.pddl import PddlEnv
            from textworld.envs.wrappers import Filter
        except ImportError as exc:
            raise EnvError(f"ALFWorld is not installed ({exc}): `pip install -e '.[alfworld]'` "
                           "(alfworld==0.4.2; it builds fast-downward and jericho, a few minutes)") from exc
        if not root.is_dir():
            raise EnvError(f"the ALFWorld games folder {root} does not exist: {PREPARE_HINT}")
        self.root = root
        remember_translations()
        # PddlEnv itself, not textworld's GenericEnvironment: that one picks a backend by searching the
        # whole path for ".z[1-8]", so a games folder under e.g. /tmp/x.z4ab/ was played as a Z-machine
        # file and every game failed ("Only .z[1-8] files are supported!").
        env: Any = PddlEnv(textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"]))
        for wrapper in (AlfredDemangler(shuffle=False), AlfredInfos, Filter):
            env = wrapper(env)
        self._env = env
        self._plan: list[str] | None = None
        self._planned = False

    def reset(self, game: str) -> Start:
        path = game_path(self.root, game)
        try:
            self._env.load(str(path))
            obs, infos = self._env.reset()
        except Exception as exc:  # noqa: BLE001 - a broken game file: say which
            raise EnvError(f"ALFWorld could not load {path}: {type(exc).__name__}: {exc}") from exc
        self._plan, self._planned = None, False
        return Start(observation=obs, goal=goal_in(obs), admissible=list(infos["admissible_commands"]),
                     info={"game": game, "kind": kind_of(game)})

    def step(self, action: str) -> Outcome:
        obs, score, done, infos = self._env.step(action)
        won = bool(infos["won"])
        return Outcome(observation=obs, reward=float(score), done=bool(done or won), won=won,
                       score=1.0 if won else 0.0, admissible=list(infos["admissible_commands"]))

    def gold_actions(self) -> list[str] | None:
        if not self._planned:
            self._plan, self._planned = plan_from_start(self._env), True
        return list(self._plan) if self._plan else None

    def close(self) -> None:
        try:
            self._env.close()
        except Exception:  # noqa: BLE001 - nothing left to release
            pass


def plan_from_start(env: Any) -> list[str] | None:
    """The planner's winning commands from the loaded game's initial state, or None.

    What textworld's PDDL env returns as ``extra.walkthrough`` at reset (the game file's own
    walkthrough, else fast-downward's plan), computed here on a fresh copy of the initial
    state so that asking costs nothing unless asked. Reaches into textworld 1.7.0's
    ``PddlEnv`` (``_game_data``, ``_logic``, ``downward_lib``, ``_entity_infos``, whose names
    the demangler has already set); any other shape gives None rather than an error.
    """
    try:
        from textworld.envs.pddl import PddlEnv
        from textworld.envs.pddl import logic as pddl_logic

        inner = env
        while not isinstance(inner, PddlEnv):
            inner = inner._wrapped_env
        stored = inner._game_data.get("walkthrough")
        if stored:
            return list(stored)
        state = pddl_logic.PddlState(inner.downward_lib, inner._game_data["pddl_problem"], inner._logic)
        return list(state.replan(inner._entity_infos)) or None
    except Exception:  # noqa: BLE001 - no plan is an answer gold_actions may give
        return None


def maker(spec: ALFWorldSpec) -> Callable[[], Environment]:
    """Players of the task's prepared game folders."""
    from agent2rl_tui.tasks.alfworld import GAMES_DIR

    if spec.data_dir is None:
        raise EnvError(f"ALFWorld plays the task's prepared games, and none were given: {PREPARE_HINT}")
    return partial(ALFWorld, spec.data_dir / GAMES_DIR)


KIND = register(ALFWorldSpec, maker)
