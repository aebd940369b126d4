"""The agent's training curves: what its trainers logged, as series on the run's clock.

TRL's and transformers' trainers log a dict a line (``{'loss': 0.41, 'reward': 0.73, 'kl': 0.02,
'learning_rate': 1e-05, 'epoch': 1.0}``); in the record those lines are the agent's output (a
plain agent's lines, an agent CLI's tool results). Each such line is read as a Python or JSON
literal (``ast.literal_eval``: literals only, nothing runs) and its known metrics become points at
the line's time, minutes since the budget's start. The output is the agent's: a line is read only
up to ``MAX_LINE`` characters, a series keeps at most ``MAX_POINTS`` (thinned evenly), and a line
that looks like a log dict but does not parse is skipped and counted.

Not read yet: ``trainer_state.json`` files and TensorBoard event files in the workspace.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent2rl_tui.record.store import RunStore

METRICS = ("loss", "reward", "kl", "learning_rate", "grad_norm", "entropy", "completion_length",
           "completions/mean_length", "reward_std")
"""The metrics drawn, in this order, where a run logged them (TRL's names, old and new)."""
MAX_LINE = 4096
MAX_POINTS = 2000
DICT_LINE = re.compile(r"\{[^{}]*['\"](loss|reward|kl|learning_rate)['\"]\s*:[^{}]*\}")


@dataclass
class Curves:
    series: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    """Per metric: (minutes since the budget's start, value), in time order."""
    skipped: int = 0
    """Lines that looked like a trainer's log dict but could not be read."""

    def add(self, at_min: float, logged: dict[Any, Any]) -> None:
        for name in METRICS:
            value = _number(logged.get(name))
            if value is not None:
                self.series.setdefault(name, []).append((at_min, value))

    def thinned(self) -> Curves:
        """At most ``MAX_POINTS`` a series, evenly spaced, the last point kept."""
        out = Curves(skipped=self.skipped)
        for name, points in self.series.items():
            if len(points) > MAX_POINTS:
                step = len(points) / MAX_POINTS
                points = [points[int(i * step)] for i in range(MAX_POINTS - 1)] + [points[-1]]
            out.series[name] = points
        return out


NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][-+]?\d+)?")


def _number(value: Any) -> float | None:
    """A logged number: recent transformers write them as strings (``'loss': '0.5606'``)."""
    if isinstance(value, str) and len(value) < 40 and NUMBER.fullmatch(value.strip()):
        value = float(value)
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def parse_line(line: str) -> dict[Any, Any] | None:
    """A trainer's log dict in ``line``, or None (ValueError for one that looks like it and does not parse)."""
    found = DICT_LINE.search(line[:MAX_LINE])
    if found is None:
        return None
    try:
        value = ast.literal_eval(found.group(0))
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError) as exc:
        raise ValueError(str(exc)) from None
    if not isinstance(value, dict):
        raise ValueError("not a dict")
    return value


def curves_of(lines: Iterable[tuple[float, str]], start: float) -> Curves:
    """The curves in ``lines`` ((time, text) of the agent's output), times from ``start``."""
    curves = Curves()
    for at, text in lines:
        for line in text.splitlines():
            if "{" not in line:
                continue
            try:
                logged = parse_line(line)
            except ValueError:
                curves.skipped += 1
                continue
            if logged is not None:
                curves.add((at - start) / 60, logged)
    return curves.thinned()


def read_curves(run_dir: Path) -> Curves:
    """The run's training curves from its transcript (the agent's output and tool results)."""
    with RunStore.of_run(Path(run_dir)) as store:
        run = store.run()
        start = run.budget_start or run.created_at or 0.0
        return curves_of(((at, text) for at, kind, _, _, text, _ in store.step_lines()
                          if kind in ("raw", "tool_result", "message") and text), start)


def marks_on(points: list[tuple[float, float]], submissions: list[tuple[int, float]]) -> list[tuple[int, float, float]]:
    """Each submission (id, minutes) on a curve: (id, minutes, the value the curve had then); one made
    before the curve's first point is left out."""
    out = []
    for sub_id, at in submissions:
        before = [y for x, y in points if x <= at]
        if before:
            out.append((sub_id, at, before[-1]))
    return out


def curve_charts(curves: Curves, submissions: list[tuple[int, float]]) -> list[str]:
    """One SVG a metric, minutes on x; ``submissions`` ((id, minutes since the budget's start)) marked
    on each line where it stood when the submission was made."""
    from agent2rl_tui.review.plots import PALETTE, Chart, Series, render

    out = []
    for n, name in enumerate(m for m in METRICS if curves.series.get(m)):
        points = curves.series[name]
        chart = Chart(f"{name} as the agent's trainers logged it", "minutes since the budget's start", name,
                      series=[Series(points, PALETTE[n % len(PALETTE)], name, markers=len(points) < 60)],
                      legend=[(name, PALETTE[n % len(PALETTE)])], xmin=0.0)
        chart.marks.extend((at, y, f"submission #{sub_id}", "#ffd700") for sub_id, at, y in marks_on(points, submissions))
        if chart.marks:
            chart.legend.append(("a submission", "#ffd700"))
        out.append(render(chart))
    return out
