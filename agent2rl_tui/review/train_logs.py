"""Training curves from the files the agent's trainers leave in the workspace.

Besides the log dicts in its output (review/curves.py), a trainer writes its logs to files:
transformers' ``Trainer`` keeps ``trainer_state.json`` in every checkpoint (``log_history``: one
dict a logging step, by step, with no clock), and with ``report_to="tensorboard"`` TensorBoard
event files (each scalar with its wall time). Both are read here into points on the run's clock.

- The workspace is the agent's. The walk opens each folder by a descriptor, relative to its
  parent's, with ``O_NOFOLLOW``: no link is followed at any depth, even one swapped in after the
  listing. It enters neither the base model nor the data, looks at most at ``MAX_ENTRIES``
  entries and ``MAX_DEPTH`` folders down, and keeps the newest ``MAX_FILES`` files of each kind
  within ``MAX_TOTAL_BYTES``. A file is opened by ``open_regular`` (never a FIFO or a device).
- Event files are read with the tensorboard package's own reader (``EventAccumulator``, at most
  ``MAX_SCALARS`` points a tag), on a private copy (at most ``MAX_EVENTS_BYTES``) removed once
  read. Without the tensorboard package (a plain install) the files are counted, not read.
- ``trainer_state.json`` has steps, not times. The files of one output folder (its
  ``checkpoint-N`` folders and the folder itself) give anchors: the step each was saved at and
  the earliest modification time of a file at that step. The start of training is a further
  anchor, from the final entry's ``train_runtime`` or else from the training process the
  supervisor saw running then. Steps are placed on straight lines between anchors (never past
  the last one); a folder without two anchors at different steps is counted, not placed. A
  folder whose history is another's (a copy: ``cp -r out final``) is read once, the earliest.
- A file that does not parse is skipped and counted; a step must be a whole number from 0 to
  ``MAX_STEP``; a point whose time is not finite is dropped.
- What a file held is kept by its size and modification time (``_PARSED``): a live run's Training
  pane reads again on each change of the record, and parses only the files that changed.
"""

from __future__ import annotations

import errno
import hashlib
import itertools
import json
import math
import os
import re
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent2rl_tui.record.capture import open_regular, read_capped
from agent2rl_tui.review.trainer_metrics import logged_number, metric_of

MAX_STATE_BYTES = 8 * 1024 * 1024
MAX_EVENTS_BYTES = 64 * 1024 * 1024
MAX_TOTAL_BYTES = 96 * 1024 * 1024
"""All the files read together (the newest first): 64 event files of 64 MB would be minutes of parsing."""
MAX_FILES = 64
MAX_ENTRIES = 50_000
MAX_DEPTH = 8
MAX_SCALARS = 10_000
"""Points kept a TensorBoard tag (the reader's reservoir sampling keeps the last); curves show 2,000."""
MAX_STEP = 10**12
TOP_SKIPPED = frozenset({"models", "data"})
"""The workspace's folders not entered: the base model and the train split are ours."""
SKIPPED = frozenset({".git", "__pycache__", "node_modules", ".venv", "venv", "site-packages"})
"""Folders not entered anywhere: never a trainer's logs, often many files."""
EVENTS_NAME = re.compile(r"^events\.out\.tfevents\.")
CHECKPOINT = re.compile(r"^checkpoint-\d+$")
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass
class FileCurves:
    """What the workspace's log files hold: points per metric (minutes since the budget's start)."""

    series: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    origin: dict[str, str] = field(default_factory=dict)
    """Per metric: where its points came from ("TensorBoard events" or "trainer_state.json")."""
    skipped: int = 0
    """Files that could not be read (malformed, too large, not a regular file, over the total)."""
    unplaced: int = 0
    """trainer_state.json folders with no clock to place their steps on."""
    unread_events: int = 0
    """Event files not read because the tensorboard package is not installed."""


@dataclass(frozen=True)
class _File:
    """A file the walk found: its names from the workspace down, its size and modification time."""

    parts: tuple[str, ...]
    size: int
    mtime: float


