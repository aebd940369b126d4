"""The experiment's page: ``review.experiment``'s tables and the scaling charts as one offline file.

As the run report's page (``review.html_report``): no script, no request (the same
Content-Security-Policy), every name an agent or a person chose shown through ``html_parts.text``,
the charts inline SVG drawn by ``review.plots``. The heatmap's shades are classes of our own.
"""

from __future__ import annotations

from pathlib import Path

from agent2rl_tui.review.experiment import (
    ROUTES,
    Experiment,
    best_of_k,
    cell_text,
    group_label,
)
from agent2rl_tui.review.html_parts import CSS, num, page, signed, table, text
from agent2rl_tui.review.index import RunSummary
from agent2rl_tui.review.scaling import FILES, group_runs, scaling_svgs

SECTIONS = (("table", "The table"), ("heatmap", "Mode × task"), ("routes", "Where the best routes came from"),
            ("scaling", "Scaling"), ("best-of-k", "Expected best of k"), ("submissions", "Each run's submissions"))


HEAT_CSS = "".join(f".hp{i}{{background:hsl(130,60%,{100 - 11 * i}%)}}.hn{i}{{background:hsl(0,60%,{100 - 11 * i}%)}}"
                   for i in range(1, 5))
"""The heatmap's four shades each way: classes, so the page keeps no style attribute at all."""


def _heat(value: float | None, scale: float) -> str:
    """A cell shaded by the improvement: green above 0, red below, none at 0."""
    if value is None:
        return '<td class="num">-</td>'
    level = min(4, max(1, round(4 * abs(value) / scale))) if scale and value else 0
    shade = f" h{'p' if value > 0 else 'n'}{level}" if level else ""
    return f'<td class="num{shade}">{signed(value)}</td>'


def _table(e: Experiment) -> str:
    rows = [[text(row.label()), *(text(cell_text(e.cells.get((row, col)))) for col in e.columns)] for row in e.rows]
    return ('<p class="note">Each cell: the mean improvement over the baseline with its bootstrap 95% interval '
            "(from three runs), n runs counted, the valid-submission rate (a run without one counts at 0) and "
            "the cost per run where it is known.</p>" + table(["agent · driver · base model · mode",
                                                                *map(text, e.columns)], rows))


def _heatmaps(e: Experiment) -> str:
    out = []
    for who, cells in e.heatmaps.items():
        scale = max((abs(v) for v in cells.values() if v is not None), default=0.0)
        body = "".join("<tr><th>" + text(mode) + "</th>" + "".join(
            _heat(cells.get((mode, col)), scale) if (mode, col) in cells else "<td>·</td>" for col in e.columns)
            + "</tr>\n" for mode in e.modes())
        head = "".join(f"<th>{text(c)}</th>" for c in e.columns)
        out.append(f"<h3>{text(who)}</h3><table><thead><tr><th>mode</th>{head}</tr></thead><tbody>{body}</tbody>"
                   "</table>")
    return "".join(out) or "<p>No runs.</p>"


def _routes(e: Experiment) -> str:
    supervised, trained = e.supervised_share()
    rows = [[text(label), *(num(counts[r]) for r in ROUTES)] for label, counts in e.routes.items()]
    totals = e.route_totals()
    rows.append(["<b>all</b>", *(f"<b>{num(totals[r])}</b>" for r in ROUTES)])
    return (f'<p id="supervised">Supervised (SFT alone or first): <b>{supervised} of {trained}</b> best routes with '
            "training seen running.</p>" + table(["group", *ROUTES], rows, numeric=range(1, len(ROUTES) + 1)))


def _best_of_k(e: Experiment) -> str:
    rows = [[text(group_label(g)), ", ".join(f"k={k}: {num(v)}" for k, v in best_of_k(g)) or "-"] for g in e.groups]
    return table(["group", "expected best score of k runs"], rows)


def _submissions(e: Experiment) -> str:
    rows = [[text(r.run_id), text(r.group), num(r.baseline),
             ", ".join(f"#{i} {num(s)}" + ("" if status == "scored" else f" ({text(status)})")
                       for i, s, status in r.scores) or "no submission", text(r.route)] for r in e.runs]
    return table(["run", "group", "baseline", "score at each submission", "best route"], rows)


def render_experiment_html(title: str, e: Experiment, runs: list[RunSummary]) -> str:
    svgs = scaling_svgs(group_runs(runs)) if runs else {}
    body = {
        "table": _table(e),
        "heatmap": _heatmaps(e),
        "routes": _routes(e),
        "scaling": "".join(svgs.get(name, "") for name in FILES.values()) or "<p>No runs.</p>",
        "best-of-k": _best_of_k(e),
        "submissions": _submissions(e),
    }
    return page(text(title), f'<h1 id="title">{text(title)}</h1>', [(key, name, body[key]) for key, name in SECTIONS],
                "Written by agent2rl-tui from the runs' records and reports.", css=CSS + HEAT_CSS)


def write_experiment_html(path: Path, title: str, e: Experiment, runs: list[RunSummary]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(render_experiment_html(title, e, runs), encoding="utf-8")
    tmp.replace(path)
    return path
