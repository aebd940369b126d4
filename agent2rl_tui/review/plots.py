"""Small SVG charts of the record: a run's score trajectory, and the scaling curves across runs.

The paper plots score against time, tokens and submissions, and the expected best
improvement against k; a report or a campaign's results should carry the same pictures,
readable in any browser and diffable as text, with nothing installed (matplotlib is not a
dependency, and the record layer imports no UI). So this is a deliberately small writer of
self-contained SVG strings: line and step charts with axes, ticks, axis labels, a title, a
legend, horizontal reference lines and markers, and nothing more.

Every text in a chart (titles, legends, tooltips) may come from a user or an agent (run ids,
task and agent names): it is made one line and visible (``util.inert.one_line``: control
characters become escapes, which XML could not hold anyway) and then XML-escaped, so it can
never close an element, open a ``<script>`` or set an attribute.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from xml.sax.saxutils import escape

from agent2rl_tui.util.inert import one_line

if TYPE_CHECKING:
    from agent2rl_tui.review.report_model import Report

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf")
"""Colours of series and groups, in order (matplotlib's tab10)."""
_PLOT_W, _H = 520, 420
_LEFT, _TOP, _BOTTOM = 64, 40, 48  # the plot area's margins; the legend sits on its right, as wide as it needs


def text(value: Any) -> str:
    """User- or agent-made text, safe inside an SVG element or a double-quoted attribute."""
    return escape(one_line(str(value)), {'"': "&quot;", "'": "&apos;"})


@dataclass(frozen=True)
class Series:
    """One line of a chart: ``points`` (x, y) in order; ``step`` draws it as a step function
    (a value holds until the next point), ``title`` is its tooltip (e.g. the run id)."""

    points: Sequence[tuple[float, float]]
    colour: str
    title: str = ""
    step: bool = False
    markers: bool = False
    dashed: bool = False


@dataclass(frozen=True)
class Chart:
    title: str
    xlabel: str
    ylabel: str
    series: list[Series] = field(default_factory=list)
    legend: list[tuple[str, str]] = field(default_factory=list)
    """(label, colour) entries, in order."""
    hlines: list[tuple[float, str, str]] = field(default_factory=list)
    """Horizontal reference lines: (y, label, colour)."""
    marks: list[tuple[float, float, str, str]] = field(default_factory=list)
    """Single marked points: (x, y, label, colour), drawn as a larger diamond."""
    notes: list[str] = field(default_factory=list)
    """Lines under the legend (e.g. runs left out and why)."""
    xmin: float | None = None
    xmax: float | None = None
    integer_x: bool = False
    """Whole-number x ticks (counts: submissions, k)."""


def nice_ticks(lo: float, hi: float, n: int = 5, *, integer: bool = False) -> list[float]:
    """About ``n`` round tick values from at or below ``lo`` to at or above ``hi`` (steps of 1, 2
    or 5 times a power of ten; whole numbers only with ``integer``)."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / max(1, n)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    step = max(step, 1.0) if integer else step
    ticks = [math.floor(lo / step) * step]
    while ticks[-1] < hi - step * 1e-9:
        ticks.append(round(ticks[0] + len(ticks) * step, 12))
    return ticks


def step_points(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The corners of a step line through ``points``: each value holds until the next point's x."""
    pts = list(points)
    return [p for a, b in zip(pts, pts[1:], strict=False) for p in (a, (b[0], a[1]))] + pts[-1:]


def _fmt(v: float) -> str:
    if abs(v) >= 10_000:
        return f"{v / 1000:g}k" if abs(v) < 1_000_000 else f"{v / 1e6:g}M"
    return f"{v:g}" if v == round(v, 2) else f"{v:.2f}"


def render(chart: Chart, height: int = _H) -> str:
    """The chart as one self-contained SVG document."""
    labels = [one_line(label) for label, _ in chart.legend] + [one_line(n) for n in chart.notes]
    right = min(480, 48 + 7 * max((len(t) for t in labels), default=0))
    width = _LEFT + _PLOT_W + right
    xs = [x for s in chart.series for x, _ in s.points] + [m[0] for m in chart.marks]
    ys = [y for s in chart.series for _, y in s.points] + [m[1] for m in chart.marks] + [h[0] for h in chart.hlines]
    xticks = nice_ticks(min(xs, default=0.0) if chart.xmin is None else chart.xmin,
                        max(xs, default=1.0) if chart.xmax is None else chart.xmax, integer=chart.integer_x)
    yticks = nice_ticks(min(ys, default=0.0), max(ys, default=1.0))
    x0, x1, y0, y1 = xticks[0], xticks[-1], yticks[0], yticks[-1]
    pw, ph = _PLOT_W, height - _TOP - _BOTTOM

    def px(x: float) -> float:
        return round(_LEFT + (x - x0) / ((x1 - x0) or 1) * pw, 2)

    def py(y: float) -> float:
        return round(_TOP + ph - (y - y0) / ((y1 - y0) or 1) * ph, 2)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text class="title" x="{_LEFT + pw / 2}" y="20" text-anchor="middle" font-size="14">{text(chart.title)}</text>',
           f'<g class="axes" stroke="#333"><line x1="{_LEFT}" y1="{_TOP + ph}" x2="{_LEFT + pw}" y2="{_TOP + ph}"/>'
           f'<line x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{_TOP + ph}"/></g>']
    for t in xticks:
        out.append(f'<line x1="{px(t)}" y1="{_TOP}" x2="{px(t)}" y2="{_TOP + ph}" stroke="#eee"/>'
                   f'<text class="xtick" x="{px(t)}" y="{_TOP + ph + 14}" text-anchor="middle">{_fmt(t)}</text>')
    for t in yticks:
        out.append(f'<line x1="{_LEFT}" y1="{py(t)}" x2="{_LEFT + pw}" y2="{py(t)}" stroke="#eee"/>'
                   f'<text class="ytick" x="{_LEFT - 6}" y="{py(t) + 4}" text-anchor="end">{_fmt(t)}</text>')
    out.append(f'<text class="xlabel" x="{_LEFT + pw / 2}" y="{height - 10}" text-anchor="middle">{text(chart.xlabel)}</text>')
    out.append(f'<text class="ylabel" transform="translate(16 {_TOP + ph / 2}) rotate(-90)" '
               f'text-anchor="middle">{text(chart.ylabel)}</text>')
    for y, label, colour in chart.hlines:
        out.append(f'<line class="ref" x1="{_LEFT}" y1="{py(y)}" x2="{_LEFT + pw}" y2="{py(y)}" stroke="{colour}" '
                   f'stroke-dasharray="6 4"><title>{text(label)}</title></line>')
    for s in chart.series:
        pts = step_points(s.points) if s.step else s.points
        coords = " ".join(f"{px(x)},{py(y)}" for x, y in pts)
        dash = ' stroke-dasharray="4 3"' if s.dashed else ""
        out.append(f'<polyline class="series" points="{coords}" fill="none" stroke="{s.colour}" stroke-width="1.8"'
                   f'{dash}><title>{text(s.title)}</title></polyline>')
        if s.markers:
            out += [f'<circle class="marker" cx="{px(x)}" cy="{py(y)}" r="3" fill="{s.colour}"/>' for x, y in s.points]
    for x, y, label, colour in chart.marks:
        cx, cy = px(x), py(y)
        out.append(f'<polygon class="mark" points="{cx},{cy - 7} {cx + 7},{cy} {cx},{cy + 7} {cx - 7},{cy}" '
                   f'fill="{colour}" stroke="#333"><title>{text(label)}</title></polygon>')
    lx, ly = _LEFT + pw + 14, _TOP + 8
    out.append('<g class="legend">')
    for i, (label, colour) in enumerate(chart.legend):
        out.append(f'<line x1="{lx}" y1="{ly + 16 * i}" x2="{lx + 18}" y2="{ly + 16 * i}" stroke="{colour}" '
                   f'stroke-width="3"/><text x="{lx + 24}" y="{ly + 16 * i + 4}">{text(label)}</text>')
    for i, note in enumerate(chart.notes):
        out.append(f'<text class="note" x="{lx}" y="{ly + 16 * (len(chart.legend) + i) + 8}" fill="#666">'
                   f'{text(note)}</text>')
    out += ["</g>", "</svg>", ""]
    return "\n".join(out)


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def trajectory_svg(report: Report) -> str:
    """A run's score over its run time, from its report: each scored submission (score against
    minutes since the budget's start), the best so far as a step line, the best submission
    marked, and the baseline as a horizontal line."""
    scored = [(s, elapsed, score) for s in report.submissions if s.status == "scored"
              and (elapsed := _num(s.elapsed_s)) is not None and (score := _num(s.score)) is not None]
    pts = [(elapsed / 60, score) for _, elapsed, score in scored]
    end = max([(_num(report.budget_s) or 0.0) / 60, *(x for x, _ in pts)], default=1.0)
    best_so_far: list[tuple[float, float]] = []
    for x, y in pts:
        best_so_far.append((x, max(y, best_so_far[-1][1]) if best_so_far else y))
    if best_so_far:
        best_so_far.append((end, best_so_far[-1][1]))
    chart = Chart(f"{_or_unknown(report.run_id)}: score over run time ({_or_unknown(report.task)})",
                  "minutes since the budget's start", "score", xmin=0.0, xmax=end or 1.0,
                  series=[Series(pts, PALETTE[0], "submissions", markers=True),
                          Series(best_so_far, PALETTE[2], "best so far", step=True)],
                  legend=[("submissions", PALETTE[0]), ("best so far", PALETTE[2])])
    best_id = report.best.submission_id if report.best is not None else None
    best = next(((elapsed, score) for s, elapsed, score in scored if s.submission_id == best_id), None)
    if best is not None:
        chart.marks.append((best[0] / 60, best[1], f"best: #{best_id}", "#ffd700"))
        chart.legend.append((f"best (#{best_id})", "#ffd700"))
    base = _num(report.baseline.score)
    if base is not None:
        chart.hlines.append((base, "baseline", PALETTE[3]))
        chart.legend.append((f"baseline {base:g}", PALETTE[3]))
    if not pts:
        chart.notes.append("no scored submission")
    return render(chart)


def _or_unknown(value: str | None) -> str:
    return "?" if value is None else value


def write_trajectory(run_dir: Path, report: Report) -> Path:
    """report/trajectory.svg of the run (``report``: its report, as report.json holds it)."""
    out = Path(run_dir) / "report" / "trajectory.svg"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".svg.tmp").write_text(trajectory_svg(report), encoding="utf-8")
    out.with_suffix(".svg.tmp").replace(out)
    return out