@contextmanager
def _folder(workspace: Path, parts: tuple[str, ...]) -> Iterator[int]:
    """A descriptor of the folder ``parts`` under ``workspace``, each step opened without following a link."""
    fd = os.open(workspace, DIR_FLAGS)
    try:
        for name in parts:
            child = os.open(name, DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def _walk(workspace: Path) -> tuple[list[_File], list[_File]]:
    """The trainer_state.json files and the event files under ``workspace`` (bounded, no link followed)."""
    states: list[_File] = []
    events: list[_File] = []
    seen = 0
    stack: list[tuple[str, ...]] = [()]
    while stack and seen < MAX_ENTRIES:
        parts = stack.pop()
        try:
            with _folder(workspace, parts) as fd, os.scandir(fd) as listing:
                entries = list(itertools.islice(listing, MAX_ENTRIES - seen))
                seen += len(entries)
                for entry in entries:
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if stat.S_ISDIR(st.st_mode):
                        if len(parts) < MAX_DEPTH and entry.name not in SKIPPED \
                                and not (not parts and entry.name in TOP_SKIPPED):
                            stack.append((*parts, entry.name))
                    elif stat.S_ISREG(st.st_mode):
                        if entry.name == "trainer_state.json":
                            states.append(_File((*parts, entry.name), st.st_size, st.st_mtime))
                        elif EVENTS_NAME.match(entry.name):
                            events.append(_File((*parts, entry.name), st.st_size, st.st_mtime))
        except OSError:
            continue
    return _newest(states), _newest(events)


def _newest(files: list[_File]) -> list[_File]:
    return sorted(files, key=lambda f: (-f.mtime, f.parts))[:MAX_FILES]


class _Budget:
    """What is left of ``MAX_TOTAL_BYTES`` for the files still to read."""

    def __init__(self) -> None:
        self.left = MAX_TOTAL_BYTES

    def take(self, size: int) -> bool:
        if size > self.left:
            return False
        self.left -= size
        return True


def _read(workspace: Path, file: _File, cap: int) -> tuple[bytes, float]:
    """The file's bytes and modification time, opened without following a link at any depth;
    ValueError when it is over ``cap``."""
    try:
        with _folder(workspace, file.parts[:-1]) as fd, open_regular(file.parts[-1], dir_fd=fd) as (fh, st):
            data = read_capped(fh, cap)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # O_NOFOLLOW met a link (ENOTDIR where a folder was expected)
            raise ValueError("a link, or not a folder") from None
        raise
    if len(data) > cap:
        raise ValueError(f"over {cap} bytes")
    return data, st.st_mtime


def _point(at: float, start: float, value: Any) -> tuple[float, float] | None:
    number = logged_number(value)
    minutes = (at - start) / 60
    return (minutes, number) if number is not None and math.isfinite(minutes) else None


# ---- TensorBoard ----------------------------------------------------------------------------------

def _events(workspace: Path, files: list[_File], start: float, budget: _Budget,
            out: FileCurves) -> dict[str, list[tuple[float, float]]]:
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ImportError:
        out.unread_events += len(files)
        return {}
    series: dict[str, list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="agent2rl-tb-") as tmp:
        for n, file in enumerate(files):
            try:
                if file.size > MAX_EVENTS_BYTES or not budget.take(file.size):
                    raise ValueError("too large")
                scalars = _cached(workspace, file, lambda: _scalars(workspace, file, Path(tmp) / str(n), EventAccumulator))
            except Exception:  # the agent's bytes: any failure of the reader is a file skipped
                out.skipped += 1
                continue
            for name, wall_time, value in scalars:
                point = _point(wall_time, start, value)
                if point is not None:
                    series.setdefault(name, []).append(point)
    return {name: sorted(points) for name, points in series.items()}


def _scalars(workspace: Path, file: _File, folder: Path, reader: Any) -> list[tuple[str, float, float]]:
    """The metrics in one event file, as (metric, wall time, value), read from a private copy in ``folder``."""
    data, _ = _read(workspace, file, MAX_EVENTS_BYTES)
    copy = folder / file.parts[-1]
    folder.mkdir()
    try:
        copy.write_bytes(data)
        del data
        acc = reader(str(copy), size_guidance={"scalars": MAX_SCALARS})
        acc.Reload()
        out = []
        for tag in acc.Tags().get("scalars", []):
            name = metric_of(str(tag))
            if name is not None:
                out += [(name, float(e.wall_time), float(e.value)) for e in acc.Scalars(tag)]
        return out
    finally:
        copy.unlink(missing_ok=True)


_PARSED: dict[tuple[str, tuple[str, ...], int, float], Any] = {}
"""What each file held when last read, by its size and modification time: the Training pane reads a
live run's files again on each change of its record, and most have not changed."""
MAX_PARSED = 512


def _cached(workspace: Path, file: _File, parse: Callable[[], Any]) -> Any:
    key = (str(workspace), file.parts, file.size, file.mtime)
    if key not in _PARSED:
        if len(_PARSED) >= MAX_PARSED:
            _PARSED.clear()
        _PARSED[key] = parse()
    return _PARSED[key]


# ---- trainer_state.json ---------------------------------------------------------------------------

@dataclass
class _State:
    step: int
    mtime: float
    history: dict[int, dict[str, float]]
    """Per step, the metrics drawn (nothing else of the file is kept)."""
    runtime: float | None
    """``train_runtime`` of the final entry (written when training ended), if any."""


def _step(value: Any) -> int | None:
    return value if type(value) is int and 0 <= value <= MAX_STEP else None


def _state(raw: bytes, mtime: float) -> _State:
    state = json.loads(raw)
    if not isinstance(state, dict) or not isinstance(state.get("log_history"), list):
        raise ValueError("no log_history")
    history: dict[int, dict[str, float]] = {}
    runtime = None
    for entry in state["log_history"]:
        step = _step(entry.get("step")) if isinstance(entry, dict) else None
        if step is None:
            continue
        for key, value in entry.items():
            name, number = metric_of(str(key)), logged_number(value)
            if name is not None and number is not None:
                history.setdefault(step, {})[name] = number
        if "train_runtime" in entry:
            runtime = logged_number(entry["train_runtime"])
    last = _step(state.get("global_step"))
    if last is None:
        last = max(history, default=0)
    return _State(last, mtime, {s: h for s, h in history.items() if s <= last}, runtime)


def _output_folder(parts: tuple[str, ...]) -> tuple[str, ...]:
    folder = parts[:-1]
    return folder[:-1] if folder and CHECKPOINT.match(folder[-1]) else folder


def _place(anchors: list[tuple[float, float]], step: float) -> float:
    """The time of ``step`` on the straight lines between anchors (step, time), at least two with
    different steps, in step order; below the first, on the line through the first two."""
    for (s0, t0), (s1, t1) in itertools.pairwise(anchors):
        if step <= s1 or (s1, t1) == anchors[-1]:
            return t0 + (t1 - t0) * (step - s0) / (s1 - s0)
    return anchors[-1][1]


def _fingerprint(states: list[_State]) -> str:
    first = min(states, key=lambda s: s.step)
    sample = sorted(first.history.items())[:50]
    return hashlib.sha256(json.dumps(sample).encode()).hexdigest()


def _states(workspace: Path, files: list[_File], start: float, began_before: Callable[[float], float | None],
            budget: _Budget, out: FileCurves) -> dict[str, list[tuple[float, float]]]:
    folders: dict[tuple[str, ...], list[_State]] = {}
    for file in files:
        try:
            if file.size > MAX_STATE_BYTES or not budget.take(file.size):
                raise ValueError("too large")
            state = _cached(workspace, file, lambda: _state(*_read(workspace, file, MAX_STATE_BYTES)))
        except (OSError, ValueError, RecursionError):  # RecursionError: JSON nested deeper than the parser goes
            out.skipped += 1
            continue
        folders.setdefault(_output_folder(file.parts), []).append(state)
    # A copied folder holds the same history under later times: the earliest is the one that trained.
    kept: dict[str, list[_State]] = {}
    for states in sorted(folders.values(), key=lambda ss: min(s.mtime for s in ss)):
        kept.setdefault(_fingerprint(states), states)
    series: dict[str, list[tuple[float, float]]] = {}
    for states in kept.values():
        saved: dict[int, float] = {}
        for s in states:
            saved[s.step] = min(s.mtime, saved.get(s.step, s.mtime))
        anchors = sorted((float(step), at) for step, at in saved.items())
        last = max(states, key=lambda s: (s.step, s.runtime is not None))
        began = saved[last.step] - last.runtime if last.runtime is not None else began_before(anchors[0][1])
        if began is not None and anchors[0][0] > 0 and began < anchors[0][1]:
            anchors.insert(0, (0.0, began))
        if len(anchors) < 2:
            out.unplaced += 1
            continue
        by_step: dict[int, dict[str, float]] = {}
        for s in sorted(states, key=lambda s: s.step):
            for step, metrics in s.history.items():
                by_step.setdefault(step, {}).update(metrics)
        for step, metrics in sorted(by_step.items()):
            at = _place(anchors, float(step))
            for name, value in metrics.items():
                point = _point(at, start, value)
                if point is not None:
                    series.setdefault(name, []).append(point)
    return {name: sorted(points) for name, points in series.items()}


def read_file_curves(workspace: Path, start: float,
                     began_before: Callable[[float], float | None] = lambda at: None) -> FileCurves:
    """The curves in ``workspace``'s trainer log files, times in minutes since ``start``.

    ``began_before(t)``: when the training process running at ``t`` started (None: not known)."""
    out = FileCurves()
    states, events = _walk(workspace)  # nothing where there is no workspace (a record copied without it) or a link
    budget = _Budget()
    for origin, series in (("TensorBoard events", _events(workspace, events, start, budget, out)),
                           ("trainer_state.json", _states(workspace, states, start, began_before, budget, out))):
        for name, points in series.items():
            if name not in out.series:
                out.series[name], out.origin[name] = points, origin
    return out
