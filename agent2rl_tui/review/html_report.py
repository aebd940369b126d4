"""The run report as one self-contained HTML page that any browser opens offline.

``agent2rl-tui report RUN --html`` writes ``report/report.html``: the report (``report.build_report``:
run facts, baseline, best, containment, contamination, usage), the score trajectory (the SVG of
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
from agent2rl_tui.review.html_evidence import item_flips_html, transcript_html
from agent2rl_tui.review.html_parts import CSP, CSS, Capped, code, num, pre, row, signed, table, table_of, text
from agent2rl_tui.review.iterations import TIME_KINDS
from agent2rl_tui.review.plots import trajectory_svg
from agent2rl_tui.review.report import build_report
from agent2rl_tui.review.run_usage import RunUsage, usage_line, usage_notes
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

SECTIONS = (("summary", "Summary"), ("trajectory", "Score trajectory"), ("submissions", "Submissions"),
            ("iterations", "Iterations"), ("items", "Item flips"), ("metrics", "Metrics"),
            ("transcript", "Transcript"), ("warnings", "Warnings"))


def _cut_note(capped: Capped, what: str) -> str:
    return (f'<p class="cut">… {capped.dropped:,} more {what} not shown (the page\'s size cap); '
            "report.json holds them all</p>") if capped.dropped else ""


def _dl(pairs: list[tuple[str, str]]) -> str:
    return "<dl>" + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in pairs) + "</dl>"


def _summary(r: dict[str, Any]) -> str:
    best = r.get("best") or {}
    c = r.get("containment") or {}
    pairs = [
        ("task", f"{text(r.get('task'))} (prompt profile {text(r.get('prompt_profile'))}"
                 + (f", decoding row {text(r['decoding_row'])}" if r.get("decoding_row") else "") + ")"),
        ("agent", text(r.get("agent"))), ("driver", text(r.get("driver"))), ("base model", code(r.get("base_model"))),
        ("status", f"<b>{text(r.get('status'))}</b> ({text(r.get('end_reason'))}), agent exit code "
                   f"{num(r.get('agent_exit_code'))}"),
        ("budget", f"{human_duration(r.get('budget_s'))} from {text(r.get('budget_start'))}"),
        ("baseline", f"<b>{num((r.get('baseline') or {}).get('score'))}</b>"),
        ("best", f"<b>{num(best.get('score'))}</b>" + (f" (submission {int(best['submission_id'])})" if best else "")),
        ("improvement", f"<b>{signed(r.get('improvement'))}</b>"),
    ]
    res = r.get("resolution")
    if res:
        pairs.append(("resolution", f"{num(res.get('points'), 1)} points on {num(res.get('n'))} eval items"))
    if r.get("error"):
        pairs.append(("error", f'<span class="bad">{text(r["error"])}</span>'))
    pairs.append(("containment", f'<span class="good">contained</span> by {text(c.get("reason"))}' if c.get("contained")
                  else f'<span class="bad">NOT CONTAINED</span>: {text(c.get("reason"))}'))
    pairs.append(("contamination", _contamination_line(r.get("contamination"))))
    if r.get("usage") is not None:
        u = RunUsage.from_json(r["usage"])
        pairs.append(("usage", "<br>".join([text(usage_line(u))] + [text(n) for n in usage_notes(u)])))
    t, revs = r.get("transcript") or {}, r.get("revisions") or {}
    pairs.append(("transcript", f"{num(t.get('steps'))} steps, {num(t.get('tokens_in'))} tokens in, "
                                f"{num(t.get('tokens_out'))} out"))
    pairs.append(("code revisions", f"{num(revs.get('count'))} (+{num(revs.get('lines_added'))} / "
                                    f"-{num(revs.get('lines_removed'))} lines)"))
    return _dl(pairs)


def _contamination_of(result: dict[str, Any] | None) -> ContaminationResult | str | None:
    """report.json's ``contamination``, typed; the reason as text when it is malformed."""
    try:
        return None if result is None else ContaminationResult.from_dict(result)
    except ValueError as exc:
        return str(exc)


