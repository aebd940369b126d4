"""The run report as one self-contained HTML page that any browser opens offline.

``agent2rl-tui report RUN --html`` writes ``report/report.html``: the report (``report.build_report``'s
``Report``, read by its attributes: run facts, baseline, best, containment, contamination,
usage), the score trajectory (the SVG of
``plots.trajectory_svg``, inline), the submissions with their paired significance, the route and
every iteration (a ``<details>`` each: evidence, configuration, changes, key code, problems, the
agent's summary and the narrative where there is one), every scored submission's item flips,
the metrics, the transcript and the warnings.

Safe to open, whatever the agent wrote: the page has no script and needs none (``<details>``
folds), loads nothing (inline CSS and SVG; a Content-Security-Policy of ``default-src 'none';
style-src 'unsafe-inline'; img-src data:`` forbids scripts and requests even if markup got in),
and every text the agent made goes in through ``html_parts.text`` / ``pre``: made visible
(``util.inert``) and ``html.escape``\\ d, in element content only, never in an attribute or a URL.

Capped in size, whatever the record holds (a 100 MB transcript included): each field the agent
made is cut to 2,000 characters (a code line to 300), the transcript to its first 5,000 steps
and 2 MB, the item flips to 30 items per list and 1 MB, the iterations to 1.25 MB, the
submissions to 0.5 MB, the trajectory to 0.5 MB, the warnings and contamination hits to
0.25 MB each: about 6 MB at most, a few hundred KB for a usual run. Every cut says so on the
page; run.db and the run folder keep everything.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent2rl_tui.record.contamination import ContaminationResult
from agent2rl_tui.review.codefacts import Evidence, Setting
from agent2rl_tui.review.curves import curve_charts, read_curves
from agent2rl_tui.review.eval_label import eval_label
from agent2rl_tui.review.html_evidence import item_flips_html, transcript_html
from agent2rl_tui.review.html_parts import Capped, code, num, page, pre, row, signed, table, table_of, text
from agent2rl_tui.review.iterations import TIME_KINDS, Iteration
from agent2rl_tui.review.narrative import NarrativeEntry
from agent2rl_tui.review.plots import trajectory_svg
from agent2rl_tui.review.report import NOTHING_CHECKABLE, build_report
from agent2rl_tui.review.report_model import Report, SubmissionEntry
from agent2rl_tui.review.run_usage import usage_line, usage_notes
from agent2rl_tui.review.significance import Comparison, p_text
from agent2rl_tui.review.vitals_charts import read_vitals, vitals_charts
from agent2rl_tui.util.timeutil import human_duration, iso

HTML_FILE = "report.html"
SUBMISSIONS_BYTES = 500_000
ITERATIONS_BYTES = 1_000_000
ITERATION_ROWS_BYTES = 250_000
SVG_BYTES = 500_000
MAX_CODE = 300
"""Characters shown of one code line or command of an iteration."""
WARNINGS_BYTES = 250_000
MAX_LIST = 30
"""Entries shown of one list in an iteration (evidence, key code, commands, problems)."""

SECTIONS = (("summary", "Summary"), ("trajectory", "Score trajectory"), ("training", "Training curves"),
            ("submissions", "Submissions"),
            ("iterations", "Iterations"), ("items", "Item flips"), ("metrics", "Metrics"),
            ("vitals", "Vitals over time"),
            ("transcript", "Transcript"), ("warnings", "Warnings"))


def _cut_note(capped: Capped, what: str) -> str:
    return (f'<p class="cut">… {capped.dropped:,} more {what} not shown (the page\'s size cap); '
            "report.json holds them all</p>") if capped.dropped else ""


def _dl(pairs: list[tuple[str, str]]) -> str:
    return "<dl>" + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in pairs) + "</dl>"


def _summary(r: Report) -> str:
    best = r.best
    c = r.containment
    pairs = [
        ("task", f"{text(r.task)} (prompt profile {text(r.prompt_profile)}"
                 + (f", decoding row {text(r.decoding_row)}" if r.decoding_row else "") + ")"),
        ("agent", text(r.agent)), ("driver", text(r.driver)), ("base model", code(r.base_model)),
        ("status", f"<b>{text(r.status)}</b> ({text(r.end_reason)}), agent exit code {num(r.agent_exit_code)}"),
        ("budget", f"{human_duration(r.budget_s)} from {text(r.budget_start)}"),
        ("baseline", f"<b>{num(r.baseline.score)}</b>"),
        ("best", f"<b>{num(best.score if best else None)}</b>"
                 + (f" (submission {int(best.submission_id)})" if best and best.submission_id is not None else "")),
        ("improvement", f"<b>{signed(r.improvement)}</b>"),
    ]
    res = r.resolution
    if r.eval_limit is not None or r.eval_seed is not None:
        pairs.append(("eval items", text(eval_label(r.eval_limit, r.eval_seed, res.n if res else None)
                                         .removeprefix("eval: "))))
    if res:
        pairs.append(("resolution", f"{num(res.points, 1)} points on {num(res.n)} eval items"))
    if r.error:
        pairs.append(("error", f'<span class="bad">{text(r.error)}</span>'))
    pairs.append(("containment", f'<span class="good">contained</span> by {text(c.reason)}' if c.contained
                  else f'<span class="bad">NOT CONTAINED</span>: {text(c.reason)}'))
    if r.redactions is not None:
        pairs.append(("secrets", text(r.redactions.line())))
    pairs.append(("contamination", _contamination_line(r.contamination_found)))
    if r.usage is not None:
        u = r.usage
        pairs.append(("usage", "<br>".join([text(usage_line(u))] + [text(n) for n in usage_notes(u)])))
    t, revs = r.transcript, r.revisions
    pairs.append(("transcript", f"{num(t.steps)} steps, {num(t.tokens_in)} tokens in, {num(t.tokens_out)} out"))
    pairs.append(("code revisions", f"{num(revs.count)} (+{num(revs.lines_added)} / -{num(revs.lines_removed)} lines)"))
    return _dl(pairs)


def _contamination_line(c: ContaminationResult | str | None) -> str:
    if c is None:
        return "not run"
    if isinstance(c, str):
        return f"unreadable result ({text(c)})"
    if c.items:
        return (f'<span class="bad">CONTAMINATED?</span> {len(c.items):,} eval item(s) found in '
                f'{len(c.hits):,} file(s) the agent wrote')
    if not c.checkable_items:
        return f"not checked ({text(NOTHING_CHECKABLE)})"
    return f"clean ({num(c.checkable_items)} eval items checked against {num(c.files_scanned)} file(s))"


def _contamination_hits(c: ContaminationResult | str | None) -> str:
    if not isinstance(c, ContaminationResult) or not c.hits:
        return ""
    out = Capped(WARNINGS_BYTES)
    for hit in c.hits:
        items = ", ".join(hit.items[:20]) + (" …" if len(hit.items) > 20 else "")
        out.add(f"<tr><td>{code(hit.path)}</td><td>{text(', '.join(map(str, hit.revisions)))}</td>"
                f"<td>{'yes' if hit.in_final_workspace else 'no'}</td><td>{text(items)}</td></tr>\n")
    return ("<h3>Contamination: files holding eval items</h3><table><thead><tr><th>file</th><th>revisions</th>"
            f"<th>at the end</th><th>eval items</th></tr></thead><tbody>{out.html()}</tbody></table>"
            + _cut_note(out, "files"))


def _compared(c: Comparison | None) -> str:
    if c is None:
        return "-"
    test = (f"; McNemar {text(p_text(c.p_value))}, {num(c.gained)} gained, {num(c.lost)} lost"
            if c.p_value is not None else "")
    return f"{signed(c.diff)} [{signed(c.low)}, {signed(c.high)}] <b>{text(c.label)}</b>{test}"


def _submission_row(s: SubmissionEntry) -> str:
    sig = s.significance
    copy = ' <span class="note">(base copy)</span>' if s.is_base_copy else ""
    error = f'<span class="bad">{text(s.error)}</span>' if s.error else "-"
    return (f"<tr><td class=\"num\">{num(s.submission_id)}</td><td>{human_duration(s.elapsed_s)}</td>"
            f"<td>{text(s.status)}</td><td class=\"num\">{num(s.score)}</td>"
            f"<td class=\"num\">{signed(s.improvement)}</td><td class=\"num\">{num(s.eval_seconds, 1)}</td>"
            f"<td class=\"num\">{num(s.revision)}</td><td>{code(s.model_path, 500)}{copy}</td>"
            f"<td>{error}</td><td>{_compared(sig.vs_baseline if sig else None)}</td>"
            f"<td>{_compared(sig.vs_previous_best if sig else None)}</td></tr>\n")


def _submissions(r: Report) -> str:
    out = Capped(SUBMISSIONS_BYTES)
    for s in r.submissions:
        out.add(_submission_row(s))
    if not out.parts and not out.dropped:
        return "<p>No submission.</p>"
    head = "".join(f"<th>{h}</th>" for h in ("#", "at", "status", "score", "vs baseline", "eval s", "revision",
                                             "model", "error", "paired vs baseline (points, 95%)",
                                             "paired vs the best before it"))
    return (f"<table><thead><tr>{head}</tr></thead><tbody>\n{out.html()}</tbody></table>" + _cut_note(out, "submissions")
            + _graded_after(r))


def _graded_after(r: Report) -> str:
    """Checkpoints a person graded after the run ended (``run grade``), apart from its submissions."""
    if not r.graded_after:
        return ""
    rows = "".join(f"<tr><td class=\"num\">{num(s.submission_id)}</td><td>{text(s.status)}</td>"
                   f"<td class=\"num\">{num(s.score)}</td><td class=\"num\">{signed(s.improvement)}</td>"
                   f"<td>{code(s.model_path, 500)}</td></tr>\n" for s in r.graded_after[:200])
    head = "".join(f"<th>{h}</th>" for h in ("#", "status", "score", "vs baseline", "model"))
    return (f"<h3>Graded after the run ({len(r.graded_after)})</h3><p class=\"note\">Checkpoints a person graded "
            "once the run had ended, by the run's grader on its items: outside its budget, so not among its "
            f"submissions nor its best.</p><table><thead><tr>{head}</tr></thead><tbody>\n{rows}</tbody></table>")


def _at(found: Evidence | Setting) -> str:
    where = f"{found.path}:{found.line}" if found.line else found.path
    return code(where, 500)


def _found(items: list[Evidence]) -> str:
    rows = "".join(f"<li>{_at(e)} {code(e.text, MAX_CODE)}</li>" for e in items[:MAX_LIST])
    more = f'<li class="cut">… {len(items) - MAX_LIST:,} more</li>' if len(items) > MAX_LIST else ""
    return f"<ul>{rows}{more}</ul>"


def _when(at: Any) -> str:
    return text(iso(at) if isinstance(at, int | float) and not isinstance(at, bool) else at)


def _lr(it: Iteration) -> str:
    lr = it.key_config.get("lr")
    return code(lr.value, 40) if lr is not None else "-"


def _iteration_head(it: Iteration) -> str:
    sub = f"submission {int(it.submission_id)}" if it.submission_id is not None else "no submission"
    online = " (online)" if it.online else ""
    sig = f" ({text(it.significance)} vs the baseline)" if it.significance else ""
    n = int(it.iteration or 0)
    return (f'<details id="iteration-{n}"><summary>Iteration {n}: {sub}, {text(it.train_type)}{online}, '
            f'{text(it.status)}, score {num(it.score)}{sig}</summary>'
            f"<p>{human_duration(it.duration_s)} long, ending {human_duration(it.elapsed_s)} into the "
            "run: " + ", ".join(f"{k.removesuffix('_s')} {num(it.time.get(k), 0)} s" for k in TIME_KINDS) + "</p>")


def _iteration_changes(it: Iteration) -> str:
    out = f"<h4>Changed since the previous submission</h4><p>{text(it.changes.summary or 'no change')}</p>"
    files = it.changes.files
    if files:
        rows = [(code(f.get("path"), 500), text(f.get("status")), f"+{num(f.get('added'))}", f"-{num(f.get('removed'))}")
                for f in files[:MAX_LIST]]
        out += table(("file", "status", "added", "removed"), rows, numeric=(2, 3))
    return out


def _iteration_failure(it: Iteration) -> str:
    if not (it.failure_type or it.problems or it.failure_evidence):
        return ""
    signals = [f"<li>{text(s.kind, 100)} at {_when(s.at)}: {code(s.text, MAX_CODE)}</li>"
               for s in it.failure_evidence[:MAX_LIST]]
    return (f'<h4>Failure: <span class="bad">{text(it.failure_type or "-")}</span></h4><ul>'
            + "".join(f"<li>{text(p)}</li>" for p in it.problems[:MAX_LIST]) + "".join(signals) + "</ul>")


def _iteration(it: Iteration, narrated: dict[int, NarrativeEntry]) -> str:
    parts = [_iteration_head(it)]
    if it.train_evidence:
        parts.append(f"<h4>Trained as {text(it.train_type)}: evidence</h4>" + _found(it.train_evidence))
    if it.online_evidence:
        parts.append("<h4>Online rollouts: evidence</h4>" + _found(it.online_evidence))
    if it.key_config:
        rows = [(text(k), code(v.value), _at(v), text(v.source)) for k, v in list(it.key_config.items())[:MAX_LIST]]
        parts.append("<h4>Key configuration</h4>" + table(("setting", "value", "where", "source"), rows))
    parts.append(_iteration_changes(it))
    if it.key_code:
        parts.append("<h4>Key code</h4>" + _found(it.key_code))
    if it.commands:
        commands = "".join(f"<li>{code(c, MAX_CODE)}</li>" for c in it.commands[:MAX_LIST])
        parts.append(f"<h4>Commands</h4><ul>{commands}</ul>")
    parts.append(_iteration_failure(it))
    if it.agent_summary:
        parts.append("<h4>The agent's own summary.md about it (its words, not checked)</h4>"
                     + pre(it.agent_summary, 4000))
    entry = narrated.get(int(it.iteration or 0))
    if entry is not None:
        said = pre(entry.text, 4000) if entry.text else f"<p>no narrative: {text(entry.error or '?')}</p>"
        parts.append("<h4>Narrative (written by the summarizer)</h4>" + said)
    parts.append("</details>\n")
    return "".join(parts)


def _iteration_row(it: Iteration) -> str:
    t, n = it.time, int(it.iteration or 0)
    return row((f'<a href="#iteration-{n}">{n}</a>', num(it.submission_id), text(it.status, 100),
                num(it.score), signed(it.improvement),
                text(it.train_type, 100) + (" (online)" if it.online else ""), _lr(it),
                text(it.failure_type, 100), num(t.get("training_s"), 0),
                num(t.get("evaluating_s"), 0), num(t.get("idle_s"), 0)), (1, 3, 4, 8, 9, 10))


def _iterations(r: Report) -> str:
    if r.diagnosis_error:
        return f"<p>Not diagnosed: {text(r.diagnosis_error)}</p>"
    if not r.iterations:
        return "<p>No iteration.</p>"
    narrative = r.narrative
    narrated = narrative.entries if narrative is not None else {}
    rows = Capped(ITERATION_ROWS_BYTES)
    for it in r.iterations:
        rows.add(_iteration_row(it))
    out = Capped(ITERATIONS_BYTES)
    for it in r.iterations:
        out.add(_iteration(it, narrated))
    head = f"<p>Route: <b id=\"route\">{text(r.route)}</b></p>"
    if narrative is not None:
        head += (f"<p class=\"note\">Narrative by {code(narrative.model)}: {num(len(narrative.calls))} calls"
                 + (f"; {text(narrative.error)}" if narrative.error else "") + "</p>")
    return (head + table_of(("#", "submission", "status", "score", "improvement", "training", "learning rate",
                             "failure", "training s", "eval s", "idle s"), rows.html())
            + _cut_note(rows, "iterations in this table") + out.html() + _cut_note(out, "iterations"))


def _training(run_dir: Path, r: Report) -> str:
    """The agent's training curves (``review.curves``), the submissions marked on each."""
    curves = read_curves(run_dir)
    subs = [(int(s.submission_id), float(s.elapsed_s) / 60) for s in r.submissions
            if s.submission_id is not None and isinstance(s.elapsed_s, int | float)]
    charts = curve_charts(curves, subs)
    skipped = "".join(f'<p class="note">{text(note)}.</p>' for note in curves.notes())
    if not charts:
        return '<p class="note">No trainer logged a loss, reward, KL or learning rate in the agent\'s output.</p>' \
            + skipped
    return "".join(charts) + skipped


