"""The test-fold games a TextWorldExpress task grades on, listed in a file of the task's folder.

Some TextWorldExpress games ignore the fold in part. The coin collector in a three-room house
has 24 different games in the train fold's 1,000 seeds, and 520 of the test fold's 1,000 games
are one of them: a run graded on those is graded on games its agent can train on. So a
TextWorldExpress task grades only on test-fold games whose content (the goal and the first
observation: what the model is shown before its first action) no train-fold game has.
``eval_space.json`` in the task's folder lists them. ``agent2rl-tui data eval-space TASK``
writes it (``envs.held_out`` plays the simulator: every seed of both folds, a few seconds);
the suite checks each task's file against the installed simulator. The file names the game and
the parameters it was made for: a task whose ``[env]`` changed since is refused until the
file is written again.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from agent2rl_tui.tasks.errors import TaskError

FILE = "eval_space.json"
FINGERPRINT = "sha256 of the goal, a newline and the first observation"
FORMAT = 1


@dataclass(frozen=True)
class HeldOutGames:
    """``eval_space.json``: what it was made for, what was found, and the games a run may be graded on."""

    game: str  # the TextWorldExpress game (``coin``)
    params: str  # its parameters, as ``[env] params`` gives them
    simulator: str  # the textworld-express version that played them
    train_fold: tuple[int, int]  # the seeds compared against (first, last)
    test_fold: tuple[int, int]
    train_contents: int  # distinct contents in the train fold
    test_contents: int  # distinct contents in the test fold
    shared_games: int  # test-fold games whose content a train-fold game has (left out)
    games: tuple[str, ...]  # ``test:<seed>`` of the others, in seed order
    fingerprint: str = FINGERPRINT
    format: int = FORMAT

    def to_json(self) -> str:
        data = asdict(self)
        games = data.pop("games")  # one key, then one game id, a line: diffs stay readable
        head = [f" {json.dumps(k)}: {json.dumps(v)}," for k, v in data.items()]
        return "{\n" + "\n".join(head) + '\n "games": [\n' + ",\n".join(f"  {json.dumps(g)}" for g in games) + "\n ]\n}\n"

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> HeldOutGames:
        try:
            return cls(game=str(data["game"]), params=str(data["params"]), simulator=str(data["simulator"]),
                       train_fold=(int(data["train_fold"][0]), int(data["train_fold"][1])),
                       test_fold=(int(data["test_fold"][0]), int(data["test_fold"][1])),
                       train_contents=int(data["train_contents"]), test_contents=int(data["test_contents"]),
                       shared_games=int(data["shared_games"]), games=tuple(str(g) for g in data["games"]),
                       fingerprint=str(data["fingerprint"]), format=int(data["format"]))
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise TaskError(f"{FILE} is not an eval-space file ({type(exc).__name__}: {exc})") from None


def read_held_out(folder: Path, game: str, params: str, task: str) -> HeldOutGames:
    """The task folder's ``eval_space.json``, checked against the task's ``[env]`` game and params."""
    path = folder / FILE
    again = f"write it with `agent2rl-tui data eval-space {task}`"
    try:
        held = HeldOutGames.from_json(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        raise TaskError(f"task {task}: {path} is missing: the games a run may be graded on (the test fold's "
                        f"games no train-fold game matches) are listed there; {again}") from None
    except (OSError, ValueError) as exc:
        raise TaskError(f"task {task}: {path} cannot be read ({exc}); {again}") from None
    if held.format != FORMAT or (held.game, held.params) != (game, params):
        raise TaskError(f"task {task}: {path} was made for {held.game} {held.params!r}, and the task plays "
                        f"{game} {params!r}; {again}")
    if not held.games:
        raise TaskError(f"task {task}: every test-fold game of {game} {params!r} is a train-fold game too "
                        f"({path}): change the game's parameters so that the folds differ")
    return held