def _contamination_line(result: dict[str, Any] | None) -> str:
    c = _contamination_of(result)
    if c is None:
        return "not run"
    if isinstance(c, str):
        return f"unreadable result ({text(c)})"
    if c.items:
        return (f'<span class="bad">CONTAMINATED?</span> {len(c.items):,} eval item(s) found in '
                f'{len(c.hits):,} file(s) the agent wrote')
    return f"clean ({num(c.checkable_items)} eval items checked against {num(c.files_scanned)} file(s))"


def _contamination_hits(result: dict[str, Any] | None) -> str:
    c = _contamination_of(result)
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


def _compared(c: dict[str, Any] | None) -> str:
    if not c:
        return "-"
    low, high = c.get("ci95") or (None, None)
    test = (f"; McNemar p = {c['p_value']:.4f}, {num(c.get('gained'))} gained, {num(c.get('lost'))} lost"
            if c.get("p_value") is not None else "")
    return f"{signed(c.get('diff'))} [{signed(low)}, {signed(high)}] <b>{text(c.get('label'))}</b>{test}"


def _submissions(r: dict[str, Any]) -> str:
    out = Capped(SUBMISSIONS_BYTES)
    for s in r.get("submissions") or []:
        sig = s.get("significance") or {}
        copy = ' <span class="note">(base copy)</span>' if s.get("is_base_copy") else ""
        error = f'<span class="bad">{text(s.get("error"))}</span>' if s.get("error") else "-"
        out.add(f"<tr><td class=\"num\">{num(s.get('submission_id'))}</td><td>{human_duration(s.get('elapsed_s'))}</td>"
                f"<td>{text(s.get('status'))}</td><td class=\"num\">{num(s.get('score'))}</td>"
                f"<td class=\"num\">{signed(s.get('improvement'))}</td><td class=\"num\">{num(s.get('eval_seconds'), 1)}</td>"
                f"<td class=\"num\">{num(s.get('revision'))}</td><td>{code(s.get('model_path'), 500)}{copy}</td>"
                f"<td>{error}</td><td>{_compared(sig.get('vs_baseline'))}</td>"
                f"<td>{_compared(sig.get('vs_previous_best'))}</td></tr>\n")
    if not out.parts and not out.dropped:
        return "<p>No submission.</p>"
    head = "".join(f"<th>{h}</th>" for h in ("#", "at", "status", "score", "vs baseline", "eval s", "revision",
                                             "model", "error", "paired vs baseline (points, 95%)",
                                             "paired vs the best before it"))
    return f"<table><thead><tr>{head}</tr></thead><tbody>\n{out.html()}</tbody></table>" + _cut_note(out, "submissions")


def _at(found: dict[str, Any]) -> str:
    where = f"{found.get('path')}:{found.get('line')}" if found.get("line") else found.get("path")
    return code(where, 500)


def _found(items: list[dict[str, Any]]) -> str:
    rows = "".join(f"<li>{_at(e)} {code(e.get('text'), MAX_CODE)}</li>" for e in items[:MAX_LIST])
    more = f'<li class="cut">… {len(items) - MAX_LIST:,} more</li>' if len(items) > MAX_LIST else ""
    return f"<ul>{rows}{more}</ul>"


def _when(at: Any) -> str:
    return text(iso(at) if isinstance(at, int | float) and not isinstance(at, bool) else at)


def _lr(it: dict[str, Any]) -> str:
    lr = (it.get("key_config") or {}).get("lr")
    return code(lr.get("value"), 40) if isinstance(lr, dict) else "-"