def _vitals(run_dir: Path) -> str:
    """CPU, memory and GPU use over the run (``review.vitals_charts``)."""
    series = read_vitals(run_dir)
    if series.empty:
        return '<p class="note">No vitals were sampled.</p>'
    return "".join(vitals_charts(series))


def _metrics(r: Report) -> str:
    rows = [(text(k), num(v, 3)) for k, v in r.metrics.rows()]
    return table(("metric", "value"), rows, numeric=(1,))


def _warnings(r: Report) -> str:
    if not r.warnings:
        return "<p>None.</p>"
    out = Capped(WARNINGS_BYTES)
    for w in r.warnings:
        out.add(f"<li>{text(w.at)} {text(w.source)}/{text(w.kind)}: {text(w.message)}</li>\n")
    return f"<ul>{out.html()}</ul>" + _cut_note(out, "warnings (run.db's events table holds them)")


def _trajectory(r: Report) -> str:
    svg = trajectory_svg(r)
    if len(svg.encode("utf-8")) > SVG_BYTES:
        return '<p class="cut">Too many points to draw here (the page\'s size cap): report/trajectory.svg has them.</p>'
    return svg


def render_html(run_dir: Path, report: Report | None = None) -> str:
    """The page (a str); ``report``: ``build_report(run_dir)``, built here when not given."""
    run_dir = Path(run_dir)
    r = report if report is not None else build_report(run_dir)
    body = {
        "summary": _summary(r),
        "trajectory": _trajectory(r),
        "training": _training(run_dir, r),
        "vitals": _vitals(run_dir),
        "submissions": _submissions(r),
        "iterations": _iterations(r),
        "items": item_flips_html(run_dir),
        "metrics": _metrics(r) + _contamination_hits(r.contamination_found),
        "transcript": transcript_html(run_dir),
        "warnings": _warnings(r),
    }
    return page(f"Run {text(r.run_id)}", f'<h1>Run <span id="run-id">{text(r.run_id)}</span></h1>',
                [(key, title, body[key]) for key, title in SECTIONS],
                f"Written by agent2rl-tui from the run's record; report generated {text(r.generated_at)}. Text the "
                "agent made is shown as text, control characters as escapes; long texts and lists are cut where the "
                "page says so.")


def write_html(run_dir: Path, out: Path | None = None, report: Report | None = None) -> Path:
    """Write the page (default ``report/report.html`` of the run) and return its path; ``report``:
    the report just written (``write_report``'s), so it is not built again."""
    run_dir = Path(run_dir)
    path = Path(out) if out is not None else run_dir / "report" / HTML_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(render_html(run_dir, report), encoding="utf-8")
    tmp.replace(path)
    return path
