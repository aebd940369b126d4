"""Training curves from the files the agent's trainers leave in the workspace.

Besides the log dicts in its output (review/curves.py), a trainer writes its logs to files:
transformers' ``Trainer`` keeps ``trainer_state.json`` in every checkpoint (``log_history``: one
dict a logging step, by step, with no clock), and with ``report_to="tensorboard"`` TensorBoard
event files (each scalar with its wall time). Both are read here into points on the run's clock.

- Event files are read with the tensorboard package's own reader (``EventAccumulator``), on a
  private copy taken through ``open_regular`` (never a link, never a FIFO, at most
  ``MAX_EVENTS_BYTES``): the agent cannot swap the file for something else between the listing
  and the read. Without the tensorboard package (a plain install) the files are counted, not read.
- ``trainer_state.json`` has steps, not times. The files of one output folder (its
  ``checkpoint-N`` folders and the folder itself) give anchors: the step each file was saved at
  and its modification time. The start of training is a further anchor, from the final entry's
  ``train_runtime`` or else from the training process the supervisor saw running then. Steps
  between anchors are placed by straight lines; a folder with one anchor and no start is not
  placed and is counted.
- The walk is bounded: no link followed, the base model and the data not entered, at most
  ``MAX_FILES`` of each kind, ``MAX_ENTRIES`` entries seen. A file that does not parse is skipped
  and counted.
"""

from __future__ import annotations

import json
import os
import re
import stat
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent2rl_tui.record.capture import open_regular, read_capped
from agent2rl_tui.review.trainer_metrics import logged_number, metric_of

MAX_STATE_BYTES = 8 * 1024 * 1024
MAX_EVENTS_BYTES = 64 * 1024 * 1024
MAX_FILES = 64
MAX_ENTRIES = 50_000
MAX_DEPTH = 8
TOP_SKIPPED = frozenset({"models", "data"})
"""The workspace's folders not entered: the base model and the train split are ours."""
SKIPPED = frozenset({".git", "__pycache__", "node_modules", ".venv", "venv", "site-packages"})
"""Folders not entered anywhere: never a trainer's logs, often many files."""
EVENTS_NAME = re.compile(r"^events\.out\.tfevents\.")
CHECKPOINT = re.compile(r"^checkpoint-\d+$")


@dataclass
class FileCurves:
    """What the workspace's log files hold: points per metric (minutes since the budget's start)."""

    series: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    origin: dict[str, str] = field(default_factory=dict)
    """Per metric: where its points came from ("TensorBoard events" or "trainer_state.json")."""
    skipped: int = 0
    """Files that could not be read (malformed, too large, not a regular file)."""
    unplaced: int = 0
    """trainer_state.json folders with no clock to place their steps on."""
    unread_events: int = 0
    """Event files not read because the tensorboard package is not installed."""


@dataclass
class _Found:
    states: list[Path] = field(default_factory=list)
    events: list[Path] = field(default_factory=list)


def _walk(workspace: Path) -> _Found:
    found, seen = _Found(), 0
    stack: list[tuple[Path, int]] = [(workspace, 0)]
    while stack and seen < MAX_ENTRIES:
        folder, depth = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in sorted(entries, key=lambda e: e.name):
            seen += 1
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError:
                continue
            if stat.S_ISDIR(mode):
                if depth < MAX_DEPTH and entry.name not in SKIPPED and not (depth == 0 and entry.name in TOP_SKIPPED):
                    stack.append((Path(entry.path), depth + 1))
            elif stat.S_ISREG(mode):
                if entry.name == "trainer_state.json" and len(found.states) < MAX_FILES:
                    found.states.append(Path(entry.path))
                elif EVENTS_NAME.match(entry.name) and len(found.events) < MAX_FILES:
                    found.events.append(Path(entry.path))
    return found


def _read(path: Path, cap: int) -> tuple[bytes, float]:
    """The file's bytes (at most ``cap``) and its modification time; ValueError when it is over the cap."""
    with open_regular(path) as (fh, st):
        data = read_capped(fh, cap)
    if len(data) > cap:
        raise ValueError(f"over {cap} bytes")
    return data, st.st_mtime


# ---- TensorBoard ----------------------------------------------------------------------------------

