"""ALFWorld's games as task data: which folders are games, their kind and goal, and
``data prepare alfworld --from DIR``, which copies them into the task's data cache.

ALFWorld's games are folders that ``alfworld-download`` (it needs the network, ~2 GB) fills
under ``$ALFWORLD_DATA`` (default ``~/.cache/alfworld``): ``json_2.1.1/<split>/<task>/<trial>/``
with ``game.tw-pddl`` (the TextWorld game: PDDL domain, problem and text grammar) and
``traj_data.json`` (ALFRED's record: ``task_type``, ...). This module needs no ALFWorld
install: it reads and copies files, never downloads.

A game id is the game's folder relative to the prepared games root,
``<split>/<task>/<trial>``. Which folders count as games follows ALFWorld's own loader
(``AlfredTWEnv.collect_game_files``, alfworld 0.4.2): a folder with ``traj_data.json`` whose
path names no ``movable`` or ``Sliced`` task, whose ``task_type`` is one of the six, and whose
``game.tw-pddl`` exists and says ``"solvable": true``. On the full download that leaves the
134 ``valid_unseen`` games of ReAct's and AutoRL-Bench's evaluation.

The cache: ``<cache>/alfworld/{train,eval}.jsonl`` (one ``{"game", "kind", "goal"}`` row per
game), ``source.json`` and ``games/<split>/<task>/<trial>/{game.tw-pddl,traj_data.json}``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

from agent2rl_tui.tasks.registry import Task, TaskError, task_cache, write_jsonl
from agent2rl_tui.util.timeutil import iso, now

GAMES_DIR = "games"
"""The games root inside the task's prepared data folder."""
GAME_FILE = "game.tw-pddl"
COPIED_FILES = (GAME_FILE, "traj_data.json")
SPLITS = {"train": "train", "eval": "valid_unseen"}
"""Our split -> ALFWorld's folder: the agent trains on train, the grader plays valid_unseen
(ALFWorld's ``eval_out_of_distribution``)."""

TASK_TYPES = ("pick_and_place_simple", "look_at_obj_in_light", "pick_clean_then_place_in_recep",
              "pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep", "pick_two_obj_and_place")
PREFIX_KINDS = {
    "pick_and_place": "put",
    "pick_clean_then_place": "clean",
    "pick_heat_then_place": "heat",
    "pick_cool_then_place": "cool",
    "look_at_obj": "examine",
    "pick_two_obj": "puttwo",
}
"""Task-folder prefix -> kind, in the order ReAct matches them; the kind names the few-shot
examples (``react_<kind>_0``/``_1``) and the score's breakdown."""

_GOAL = re.compile(r"Your task is to: [^\"\n]*")

NO_DATA_HELP = (
    "on a machine with network: `pip install alfworld==0.4.2 && alfworld-download` (it fills "
    "$ALFWORLD_DATA, default ~/.cache/alfworld, with json_2.1.1/), copy that folder here if need be, "
    "then `agent2rl-tui data prepare alfworld --from THAT_FOLDER`"
)


def kind_of(game: str) -> str | None:
    """``"valid_unseen/pick_heat_then_place_in_recep-Tomato-None-CounterTop-14/trial_x"`` → ``"heat"``."""
    parts = Path(game).parts
    name = parts[-2] if len(parts) >= 2 else game
    return next((kind for prefix, kind in PREFIX_KINDS.items() if name.startswith(prefix)), None)


def goal_in(text: str) -> str:
    """The ``Your task is to: ...`` line of an observation or a game's grammar ('' if none)."""
    found = _GOAL.search(text)
    return found.group(0).strip() if found else ""


def default_source() -> Path:
    """Where ``alfworld-download`` puts the games: ``$ALFWORLD_DATA``, else ``~/.cache/alfworld``."""
    return Path(os.environ.get("ALFWORLD_DATA") or Path.home() / ".cache" / "alfworld")


def json_root(source: Path) -> Path:
    """The folder holding ALFWorld's split folders: ``source/json_2.1.1`` or ``source`` itself."""
    for candidate in (source / "json_2.1.1", source):
        if any((candidate / split).is_dir() for split in SPLITS.values()):
            return candidate
    raise TaskError(f"no ALFWorld games in {source} (no json_2.1.1/{{train,valid_unseen}}/): {NO_DATA_HELP}")


def playable(folder: Path) -> bool:
    """Whether ALFWorld's own loader would play this game folder (see the module docstring)."""
    if "movable" in str(folder) or "Sliced" in str(folder):
        return False
    try:
        traj = json.loads((folder / "traj_data.json").read_text(encoding="utf-8"))
        game = json.loads((folder / GAME_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return traj.get("task_type") in TASK_TYPES and game.get("solvable") is True


def find_games(split_dir: Path) -> list[Path]:
    """The playable game folders under one split folder, sorted."""
    if not split_dir.is_dir():
        return []
    return sorted(Path(root) for root, _, files in os.walk(split_dir)
                  if "traj_data.json" in files and playable(Path(root)))


def game_row(root: Path, folder: Path) -> dict[str, Any]:
    game = folder.relative_to(root).as_posix()
    grammar = json.loads((folder / GAME_FILE).read_text(encoding="utf-8")).get("grammar", "")
    return {"game": game, "kind": kind_of(game), "goal": goal_in(grammar)}


def copy_games(src_root: Path, games: list[str], dst_root: Path, files: tuple[str, ...] = COPIED_FILES) -> None:
    """Copy the named games' files from one games root to another (read-only there)."""
    for game in games:
        (dst_root / game).mkdir(parents=True, exist_ok=True)
        for name in files:
            src = src_root / game / name
            if src.is_file():
                dst = dst_root / game / name
                shutil.copyfile(src, dst)
                dst.chmod(0o444)


def _digest(rows: list[dict[str, Any]]) -> str:
    h = hashlib.sha256()
    for row in rows:
        h.update(json.dumps(row, sort_keys=True).encode())
    return h.hexdigest()[:16]


def prepare_games(task: Task, source: Path | None = None) -> dict[str, Any]:
    """Copy the train and valid_unseen games from ``source`` into the task's cache; list them."""
    source = source or default_source()
    if not source.is_dir():
        raise TaskError(f"{source}: no such folder; {NO_DATA_HELP}")
    root = json_root(source)
    found = {split: find_games(root / folder) for split, folder in SPLITS.items()}
    for split, folder in SPLITS.items():
        if not found[split]:
            raise TaskError(f"no playable ALFWorld games in {root / folder}: {NO_DATA_HELP}")
    rows = {split: [game_row(root, f) for f in folders] for split, folders in found.items()}

    out = task_cache(task)
    out.mkdir(parents=True, exist_ok=True)
    fresh = out / (GAMES_DIR + ".new")
    shutil.rmtree(fresh, ignore_errors=True)
    for split_rows in rows.values():
        copy_games(root, [r["game"] for r in split_rows], fresh)
    shutil.rmtree(out / GAMES_DIR, ignore_errors=True)
    fresh.rename(out / GAMES_DIR)
    write_jsonl(out / "train.jsonl", rows["train"])
    write_jsonl(out / "eval.jsonl", rows["eval"])
    meta = {"task": task.name, "source": str(root.resolve()), "prepared_at": iso(now()),
            "train": len(rows["train"]), "eval": len(rows["eval"]),
            "train_sha": _digest(rows["train"]), "eval_sha": _digest(rows["eval"])}
    (out / "source.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")
    return meta