def _iteration(it: dict[str, Any], narrated: dict[int, dict[str, Any]]) -> str:
    sub = f"submission {int(it['submission_id'])}" if it.get("submission_id") is not None else "no submission"
    online = " (online)" if it.get("online") else ""
    sig = f" ({text(it['significance'])} vs the baseline)" if it.get("significance") else ""
    n = int(it.get("iteration") or 0)
    parts = [f'<details id="iteration-{n}"><summary>Iteration {n}: {sub}, {text(it.get("train_type"))}{online}, '
             f'{text(it.get("status"))}, score {num(it.get("score"))}{sig}</summary>']
    t = it.get("time") or {}
    parts.append(f"<p>{human_duration(it.get('duration_s'))} long, ending {human_duration(it.get('elapsed_s'))} into the "
                 "run: " + ", ".join(f"{k.removesuffix('_s')} {num(t.get(k), 0)} s" for k in TIME_KINDS) + "</p>")
    if it.get("train_evidence"):
        parts.append(f"<h4>Trained as {text(it.get('train_type'))}: evidence</h4>" + _found(it["train_evidence"]))
    if it.get("online_evidence"):
        parts.append("<h4>Online rollouts: evidence</h4>" + _found(it["online_evidence"]))
    config = it.get("key_config") or {}
    if config:
        rows = [(text(k), code(v.get("value")), _at(v), text(v.get("source"))) for k, v in list(config.items())[:MAX_LIST]]
        parts.append("<h4>Key configuration</h4>" + table(("setting", "value", "where", "source"), rows))
    changes = it.get("changes") or {}
    parts.append(f"<h4>Changed since the previous submission</h4><p>{text(changes.get('summary') or 'no change')}</p>")
    files = changes.get("files") or []
    if files:
        rows = [(code(f.get("path"), 500), text(f.get("status")), f"+{num(f.get('added'))}", f"-{num(f.get('removed'))}")
                for f in files[:MAX_LIST]]
        parts.append(table(("file", "status", "added", "removed"), rows, numeric=(2, 3)))
    if it.get("key_code"):
        parts.append("<h4>Key code</h4>" + _found(it["key_code"]))
    if it.get("commands"):
        commands = "".join(f"<li>{code(c, MAX_CODE)}</li>" for c in it["commands"][:MAX_LIST])
        parts.append(f"<h4>Commands</h4><ul>{commands}</ul>")
    if it.get("failure_type") or it.get("problems") or it.get("failure_evidence"):
        signals = [f"<li>{text(s.get('kind'), 100)} at {_when(s.get('at'))}: {code(s.get('text'), MAX_CODE)}</li>"
                   for s in (it.get("failure_evidence") or [])[:MAX_LIST]]
        parts.append(f'<h4>Failure: <span class="bad">{text(it.get("failure_type") or "-")}</span></h4><ul>'
                     + "".join(f"<li>{text(p)}</li>" for p in (it.get("problems") or [])[:MAX_LIST])
                     + "".join(signals) + "</ul>")
    if it.get("agent_summary"):
        parts.append("<h4>The agent's own summary.md about it (its words, not checked)</h4>"
                     + pre(it["agent_summary"], 4000))
    entry = narrated.get(n)
    if entry is not None:
        said = pre(entry["text"], 4000) if entry.get("text") else f"<p>no narrative: {text(entry.get('error') or '?')}</p>"
        parts.append("<h4>Narrative (written by the summarizer)</h4>" + said)
    parts.append("</details>\n")
    return "".join(parts)