def _events(paths: list[Path], start: float, out: FileCurves) -> dict[str, list[tuple[float, float]]]:
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ImportError:
        out.unread_events += len(paths)
        return {}
    series: dict[str, list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="agent2rl-tb-") as tmp:
        for n, path in enumerate(paths):
            try:
                data, _ = _read(path, MAX_EVENTS_BYTES)
                copy = Path(tmp) / f"{n}" / path.name
                copy.parent.mkdir()
                copy.write_bytes(data)
                acc = EventAccumulator(str(copy), size_guidance={"scalars": 0})
                acc.Reload()
                for tag in acc.Tags().get("scalars", []):
                    name = metric_of(tag)
                    if name is None:
                        continue
                    for event in acc.Scalars(tag):
                        value = logged_number(float(event.value))
                        if value is not None:
                            series.setdefault(name, []).append(((float(event.wall_time) - start) / 60, value))
            except Exception:  # the agent's bytes: any failure of the reader is a file skipped
                out.skipped += 1
    return {name: sorted(points) for name, points in series.items()}


# ---- trainer_state.json ---------------------------------------------------------------------------

@dataclass
class _State:
    step: int
    mtime: float
    history: list[dict[str, Any]]


def _state(path: Path) -> _State:
    data, mtime = _read(path, MAX_STATE_BYTES)
    state = json.loads(data)
    if not isinstance(state, dict) or not isinstance(state.get("log_history"), list):
        raise ValueError("no log_history")
    history = [h for h in state["log_history"] if isinstance(h, dict) and isinstance(h.get("step"), int)]
    step = state.get("global_step")
    if not isinstance(step, int) or isinstance(step, bool):
        step = max((h["step"] for h in history), default=0)
    return _State(step, mtime, history)


def _output_folder(path: Path) -> Path:
    folder = path.parent
    return folder.parent if CHECKPOINT.match(folder.name) else folder


def _place(anchors: list[tuple[float, float]], step: float) -> float:
    """The time of ``step`` on the straight lines between anchors (step, time), extended at both ends."""
    if len(anchors) == 1:
        return anchors[0][1]
    for (s0, t0), (s1, t1) in zip(anchors, anchors[1:], strict=False):
        if step <= s1 or (s1, t1) == anchors[-1]:
            return t0 + (t1 - t0) * (step - s0) / (s1 - s0) if s1 != s0 else t1
    return anchors[-1][1]


def _states(paths: list[Path], start: float, began_before: Callable[[float], float | None],
            out: FileCurves) -> dict[str, list[tuple[float, float]]]:
    folders: dict[Path, list[_State]] = {}
    for path in paths:
        try:
            state = _state(path)
        except (OSError, ValueError, RecursionError):  # RecursionError: JSON nested deeper than the parser goes
            out.skipped += 1
            continue
        folders.setdefault(_output_folder(path), []).append(state)
    series: dict[str, list[tuple[float, float]]] = {}
    for states in folders.values():
        states.sort(key=lambda s: (s.step, s.mtime))
        by_step: dict[int, dict[str, Any]] = {}
        for s in states:
            for entry in s.history:
                by_step.setdefault(entry["step"], {}).update(entry)
        anchors = sorted({(float(s.step), s.mtime) for s in states})
        last = states[-1]
        runtime = next((logged_number(h.get("train_runtime")) for h in reversed(last.history) if "train_runtime" in h), None)
        began = last.mtime - runtime if runtime is not None else began_before(anchors[0][1])
        if began is not None and anchors[0][0] > 0 and began < anchors[0][1]:
            anchors.insert(0, (0.0, began))
        if len(anchors) < 2:
            out.unplaced += 1
            continue
        for step, entry in sorted(by_step.items()):
            at = (_place(anchors, float(step)) - start) / 60
            for key, value in entry.items():
                name, number = metric_of(str(key)), logged_number(value)
                if name is not None and number is not None:
                    series.setdefault(name, []).append((at, number))
    return {name: sorted(points) for name, points in series.items()}


def read_file_curves(workspace: Path, start: float,
                     began_before: Callable[[float], float | None] = lambda at: None) -> FileCurves:
    """The curves in ``workspace``'s trainer log files, times in minutes since ``start``.

    ``began_before(t)``: when the training process running at ``t`` started (None: not known)."""
    out = FileCurves()
    if not workspace.is_dir() or workspace.is_symlink():
        return out
    found = _walk(workspace)
    for origin, series in (("TensorBoard events", _events(found.events, start, out)),
                           ("trainer_state.json", _states(found.states, start, began_before, out))):
        for name, points in series.items():
            if name not in out.series:
                out.series[name], out.origin[name] = points, origin
    return out