def _iterations(r: dict[str, Any]) -> str:
    if r.get("diagnosis_error"):
        return f"<p>Not diagnosed: {text(r['diagnosis_error'])}</p>"
    its = r.get("iterations") or []
    if not its:
        return "<p>No iteration.</p>"
    narrative = r.get("narrative") or {}
    narrated = {int(e["iteration"]): e for e in narrative.get("entries") or [] if isinstance(e, dict) and "iteration" in e}
    rows = Capped(ITERATION_ROWS_BYTES)
    for it in its:
        t, n = it.get("time") or {}, int(it.get("iteration") or 0)
        rows.add(row((f'<a href="#iteration-{n}">{n}</a>', num(it.get("submission_id")), text(it.get("status"), 100),
                      num(it.get("score")), signed(it.get("improvement")),
                      text(it.get("train_type"), 100) + (" (online)" if it.get("online") else ""), _lr(it),
                      text(it.get("failure_type"), 100), num(t.get("training_s"), 0),
                      num(t.get("evaluating_s"), 0), num(t.get("idle_s"), 0)), (1, 3, 4, 8, 9, 10)))
    out = Capped(ITERATIONS_BYTES)
    for it in its:
        out.add(_iteration(it, narrated))
    head = f"<p>Route: <b id=\"route\">{text(r.get('route'))}</b></p>"
    if narrative:
        head += (f"<p class=\"note\">Narrative by {code(narrative.get('model'))}: {num(narrative.get('calls_total'))} calls"
                 + (f"; {text(narrative['error'])}" if narrative.get("error") else "") + "</p>")
    return (head + table_of(("#", "submission", "status", "score", "improvement", "training", "learning rate",
                             "failure", "training s", "eval s", "idle s"), rows.html())
            + _cut_note(rows, "iterations in this table") + out.html() + _cut_note(out, "iterations"))


def _metrics(r: dict[str, Any]) -> str:
    rows = [(text(k), num(v, 3)) for k, v in (r.get("metrics") or {}).items()]
    return table(("metric", "value"), rows, numeric=(1,))


def _warnings(r: dict[str, Any]) -> str:
    warnings = r.get("warnings") or []
    if not warnings:
        return "<p>None.</p>"
    out = Capped(WARNINGS_BYTES)
    for w in warnings:
        out.add(f"<li>{text(w.get('at'))} {text(w.get('source'))}/{text(w.get('kind'))}: {text(w.get('message'))}</li>\n")
    return f"<ul>{out.html()}</ul>" + _cut_note(out, "warnings (run.db's events table holds them)")


def _trajectory(r: dict[str, Any]) -> str:
    svg = trajectory_svg(r)
    if len(svg.encode("utf-8")) > SVG_BYTES:
        return '<p class="cut">Too many points to draw here (the page\'s size cap): report/trajectory.svg has them.</p>'
    return svg


def render_html(run_dir: Path, report: dict[str, Any] | None = None) -> str:
    """The page (a str); ``report``: ``build_report(run_dir)``'s dict, built here when not given."""
    run_dir = Path(run_dir)
    r = report if report is not None else build_report(run_dir)
    body = {
        "summary": _summary(r),
        "trajectory": _trajectory(r),
        "submissions": _submissions(r),
        "iterations": _iterations(r),
        "items": item_flips_html(run_dir),
        "metrics": _metrics(r) + _contamination_hits(r.get("contamination")),
        "transcript": transcript_html(run_dir),
        "warnings": _warnings(r),
    }
    nav = "".join(f'<a href="#{key}">{title}</a>' for key, title in SECTIONS)
    sections = "".join(f'<section id="{key}"><h2>{title}</h2>\n{body[key]}\n</section>\n' for key, title in SECTIONS)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
            '<meta name="referrer" content="no-referrer">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>Run {text(r.get('run_id'))}</title>\n<style>{CSS}</style></head>\n<body>\n"
            f'<h1>Run <span id="run-id">{text(r.get("run_id"))}</span></h1>\n<nav>{nav}</nav>\n{sections}'
            f"<footer class=\"note\"><p>Written by agent2rl-tui from the run's record; report generated "
            f"{text(r.get('generated_at'))}. Text the agent made is shown as text, control characters as "
            "escapes; long texts and lists are cut where the page says so.</p></footer>\n</body></html>\n")


def write_html(run_dir: Path, out: Path | None = None, report: dict[str, Any] | None = None) -> Path:
    """Write the page (default ``report/report.html`` of the run) and return its path; ``report``:
    the report just written (``write_report``'s), so it is not built again."""
    run_dir = Path(run_dir)
    path = Path(out) if out is not None else run_dir / "report" / HTML_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(render_html(run_dir, report), encoding="utf-8")
    tmp.replace(path)
    return path
